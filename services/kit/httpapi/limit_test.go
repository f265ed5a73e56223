package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
)

// blocked serves a router bounded to slots requests whose /slow handler
// blocks until release is closed; entered counts the handlers entered.
func blocked(t testing.TB, slots int, wait time.Duration, shed *atomic.Int64) (srv *httptest.Server, release chan struct{}, entered *atomic.Int64) {
	t.Helper()
	release, entered = make(chan struct{}), new(atomic.Int64)
	lim := httpapi.NewLimiter(slots, wait, func() { shed.Add(1) }, nil)
	r := httpapi.NewRouter(httpapi.RouterOptions{Limiter: lim})
	slow := func(w http.ResponseWriter, _ *http.Request) {
		entered.Add(1)
		<-release
		httpapi.WriteJSON(w, http.StatusAccepted, map[string]string{"ok": "yes"})
	}
	r.Post("/slow", slow)
	r.Get("/tasks/{id}/wait", slow)
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	srv = httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return srv, release, entered
}

func TestLimiterShedsWith503AndRetryAfter(t *testing.T) {
	t.Parallel()
	var shed atomic.Int64
	srv, release, entered := blocked(t, 2, 5*time.Millisecond, &shed)
	var wg sync.WaitGroup
	statuses := make([]int, 2)
	for i := range 2 {
		wg.Go(func() {
			resp, err := http.Post(srv.URL+"/slow", "application/json", nil)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			statuses[i] = resp.StatusCode
		})
	}
	deadline := time.Now().Add(5 * time.Second)
	for entered.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	// Long polls and probes pass while every slot is taken.
	go func() {
		resp, err := http.Get(srv.URL + "/tasks/x/wait")
		if err == nil {
			resp.Body.Close()
		}
	}()
	for entered.Load() < 3 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if entered.Load() != 3 {
		t.Fatalf("%d handlers entered, want 2 bounded and 1 long poll", entered.Load())
	}
	if resp, err := http.Get(srv.URL + "/healthz"); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz while full: %v %v", resp, err)
	}
	resp, err := http.Post(srv.URL+"/slow", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]string
	_ = json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" || body["error"] == "" {
		t.Errorf("third request: %d Retry-After %q body %v, want 503, 1 and an error", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if entered.Load() != 3 || shed.Load() != 1 {
		t.Errorf("entered %d, shed %d: the shed request must not reach its handler, and be counted once", entered.Load(), shed.Load())
	}
	close(release)
	wg.Wait()
	if statuses[0] != http.StatusAccepted || statuses[1] != http.StatusAccepted {
		t.Errorf("the requests in flight answered %v, want 202s", statuses)
	}
	// The slots are free again.
	if resp, err := http.Post(srv.URL+"/slow", "application/json", nil); err != nil || resp.StatusCode != http.StatusAccepted {
		t.Errorf("after the release: %v %v", resp, err)
	}
}

func TestLimiterWaitQueuesAShortBurst(t *testing.T) {
	t.Parallel()
	var shed atomic.Int64
	srv, release, entered := blocked(t, 1, 5*time.Second, &shed)
	done := make(chan int, 2)
	for range 2 {
		go func() {
			resp, err := http.Post(srv.URL+"/slow", "application/json", nil)
			if err != nil {
				done <- 0
				return
			}
			resp.Body.Close()
			done <- resp.StatusCode
		}()
	}
	deadline := time.Now().Add(5 * time.Second)
	for entered.Load() < 1 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
	if entered.Load() != 1 {
		t.Fatalf("entered %d, want 1 (the second waits for the slot)", entered.Load())
	}
	close(release)
	for range 2 {
		if s := <-done; s != http.StatusAccepted {
			t.Errorf("status %d, want 202: a request that got a slot within MAX_IN_FLIGHT_WAIT is served", s)
		}
	}
	if shed.Load() != 0 {
		t.Errorf("shed %d, want 0", shed.Load())
	}
}

func TestLimiterZeroIsUnbounded(t *testing.T) {
	t.Parallel()
	var shed atomic.Int64
	lim := httpapi.NewLimiter(0, 0, func() { shed.Add(1) }, nil)
	h := lim.Middleware(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	for range 3 {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/tasks", nil))
		if rec.Code != http.StatusNoContent {
			t.Fatalf("status %d", rec.Code)
		}
	}
}

func TestUnbounded(t *testing.T) {
	t.Parallel()
	for path, want := range map[string]bool{
		"/healthz": true, "/readyz": true, "/metrics": true, "/stats": true, "/queue": true, "/consumer": true,
		"/tasks/abc/wait": true, "/events/abc/wait": true, "/subscribe": true,
		"/tasks": false, "/tasks/batch": false, "/events": false, "/streams/s/events": false, "/users/search": false,
	} {
		if got := httpapi.Unbounded(httptest.NewRequest(http.MethodGet, path, nil)); got != want {
			t.Errorf("Unbounded(%s) = %v, want %v", path, got, want)
		}
	}
	// A header must not open the bound: only /subscribe streams events.
	for _, path := range []string{"/tasks/batch", "/streams/s", "/users/search"} {
		r := httptest.NewRequest(http.MethodPost, path, nil)
		r.Header.Set("Accept", "text/event-stream")
		if httpapi.Unbounded(r) {
			t.Errorf("POST %s with Accept: text/event-stream bypasses the bound", path)
		}
	}
}

// TestShedKeepsTheConnection: a shed answers without reading the
// request's body, and must still leave the connection open for the next
// request. Under overload a shed that closed its connection would make
// every client dial again, and the service pay a TCP handshake per
// refusal.
func TestShedKeepsTheConnection(t *testing.T) {
	t.Parallel()
	var shed atomic.Int64
	srv, release, entered := blocked(t, 1, 0, &shed)
	go func() {
		resp, err := http.Post(srv.URL+"/slow", "application/json", nil)
		if err == nil {
			resp.Body.Close()
		}
	}()
	deadline := time.Now().Add(5 * time.Second)
	for entered.Load() < 1 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	defer close(release)
	var dials atomic.Int64
	d := &net.Dialer{Timeout: 5 * time.Second}
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return d.DialContext(ctx, network, addr)
	}}
	t.Cleanup(tr.CloseIdleConnections)
	c := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	body := `{"kind":"load","payload":{"pad":"` + strings.Repeat("x", 4096) + `"}}`
	for i := range 50 {
		resp, err := c.Post(srv.URL+"/slow", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || resp.Close {
			t.Fatalf("request %d: %d Retry-After %q Connection: close %v, want a 503 with Retry-After that keeps the connection",
				i, resp.StatusCode, resp.Header.Get("Retry-After"), resp.Close)
		}
	}
	if n := dials.Load(); n != 1 {
		t.Errorf("50 shed requests took %d connections, want 1", n)
	}
	if shed.Load() != 50 {
		t.Errorf("shed %d, want 50", shed.Load())
	}
}
