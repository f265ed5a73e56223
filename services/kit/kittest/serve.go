package kittest

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/stats"
)

// ReadConfig reads a service's Config with read (its readConfig) from the
// variables ADDR=127.0.0.1:0 (a free port, for Serve and Start) and those
// of env, later maps overriding earlier ones. A refused Config fails the
// test.
func ReadConfig[C any](t testing.TB, read func(*config.Reader) (C, error), env ...map[string]string) C {
	t.Helper()
	m := map[string]string{"ADDR": "127.0.0.1:0"}
	for _, e := range env {
		maps.Copy(m, e)
	}
	cfg, err := read(config.FromMap(m))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	return cfg
}

// Serve runs svc (which must have been built with ADDR 127.0.0.1:0 or
// another free address) until the test ends, then shuts it down as a
// signal would and fails the test if the shutdown fails. It returns the
// base URL.
func Serve(t testing.TB, svc *service.Service) string {
	t.Helper()
	base, _ := Start(t, svc)
	return base
}

// Start is Serve that also returns stop, which shuts svc down as a signal
// would (HTTP drain, then the OnStop hooks) and waits up to a minute for
// it, failing the test if the shutdown fails or takes longer. stop is safe
// to call more than once, and runs when the test ends if it was not called
// before: a test restarts a service by calling stop, then building and
// starting a new one on the same schema, queue or topic.
func Start(t testing.TB, svc *service.Service) (base string, stop func()) {
	t.Helper()
	if err := svc.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	stop = sync.OnceFunc(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("service shutdown: %v", err)
			}
		case <-time.After(time.Minute):
			t.Errorf("service did not shut down within a minute")
		}
	})
	t.Cleanup(stop)
	return "http://" + svc.Addr().String(), stop
}

// Logger returns the logger a service under test logs with: none, or in
// a -v run the one cfg (the service's Config, which embeds
// service.Common) describes, on stderr.
func Logger(cfg interface{ NewLogger(io.Writer) *slog.Logger }) *slog.Logger {
	if testing.Verbose() {
		return cfg.NewLogger(os.Stderr)
	}
	return slog.New(slog.DiscardHandler)
}

// GetJSON issues GET url and decodes the JSON answer into a map.
func GetJSON(t testing.TB, url string) (int, map[string]any) {
	t.Helper()
	resp, raw := Send(t, NewRequest(t, http.MethodGet, url, nil))
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("GET %s: body is not a JSON object: %v", url, err)
	}
	return resp.StatusCode, m
}

// CheckShared checks the endpoints every service shares: /healthz and
// /readyz answer 200, /stats has the shared shape and names the service,
// GET / names the service and its pair and links to documents that
// answer 200, and an unknown route is a JSON 404.
func CheckShared(t testing.TB, base, service, pair, backend string) {
	t.Helper()
	if s, m := GetJSON(t, base+"/healthz"); s != 200 || m["status"] != "ok" {
		t.Errorf("/healthz: %d %v", s, m)
	}
	// Readiness is a state, not a constant: a broker connection that
	// drops just after the start (a loaded CI root saw "connection down
	// (reconnecting)") makes it 503 until the reconnect; what is checked
	// is that it answers 200 once the service is ready.
	var rs int
	var rm map[string]any
	defer func() { // runs on Eventually's Fatalf too: the last answer
		if rs != 200 {
			t.Logf("/readyz last answered %d %v", rs, rm)
		}
	}()
	Eventually(t, 30*time.Second, "/readyz to answer 200", func() bool { rs, rm = GetJSON(t, base+"/readyz"); return rs == 200 })
	s, m := GetJSON(t, base+"/stats")
	if s != 200 || m["service"] != service || m["pair"] != pair || m["backend"] != backend {
		t.Errorf("/stats: %d %v, want service=%s pair=%s backend=%s", s, m, service, pair, backend)
	}
	for _, k := range []string{"started_at", "uptime_s", "since_reset_s", "counters", "latencies"} {
		if _, ok := m[k]; !ok {
			t.Errorf("/stats lacks %q", k)
		}
	}
	s, m = GetJSON(t, base+"/")
	links, _ := m["links"].(map[string]any)
	if s != 200 || m["service"] != service || m["pair"] != pair || m["backend"] != backend || links == nil {
		t.Errorf("GET /: %d %v, want service=%s pair=%s backend=%s and links", s, m, service, pair, backend)
	}
	for _, name := range []string{"openapi", "stats", "metrics"} {
		path, _ := links[name].(string)
		if path == "" {
			t.Errorf("GET / has no link %q: %v", name, links)
			continue
		}
		resp, err := http.Get(base + path)
		if err != nil {
			t.Errorf("GET / links %s to %s: %v", name, path, err)
			continue
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET / links %s to %s, which answers %d", name, path, resp.StatusCode)
		}
	}
	if s, m := GetJSON(t, base+"/no/such/route"); s != 404 || m["error"] == nil {
		t.Errorf("unknown route: %d %v", s, m)
	}
}

// NewService returns a service described by info, listening on a free
// port with the kit's default HTTP settings (bodyLimit, when not zero,
// replaces the default BODY_LIMIT) and the /stats names given, for a test
// that mounts a contract on a backend of its own (the contracts' memory
// packages). Start it with Start, Serve or an Instance.
func NewService(t testing.TB, info stats.Info, bodyLimit int64, latencies, counters []string) *service.Service {
	t.Helper()
	if bodyLimit == 0 {
		bodyLimit = httpapi.DefaultBodyLimit
	}
	r := config.FromMap(map[string]string{"ADDR": "127.0.0.1:0"})
	c := service.ReadCommon(r, "127.0.0.1:0", bodyLimit)
	if err := r.Err(); err != nil {
		t.Fatalf("HTTP settings: %v", err)
	}
	return service.New(info, c.HTTP, Logger(c), latencies, counters)
}
