package main

import (
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service"
)

// instance is one running service.
type instance struct {
	svc  *service.Service
	q    *pgQueue
	base string
	stop func() // graceful; safe to call twice
}

// start builds and serves an instance on schema with env on top of o.
func start(t testing.TB, url, schema string, o queue.Options, env map[string]string) *instance {
	t.Helper()
	cfg := kittest.ReadConfig(t, readConfig,
		map[string]string{"DATABASE_URL": url, "DATABASE_SCHEMA": schema, "SHUTDOWN_TIMEOUT": "10s"}, o.Env(), env)
	svc, q, err := assemble(kittest.Context(t, time.Minute), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	in := &instance{svc: svc, q: q}
	in.base, in.stop = kittest.Start(t, svc)
	return in
}

// target implements queue.Target.
type target struct {
	url, schema string
	pool        *pgxpool.Pool
	cur         *instance
}

func (tg *target) URL() string              { return tg.cur.base }
func (tg *target) DB() *pgxpool.Pool        { return tg.pool }
func (tg *target) Features() queue.Features { return queue.Features{AtomicOutbox: true} }

func (tg *target) Restart(t *testing.T, o queue.Options) {
	tg.cur.stop()
	tg.cur = start(t, tg.url, tg.schema, o, nil)
}

func (tg *target) Crash(t *testing.T, o queue.Options) {
	tg.cur.q.Crash()
	tg.cur.stop()
	tg.cur = start(t, tg.url, tg.schema, o, nil)
}

func newTarget(t *testing.T, o queue.Options) queue.Target {
	url := kittest.PostgresURL(t)
	schema := kittest.Schema(t, url)
	tg := &target{url: url, schema: schema}
	tg.cur = start(t, url, schema, o, nil)
	tg.pool = kittest.Pool(t, url, schema)
	return tg
}

// TestConformance runs the pair's one suite against no-rabbitmq.
func TestConformance(t *testing.T) {
	t.Parallel()
	queue.Run(t, newTarget)
}
