package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/eventstore"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
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

func start(t testing.TB, cfg Config) (string, func()) {
	t.Helper()
	svc, err := build(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return kittest.Start(t, svc)
}

// TestConformance runs the shared suite against a real KurrentDB. Streams
// are unique per test (the suite names them), so runs share one server.
func TestConformance(t *testing.T) {
	url := kurrentURL(t)
	t.Parallel()
	eventstore.Run(t, func(t *testing.T) *eventstore.Target {
		cfg := kittest.ReadConfig(t, readConfig, map[string]string{"KURRENTDB_URL": url, "SHUTDOWN_TIMEOUT": "10s"})
		base, stop := start(t, cfg)
		tg := &eventstore.Target{
			BaseURL: base, Service: "kurrentdb", Backend: "kurrentdb",
			Features: eventstore.Features{ConditionalAppend: true, ServerSideStreamRead: true, PushSubscription: true},
		}
		tg.Restart = func(t testing.TB) string {
			stop()
			base, stop = start(t, cfg)
			return base
		}
		return tg
	})
}

func TestConfigNamesBadVariables(t *testing.T) {
	t.Parallel()
	_, err := readConfig(config.FromMap(map[string]string{
		"KURRENTDB_URL": "postgres://x", "SUBSCRIBE_PAGE_SIZE": "0", "BACKEND_TIMEOUT": "0s",
	}))
	for _, name := range []string{"KURRENTDB_URL", "SUBSCRIBE_PAGE_SIZE", "BACKEND_TIMEOUT"} {
		if err == nil || !strings.Contains(err.Error(), name+":") {
			t.Errorf("error does not name %s: %v", name, err)
		}
	}
	cfg, err := readConfig(config.FromMap(nil))
	if err != nil || cfg.HTTP.Addr != ":8089" || cfg.URL != DefaultURL {
		t.Errorf("defaults: %+v %v", cfg, err)
	}
}
