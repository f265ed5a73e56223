package main

import (
	"os"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue/conformance"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service/servicetest"
)

// instance is one running service; its App is its queue.
type instance = kittest.Instance[*pgQueue]

// schema is a schema of the test's own and a pool on it.
type schema struct {
	url, name string
	pool      *pgxpool.Pool
}

func newSchema(t testing.TB) schema {
	t.Helper()
	url := kittest.PostgresURL(t)
	name := kittest.Schema(t, url)
	return schema{url: url, name: name, pool: kittest.Pool(t, url, name)}
}

// start builds and serves an instance on the schema with env on top of s.
func (sc schema) start(t testing.TB, s conformance.Settings, env map[string]string) *instance {
	t.Helper()
	return kittest.StartInstance(t, func(t testing.TB) (*pgQueue, *service.Service) { return sc.assemble(t, s, env) })
}

// assemble assembles an instance on the schema with env on top of s.
// NOTIFY_MODE in the test process's environment applies to every instance
// whose test does not set it: `NOTIFY_MODE=commit go test ./...` runs the
// suites in the other mode.
func (sc schema) assemble(t testing.TB, s conformance.Settings, env map[string]string) (*pgQueue, *service.Service) {
	t.Helper()
	base := map[string]string{"DATABASE_URL": sc.url, "DATABASE_SCHEMA": sc.name, "SHUTDOWN_TIMEOUT": "10s"}
	if mode := os.Getenv("NOTIFY_MODE"); mode != "" {
		base["NOTIFY_MODE"] = mode
	}
	return servicetest.Assembled(t, readConfig, assemble, base, s.Env(), env)
}

// newTarget starts a conformance.Target: one instance at a time on one
// schema, started with the settings it holds. Its Crash stops the workers
// as a crash would (their claimed rows stay running until the lease
// expires), then starts a new instance.
func newTarget(t testing.TB, s conformance.Settings) conformance.Target {
	return newTargetWith(nil)(t, s)
}

// newTargetWith is newTarget with env on top of each instance's settings.
func newTargetWith(env map[string]string) conformance.NewTarget {
	return func(t testing.TB, s conformance.Settings) conformance.Target {
		sc := newSchema(t)
		return conformance.StartServiceTarget(t, sc.pool, s, func(t testing.TB, s conformance.Settings) (*pgQueue, *service.Service) {
			return sc.assemble(t, s, env)
		})
	}
}

// TestConformance runs the pair's one suite against no-rabbitmq: the
// payment and its task commit in one transaction.
func TestConformance(t *testing.T) {
	t.Parallel()
	conformance.Run(t, conformance.Features{AtomicOutbox: true, BacklogBound: true}, newTarget)
}

// TestConformanceCursors runs the suite again with fan-out's second
// design (FANOUT_DESIGN=cursors): a fanned-out task is one message row
// read by a cursor per subscriber, and the contract must not tell.
func TestConformanceCursors(t *testing.T) {
	t.Parallel()
	conformance.Run(t, conformance.Features{AtomicOutbox: true, BacklogBound: true},
		newTargetWith(map[string]string{"FANOUT_DESIGN": DesignCursors}))
}
