package service

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/stats"
)

func testService(t testing.TB) *Service {
	t.Helper()
	c := ReadCommon(config.FromMap(map[string]string{"ADDR": "127.0.0.1:0", "SHUTDOWN_TIMEOUT": "5s"}), ":0", 1<<20)
	svc := New(stats.Info{Service: "test", Pair: "none", Backend: "none"}, c.HTTP, slog.New(slog.DiscardHandler), []string{"work"}, nil)
	if err := svc.Listen(); err != nil {
		t.Fatal(err)
	}
	return svc
}

// TestShutdownDrainsThenStopsInOrder sends SIGTERM to the test process
// while a request is in flight: the request must complete, new connections
// must be refused, and the hooks must run after the drain, consumer before
// pool.
func TestShutdownDrainsThenStopsInOrder(t *testing.T) {
	svc := testService(t)
	started := make(chan struct{})
	svc.Router.Get("/slow", func(w http.ResponseWriter, r *http.Request) {
		close(started)
		time.Sleep(300 * time.Millisecond)
		w.Write([]byte(`{"done":true}`))
	})
	var mu sync.Mutex
	var order []string
	record := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		order = append(order, s)
	}
	svc.OnStop("pool", func(context.Context) error { record("pool closed"); return nil })
	svc.OnStop("consumer", func(context.Context) error { record("consumer stopped"); return nil })

	ctx, stop := SignalContext()
	defer stop()
	runErr := make(chan error, 1)
	go func() { runErr <- svc.Run(ctx) }()

	base := "http://" + svc.Addr().String()
	type result struct {
		status int
		body   string
		err    error
	}
	slow := make(chan result, 1)
	go func() {
		resp, err := http.Get(base + "/slow")
		if err != nil {
			slow <- result{err: err}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		record("request finished")
		slow <- result{status: resp.StatusCode, body: string(b)}
	}()
	<-started
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-svc.Stopping():
	case <-time.After(5 * time.Second):
		t.Fatal("Stopping was not closed after SIGTERM")
	}
	r := <-slow
	if r.err != nil || r.status != 200 || r.body != `{"done":true}` {
		t.Fatalf("in-flight request was not drained: %+v", r)
	}
	if err := <-runErr; err != nil {
		t.Fatalf("Run: %v", err)
	}
	mu.Lock()
	got := append([]string(nil), order...)
	mu.Unlock()
	want := []string{"request finished", "consumer stopped", "pool closed"}
	if len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("order %v, want %v", got, want)
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Fatal("server still accepts connections after shutdown")
	}
	if err := svc.Stop(context.Background()); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}

func TestStopIsSafeTwiceAndReportsHookErrors(t *testing.T) {
	t.Parallel()
	svc := testService(t)
	calls := 0
	svc.OnStop("consumer", func(context.Context) error { calls++; return errors.New("lost connection") })
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Go(func() { errs[i] = svc.Stop(context.Background()) })
	}
	wg.Wait()
	if calls != 1 {
		t.Fatalf("hook ran %d times", calls)
	}
	for _, err := range errs {
		if err == nil || err.Error() != "stop consumer: lost connection" {
			t.Fatalf("Stop = %v", err)
		}
	}
}

