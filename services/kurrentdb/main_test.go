package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/eventstore/conformance"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service"
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

// start builds and starts the service with cfg (again on each Restart);
// it is stopped at the test's end.
func start(t testing.TB, cfg Config) *kittest.Instance[struct{}] {
	t.Helper()
	return kittest.StartInstance(t, func(t testing.TB) (struct{}, *service.Service) {
		svc, err := build(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			t.Fatal(err)
		}
		return struct{}{}, svc
	})
}

// TestConformance runs the shared suite against a real KurrentDB. Streams
// are unique per test (the suite names them), so runs share one server.
func TestConformance(t *testing.T) {
	url := kurrentURL(t)
	t.Parallel()
	features := conformance.Features{ConditionalAppend: true, ServerSideStreamRead: true, PushSubscription: true}
	conformance.Run(t, features, func(t testing.TB) conformance.Target {
		cfg := kittest.ReadConfig(t, readConfig, map[string]string{"KURRENTDB_URL": url, "SHUTDOWN_TIMEOUT": "10s"})
		return &target[struct{}]{service: "kurrentdb", backend: "kurrentdb", Instance: start(t, cfg)}
	})
}

// target implements conformance.Target.
type target[A any] struct {
	service, backend string
	*kittest.Instance[A]
}

func (tg *target[A]) Names() (service, backend string) { return tg.service, tg.backend }

// Crash is a Restart: an append is answered once the engine has it, so the
// process holds nothing a crash could lose.
func (tg *target[A]) Crash(t testing.TB) { tg.Restart(t) }

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
