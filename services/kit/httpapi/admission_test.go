package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
)

// serveBounded serves, on a real listener with the server's timeouts,
// a router bounded by cfg's admission settings whose POST /tasks decodes
// its body and answers 202 after a short piece of work.
func serveBounded(t testing.TB, cfg httpapi.ServerConfig) (base string, lim *httpapi.Limiter, shed *atomic.Int64) {
	t.Helper()
	shed = new(atomic.Int64)
	lim = httpapi.NewServerLimiter(cfg, func() { shed.Add(1) }, nil)
	r := httpapi.NewRouter(httpapi.RouterOptions{Limiter: lim, BodyLimit: cfg.BodyLimit, Logger: slog.New(slog.DiscardHandler)})
	r.Method(http.MethodPost, "/tasks", httpapi.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		var in struct {
			Kind string `json:"kind"`
		}
		if err := httpapi.DecodeJSON(r, &in); err != nil {
			return err
		}
		time.Sleep(time.Millisecond)
		httpapi.WriteJSON(w, http.StatusAccepted, map[string]string{"kind": in.Kind})
		return nil
	}))
	srv, err := httpapi.Listen(cfg, r)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return "http://" + srv.Addr().String(), lim, shed
}

func testServerConfig() httpapi.ServerConfig {
	return httpapi.ServerConfig{
		Addr: "127.0.0.1:0", BodyLimit: httpapi.DefaultBodyLimit,
		ReadHeaderTimeout: 5 * time.Second, ReadTimeout: time.Minute, WriteTimeout: time.Minute,
		IdleTimeout: time.Minute, ShutdownTimeout: 5 * time.Second,
		MaxInFlight: httpapi.DefaultMaxInFlight, MaxInFlightWait: httpapi.DefaultMaxInFlightWait,
		MaxWaiters: httpapi.DefaultMaxWaiters, BodyReadTimeout: time.Minute,
	}
}

// slowBody opens a connection that declares a large body and sends one
// byte of it; it stays open until the test ends.
func slowBody(t testing.TB, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, err := fmt.Fprintf(c, "POST /tasks HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 500000\r\n\r\n{"); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestSlowBodiesHoldNoSlot is issue 26's attack: a few hundred
// connections each declaring a large body and sending one byte of it,
// against a service of 128 in-flight slots. Normal clients must keep
// getting 2xx while they are open: a body is read before its request
// takes a slot, so a slow sender holds none.
func TestSlowBodiesHoldNoSlot(t *testing.T) {
	t.Parallel()
	const slow = 300
	base, lim, shed := serveBounded(t, testServerConfig())
	addr := strings.TrimPrefix(base, "http://")
	for range slow {
		slowBody(t, addr)
	}
	// Every slow request is past its headers and reading its body.
	time.Sleep(200 * time.Millisecond)
	if n := lim.InFlight(); n != 0 {
		t.Fatalf("%d in-flight slots held by %d slow bodies, want 0", n, slow)
	}
	c := &http.Client{Timeout: 10 * time.Second}
	var wg sync.WaitGroup
	var bad atomic.Int64
	var firstBad atomic.Value
	for w := range 8 {
		wg.Go(func() {
			for i := range 25 {
				resp, err := c.Post(base+"/tasks", "application/json", strings.NewReader(fmt.Sprintf(`{"kind":"normal-%d-%d"}`, w, i)))
				if err != nil {
					bad.Add(1)
					firstBad.CompareAndSwap(nil, err.Error())
					continue
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusAccepted {
					bad.Add(1)
					firstBad.CompareAndSwap(nil, fmt.Sprintf("%d %s", resp.StatusCode, b))
				}
			}
		})
	}
	wg.Wait()
	if n := bad.Load(); n > 0 {
		t.Fatalf("%d of 200 normal requests failed while %d slow bodies were open; first: %v", n, slow, firstBad.Load())
	}
	if shed.Load() != 0 {
		t.Errorf("shed %d, want 0", shed.Load())
	}
}

// TestBodyReadTimeoutAnswers408: a body that does not arrive within
// BODY_READ_TIMEOUT is answered 408 with a JSON error, and the
// connection is closed.
func TestBodyReadTimeoutAnswers408(t *testing.T) {
	t.Parallel()
	cfg := testServerConfig()
	cfg.BodyReadTimeout = 300 * time.Millisecond
	base, lim, _ := serveBounded(t, cfg)
	c := slowBody(t, strings.TrimPrefix(base, "http://"))
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled body: %v", err)
	}
	defer resp.Body.Close()
	var body map[string]string
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("408 body is not JSON: %v", err)
	}
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(body["error"], "BODY_READ_TIMEOUT") || !resp.Close {
		t.Errorf("stalled body: %d %v close=%v, want 408 naming BODY_READ_TIMEOUT and Connection: close", resp.StatusCode, body, resp.Close)
	}
	if lim.InFlight() != 0 {
		t.Errorf("%d slots held", lim.InFlight())
	}
	// A body that arrives in time is served.
	r2, err := http.Post(base+"/tasks", "application/json", strings.NewReader(`{"kind":"ok"}`))
	if err != nil {
		t.Fatal(err)
	}
	r2.Body.Close()
	if r2.StatusCode != http.StatusAccepted {
		t.Errorf("normal request after a timed-out one: %d", r2.StatusCode)
	}
}

// TestPrereadKeepsTheBodyLimit: reading the body before the slot changes
// nothing of the limit: over it is still 413, declared or streamed.
func TestPrereadKeepsTheBodyLimit(t *testing.T) {
	t.Parallel()
	cfg := testServerConfig()
	cfg.BodyLimit = httpapi.MinBodyLimit
	base, _, _ := serveBounded(t, cfg)
	big := `{"kind":"` + strings.Repeat("x", 2*httpapi.MinBodyLimit) + `"}`
	for name, body := range map[string]io.Reader{
		"declared": strings.NewReader(big),
		"chunked":  io.MultiReader(strings.NewReader(big)), // unknown length: sent chunked
	} {
		resp, err := http.Post(base+"/tasks", "application/json", body)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("%s: %d, want 413", name, resp.StatusCode)
		}
	}
}

// TestAdmissionSettingsAreValidated: MAX_WAITERS and BODY_READ_TIMEOUT
// are read with their defaults, and a bad value names its variable.
func TestAdmissionSettingsAreValidated(t *testing.T) {
	t.Parallel()
	r := config.FromMap(map[string]string{})
	c := httpapi.ReadServerConfig(r, ":8082", httpapi.DefaultBodyLimit)
	if err := r.Err(); err != nil || c.MaxWaiters != httpapi.DefaultMaxWaiters || c.BodyReadTimeout != httpapi.DefaultBodyReadTimeout {
		t.Fatalf("defaults: %+v %v", c, err)
	}
	for env, name := range map[string]string{
		"MAX_WAITERS=-1":        "MAX_WAITERS",
		"MAX_WAITERS=2000000":   "MAX_WAITERS",
		"BODY_READ_TIMEOUT=0s":  "BODY_READ_TIMEOUT",
		"BODY_READ_TIMEOUT=31s": "BODY_READ_TIMEOUT", // past READ_TIMEOUT's 30s
	} {
		k, v, _ := strings.Cut(env, "=")
		r := config.FromMap(map[string]string{k: v})
		httpapi.ReadServerConfig(r, ":8082", httpapi.DefaultBodyLimit)
		if err := r.Err(); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v, want an error naming %s", env, err, name)
		}
	}
}