func TestProbes(t *testing.T) {
	t.Parallel()
	svc := testService(t)
	var healthy sync.Map
	healthy.Store("v", true)
	svc.Ready("postgres", func(context.Context) error {
		if v, _ := healthy.Load("v"); v.(bool) {
			return nil
		}
		return errors.New("connection refused")
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	base := "http://" + svc.Addr().String()

	get := func(path string) (int, map[string]any) {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		return resp.StatusCode, m
	}
	if s, _ := get("/healthz"); s != 200 {
		t.Errorf("/healthz %d", s)
	}
	if s, m := get("/readyz"); s != 200 || m["checks"].(map[string]any)["postgres"] != "ok" {
		t.Errorf("/readyz %d %v", s, m)
	}
	var brokerDown sync.Map
	brokerDown.Store("v", false)
	svc.Ready("broker", func(context.Context) error {
		if v, _ := brokerDown.Load("v"); v.(bool) {
			return Degraded(errors.New("connection down; writes go to the outbox"))
		}
		return Degraded(nil)
	})
	if s, m := get("/readyz"); s != 200 || m["status"] != "ready" || m["checks"].(map[string]any)["broker"] != "ok" {
		t.Errorf("/readyz with a Degraded(nil) check: %d %v", s, m)
	}
	brokerDown.Store("v", true)
	if s, m := get("/readyz"); s != 200 || m["status"] != "degraded" ||
		m["checks"].(map[string]any)["broker"] != "degraded: connection down; writes go to the outbox" {
		t.Errorf("/readyz with a degraded part: %d %v, want 200 and the part named", s, m)
	}
	healthy.Store("v", false)
	if s, m := get("/readyz"); s != 503 || m["error"] == nil {
		t.Errorf("/readyz with a dead backend: %d %v", s, m)
	}
	if s, m := get("/stats"); s != 200 || m["service"] != "test" {
		t.Errorf("/stats %d %v", s, m)
	}
	resp, err := http.Get(base + "/metrics")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("/metrics %v %v", resp, err)
	}
	resp.Body.Close()
}

// TestRunThenCancelNeverPanics runs and cancels many services: Run's
// watcher and Stop both mark the service stopping, and used to race into
// closing the channel twice.
func TestRunThenCancelNeverPanics(t *testing.T) {
	t.Parallel()
	for range 300 {
		svc := testService(t)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- svc.Run(ctx) }()
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

func TestReadCommonBackendTimeoutAndDeprecations(t *testing.T) {
	t.Parallel()
	r := config.FromMap(map[string]string{"MONGO_TIMEOUT": "3s"})
	r.Rename("MONGO_TIMEOUT", "BACKEND_TIMEOUT")
	c := ReadCommon(r, ":8085", 1<<20)
	if err := r.Err(); err != nil || c.BackendTimeout != 3*time.Second {
		t.Fatalf("BackendTimeout = %v, err %v; want 3s from the old name", c.BackendTimeout, err)
	}
	var buf bytes.Buffer
	LogDeprecations(slog.New(slog.NewTextHandler(&buf, nil)), r)
	if got := buf.String(); strings.Count(got, "level=WARN") != 1 || !strings.Contains(got, "old=MONGO_TIMEOUT new=BACKEND_TIMEOUT") {
		t.Errorf("want one warning naming old and new, got %q", got)
	}
	r = config.FromMap(map[string]string{"BACKEND_TIMEOUT": "0s"})
	ReadCommon(r, ":8085", 1<<20)
	if err := r.Err(); err == nil || !strings.Contains(err.Error(), "BACKEND_TIMEOUT:") {
		t.Errorf("Err = %v, want BACKEND_TIMEOUT named", err)
	}
}

// TestDebugListenerOffByDefault checks that without DEBUG_ADDR no
// profiling listener is bound and the service's own router does not serve
// /debug/pprof/.
func TestDebugListenerOffByDefault(t *testing.T) {
	t.Parallel()
	svc := testService(t)
	if a := svc.DebugAddr(); a != nil {
		t.Fatalf("DEBUG_ADDR unset, but a profiling listener is bound on %v", a)
	}
	base, stop := runService(t, svc)
	defer stop()
	checkNoPprof(t, base)
}

// TestDebugListenerServesPprof sets DEBUG_ADDR: its own listener serves
// /debug/pprof/ and a goroutine profile, while ADDR still does not.
func TestDebugListenerServesPprof(t *testing.T) {
	t.Parallel()
	c := ReadCommon(config.FromMap(map[string]string{"ADDR": "127.0.0.1:0", "DEBUG_ADDR": "127.0.0.1:0", "SHUTDOWN_TIMEOUT": "5s"}), ":0", 1<<20)
	if c.HTTP.DebugAddr != "127.0.0.1:0" {
		t.Fatalf("DebugAddr = %q, want 127.0.0.1:0", c.HTTP.DebugAddr)
	}
	svc := New(stats.Info{Service: "test", Pair: "none", Backend: "none"}, c.HTTP, slog.New(slog.DiscardHandler), nil, nil)
	if err := svc.Listen(); err != nil {
		t.Fatal(err)
	}
	if svc.DebugAddr() == nil {
		t.Fatal("DEBUG_ADDR set, but no profiling listener is bound")
	}
	if svc.DebugAddr().String() == svc.Addr().String() {
		t.Fatal("the profiling listener is the service's own listener")
	}
	base, stop := runService(t, svc)
	defer stop()
	debug := "http://" + svc.DebugAddr().String()
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/goroutine?debug=1"} {
		resp, err := http.Get(debug + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "goroutine") {
			t.Errorf("GET %s on DEBUG_ADDR answered %d %.200q", path, resp.StatusCode, b)
		}
	}
	checkNoPprof(t, base)
}

// checkNoPprof checks that the service's own listener at base does not
// serve /debug/pprof/.
func checkNoPprof(t testing.TB, base string) {
	t.Helper()
	resp, err := http.Get(base + "/debug/pprof/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /debug/pprof/ on ADDR answered %d, want 404", resp.StatusCode)
	}
}

// TestDebugAddrMustBeHostPort checks that a DEBUG_ADDR that is not
// host:port stops the service at start, naming the variable.
func TestDebugAddrMustBeHostPort(t *testing.T) {
	t.Parallel()
	r := config.FromMap(map[string]string{"DEBUG_ADDR": "6060"})
	ReadCommon(r, ":0", 1<<20)
	if err := r.Err(); err == nil || !strings.Contains(err.Error(), "DEBUG_ADDR") {
		t.Errorf("DEBUG_ADDR=6060: err = %v, want one naming DEBUG_ADDR", err)
	}
}

// runService runs svc until the returned stop is called (and at cleanup),
// and returns its base URL.
func runService(t testing.TB, svc *Service) (base string, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return "http://" + svc.Addr().String(), stop
}
