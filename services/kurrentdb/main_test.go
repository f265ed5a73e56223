package main

import (
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config/configtest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/eventstore/conformance"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service/servicetest"
)

// kurrentURL returns KURRENTDB_URL or skips: KurrentDB cannot be installed
// on the project's machines, and no fake server stands in for it.
func kurrentURL(t testing.TB) string {
	t.Helper()
	u := strings.TrimSpace(os.Getenv("KURRENTDB_URL"))
	if u == "" {
		t.Skip("KURRENTDB_URL is not set: KurrentDB cannot be installed here; start it (docker compose up -d kurrentdb) and set KURRENTDB_URL=kurrentdb://localhost:2113?tls=false to run the conformance suite against it")
	}
	return u
}

// TestConformance runs the shared suite against a real KurrentDB. Streams
// are unique per test (the suite names them), so runs share one server.
func TestConformance(t *testing.T) {
	url := kurrentURL(t)
	t.Parallel()
	features := conformance.Features{ConditionalAppend: true, ServerSideStreamRead: true, PushSubscription: true}
	conformance.Run(t, features, func(t testing.TB) conformance.Target {
		cfg := kittest.ReadConfig(t, readConfig, map[string]string{"KURRENTDB_URL": url, "SHUTDOWN_TIMEOUT": "10s"})
		return &servicetest.Target[struct{}]{Service: "kurrentdb", Backend: "kurrentdb", Instance: servicetest.Start(t, build, cfg)}
	})
}

func TestConfigNamesBadVariables(t *testing.T) {
	t.Parallel()
	configtest.NamesBadVariables(t, readConfig, map[string]string{
		"KURRENTDB_URL": "postgres://x", "SUBSCRIBE_PAGE_SIZE": "0", "BACKEND_TIMEOUT": "0s",
	}, "KURRENTDB_URL", "SUBSCRIBE_PAGE_SIZE", "BACKEND_TIMEOUT")
	if cfg := configtest.Defaults(t, readConfig); cfg.HTTP.Addr != "127.0.0.1:8089" || cfg.URL != DefaultURL {
		t.Errorf("defaults: %+v", cfg)
	}
}

// TestNoServerNamesKurrentDB starts the service on a KURRENTDB_URL where
// nothing listens (a port the kernel gave and that was closed again): a
// write answers 503 naming KurrentDB and KURRENTDB_URL, not an anonymous
// "backend unavailable", and /readyz names the variable and its value.
func TestNoServerNamesKurrentDB(t *testing.T) {
	t.Parallel()
	url := "kurrentdb://" + kittest.ClosedAddr(t) + "?tls=false"
	cfg := kittest.ReadConfig(t, readConfig, map[string]string{"KURRENTDB_URL": url, "BACKEND_TIMEOUT": "2s"})
	base := servicetest.Start(t, build, cfg).URL()
	var body map[string]any
	status, raw := kittest.Do(t, http.MethodPost, base+"/streams/tank-1/events",
		map[string]any{"expected_version": "any", "events": []map[string]any{{"type": "Filled", "data": map[string]any{"litres": 1}}}}, &body)
	if msg, _ := body["error"].(string); status != http.StatusServiceUnavailable || !strings.Contains(msg, "KurrentDB") || !strings.Contains(msg, "KURRENTDB_URL") {
		t.Errorf("append with no server: %d %s; want 503 naming KurrentDB and KURRENTDB_URL", status, raw)
	}
	status, m := kittest.GetJSON(t, base+"/readyz")
	if msg, _ := m["error"].(string); status != http.StatusServiceUnavailable || !strings.Contains(msg, "kurrentdb unreachable (KURRENTDB_URL="+url+")") {
		t.Errorf("/readyz with no server: %d %v; want 503 naming KURRENTDB_URL=%s", status, m, url)
	}
}
