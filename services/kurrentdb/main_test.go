package main

import (
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
