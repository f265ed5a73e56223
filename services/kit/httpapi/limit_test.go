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
	if body["kind"] != "shed" || resp.Header.Get(httpapi.KindHeader) != "shed" {
		t.Errorf("shed answer: kind %q, %s %q; want shed in both", body["kind"], httpapi.KindHeader, resp.Header.Get(httpapi.KindHeader))
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

// TestRouteClasses: the route a request matches, never its raw path or
// a header, decides its bound. A path that ends in /wait but is no wait
// route takes an in-flight slot; the wait routes take a waiter slot.
func TestRouteClasses(t *testing.T) {
	t.Parallel()
	var shed atomic.Int64
	lim := httpapi.NewLimiter(1, 0, func() { shed.Add(1) }, nil)
	lim.Configure(1, time.Second)
	r := httpapi.NewRouter(httpapi.RouterOptions{Limiter: lim})
	hold := make(chan struct{})
	entered := make(chan string, 16)
	handler := func(w http.ResponseWriter, req *http.Request) {
		entered <- req.URL.Path
		<-hold
		w.WriteHeader(http.StatusNoContent)
	}
	r.Get("/tasks/{id}/wait", handler)
	r.Get("/events/{id}/wait", handler)
	r.Get("/subscribe", handler)
	r.Get("/channels/{channel}/subscribe", handler)
	r.Post("/tasks", handler)
	r.Get("/users/{id}", handler) // /users/x/wait matches no route
	r.Get("/streams/{stream}", handler)
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	defer close(hold)
	start := func(method, path string) {
		go func() {
			req, _ := http.NewRequest(method, srv.URL+path, nil)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
		select {
		case <-entered:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s %s never reached its handler", method, path)
		}
	}
	status := func(method, path string) int {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, nil)
		req.Header.Set("Accept", "text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body map[string]string
		_ = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusServiceUnavailable && (resp.Header.Get("Retry-After") != "1" || body["error"] == "") {
			t.Errorf("%s %s: 503 without Retry-After or error: %v %v", method, path, resp.Header, body)
		}
		return resp.StatusCode
	}
	start(http.MethodGet, "/tasks/a/wait") // the one waiter slot
	start(http.MethodPost, "/tasks")       // the one in-flight slot
	for _, c := range []struct {
		method, path string
		want         int
	}{
		{http.MethodGet, "/healthz", http.StatusOK},                       // free
		{http.MethodGet, "/events/b/wait", http.StatusServiceUnavailable}, // waiter slots full
		{http.MethodGet, "/subscribe", http.StatusServiceUnavailable},
		{http.MethodGet, "/channels/c/subscribe", http.StatusServiceUnavailable},
		{http.MethodPost, "/tasks", http.StatusServiceUnavailable}, // in-flight slots full
		// Raw suffixes and headers open nothing: these are bounded.
		{http.MethodGet, "/users/x/wait", http.StatusServiceUnavailable},
		{http.MethodGet, "/streams/wait", http.StatusServiceUnavailable},
		{http.MethodPost, "/subscribe", http.StatusServiceUnavailable},
	} {
		if got := status(c.method, c.path); got != c.want {
			t.Errorf("%s %s = %d, want %d", c.method, c.path, got, c.want)
		}
	}
	if lim.Waiters() != 1 || lim.InFlight() != 1 {
		t.Errorf("waiters %d, in flight %d, want 1 and 1", lim.Waiters(), lim.InFlight())
	}
	if shed.Load() != 7 {
		t.Errorf("shed %d, want 7", shed.Load())
	}
}

// TestWaitersFreeTheirSlot: a waiter slot is given back when its request
// ends, the client's leaving included.
func TestWaitersFreeTheirSlot(t *testing.T) {
	t.Parallel()
	lim := httpapi.NewLimiter(0, 0, nil, nil)
	lim.Configure(2, time.Second)
	r := httpapi.NewRouter(httpapi.RouterOptions{Limiter: lim})
	r.Get("/tasks/{id}/wait", func(w http.ResponseWriter, req *http.Request) {
		<-req.Context().Done()
	})
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithCancel(context.Background())
	for range 2 {
		go func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/tasks/x/wait", nil)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
	}
	eventually(t, func() bool { return lim.Waiters() == 2 })
	cancel()
	eventually(t, func() bool { return lim.Waiters() == 0 })
}

func eventually(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within 5s")
		}
		time.Sleep(5 * time.Millisecond)
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
