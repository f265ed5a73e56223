package main

import (
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue/conformance"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service"
)

// app is what assemble builds: the service and its queue.
type app struct {
	svc *service.Service
	q   *pgQueue
}

// instance is one running service.
type instance = kittest.Instance[app]

// start builds and serves an instance on schema with env on top of s.
func start(t testing.TB, url, schema string, s conformance.Settings, env map[string]string) *instance {
	t.Helper()
	return kittest.StartInstance(t, func(t testing.TB) (app, *service.Service) {
		return buildApp(t, url, schema, s, env)
	})
}

// buildApp assembles an instance on schema with env on top of s.
func buildApp(t testing.TB, url, schema string, s conformance.Settings, env map[string]string) (app, *service.Service) {
	t.Helper()
	cfg := kittest.ReadConfig(t, readConfig,
		map[string]string{"DATABASE_URL": url, "DATABASE_SCHEMA": schema, "SHUTDOWN_TIMEOUT": "10s"}, s.Env(), env)
	svc, q, err := assemble(kittest.Context(t, time.Minute), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return app{svc: svc, q: q}, svc
}

// target implements conformance.Target: one instance at a time on one
// schema, started with the settings it holds.
type target struct {
	url, schema string
	pool        *pgxpool.Pool
	settings    conformance.Settings
	*instance
}

func (tg *target) DB() *pgxpool.Pool                { return tg.pool }
func (tg *target) Configure(s conformance.Settings) { tg.settings = s }

// Crash stops the workers as a crash would (their claimed rows stay
// running until the lease expires), then starts a new instance.
func (tg *target) Crash(t testing.TB) {
	t.Helper()
	tg.App().q.Crash()
	tg.Restart(t)
}

func newTarget(t testing.TB, s conformance.Settings) conformance.Target {
	url := kittest.PostgresURL(t)
	schema := kittest.Schema(t, url)
	tg := &target{url: url, schema: schema, settings: s}
	tg.instance = kittest.StartInstance(t, func(t testing.TB) (app, *service.Service) {
		return buildApp(t, tg.url, tg.schema, tg.settings, nil)
	})
	tg.pool = kittest.Pool(t, url, schema)
	return tg
}

// TestConformance runs the pair's one suite against no-rabbitmq: the
// payment and its task commit in one transaction.
func TestConformance(t *testing.T) {
	t.Parallel()
	conformance.Run(t, conformance.Features{AtomicOutbox: true}, newTarget)
}
