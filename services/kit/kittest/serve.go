package kittest

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service"
)

// Serve runs svc (which must have been built with ADDR 127.0.0.1:0 or
// another free address) until the test ends, then shuts it down as a
// signal would and fails the test if the shutdown fails. It returns the
// base URL.
func Serve(t testing.TB, svc *service.Service) string {
	t.Helper()
	if err := svc.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("service shutdown: %v", err)
			}
		case <-time.After(60 * time.Second):
			t.Errorf("service did not shut down within 60s")
		}
	})
	return "http://" + svc.Addr().String()
}

// GetJSON issues GET base+path and decodes the JSON answer into a map.
func GetJSON(t testing.TB, url string) (int, map[string]any) {
	t.Helper()
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatalf("GET %s: body is not a JSON object: %v", url, err)
	}
	return resp.StatusCode, m
}

// CheckShared checks the endpoints every service shares: /healthz and
// /readyz answer 200, /stats has the shared shape and names the service,
// and an unknown route is a JSON 404.
func CheckShared(t testing.TB, base, service, pair, backend string) {
	t.Helper()
	if s, m := GetJSON(t, base+"/healthz"); s != 200 || m["status"] != "ok" {
		t.Errorf("/healthz: %d %v", s, m)
	}
	if s, m := GetJSON(t, base+"/readyz"); s != 200 {
		t.Errorf("/readyz: %d %v", s, m)
	}
	s, m := GetJSON(t, base+"/stats")
	if s != 200 || m["service"] != service || m["pair"] != pair || m["backend"] != backend {
		t.Errorf("/stats: %d %v, want service=%s pair=%s backend=%s", s, m, service, pair, backend)
	}
	for _, k := range []string{"started_at", "uptime_s", "since_reset_s", "counters", "latencies"} {
		if _, ok := m[k]; !ok {
			t.Errorf("/stats lacks %q", k)
		}
	}
	if s, m := GetJSON(t, base+"/no/such/route"); s != 404 || m["error"] == nil {
		t.Errorf("unknown route: %d %v", s, m)
	}
}
