// ServiceTarget: the Target of a side run in the test's own process.

package conformance

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service"
)

// Crasher is a side's queue as its tests hold it: Crash stops it as a
// crash would (see Target).
type Crasher interface{ Crash() }

// ServiceTarget is the Target of a side run in the test's process: one
// instance at a time on one schema, each built with the Settings the
// target then holds. Both sides' targets embed it; they differ only in
// how build assembles an instance.
type ServiceTarget[A Crasher] struct {
	*kittest.Instance[A]
	pool     *pgxpool.Pool
	settings Settings
}

// StartServiceTarget starts a target with s whose records are read
// through pool (DB); build assembles each instance with the Settings of
// that moment (s, or what Configure set since).
func StartServiceTarget[A Crasher](t testing.TB, pool *pgxpool.Pool, s Settings, build func(t testing.TB, s Settings) (A, *service.Service)) *ServiceTarget[A] {
	t.Helper()
	tg := &ServiceTarget[A]{pool: pool, settings: s}
	tg.Instance = kittest.StartInstance(t, func(t testing.TB) (A, *service.Service) { return build(t, tg.settings) })
	return tg
}

// DB is the pool on the target's schema.
func (tg *ServiceTarget[A]) DB() *pgxpool.Pool { return tg.pool }

// Configure sets the Settings of the next instance.
func (tg *ServiceTarget[A]) Configure(s Settings) { tg.settings = s }

// Crash crashes the running instance's queue, then starts a new instance.
func (tg *ServiceTarget[A]) Crash(t testing.TB) {
	t.Helper()
	tg.App().Crash()
	tg.Restart(t)
}
