// ServiceTarget: the Target of a side run in the test's own process, and
// the delivery benchmark per SYNCHRONOUS_COMMIT.

package conformance

import (
	"maps"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service/servicetest"
)

// ServiceTarget is the Target of a side run in the test's process, but
// for Crash, which each side adds: one instance at a time, on a schema of
// its own, in Env.
type ServiceTarget[A any] struct {
	// Env is every instance's environment: DATABASE_URL, DATABASE_SCHEMA
	// (a fresh schema) and LOG_LEVEL=warn, the side's own variables on
	// top, the test's overrides on top of those.
	Env map[string]string
	*kittest.Instance[A]
}

// NewServiceTarget returns a target, not yet started (set Ready, then
// Start), whose instances read Env (side's variables, then extra, on a
// fresh schema) with read and are assembled by assemble.
func NewServiceTarget[C servicetest.Config, A any](t testing.TB, read func(*config.Reader) (C, error), assemble servicetest.Assemble[C, A], side, extra map[string]string) *ServiceTarget[A] {
	t.Helper()
	url := kittest.PostgresURL(t)
	env := map[string]string{"DATABASE_URL": url, "DATABASE_SCHEMA": kittest.Schema(t, url), "LOG_LEVEL": "warn"}
	maps.Copy(env, side)
	maps.Copy(env, extra)
	return &ServiceTarget[A]{Env: env, Instance: kittest.NewInstance(func(t testing.TB) (A, *service.Service) {
		return servicetest.Assembled(t, read, assemble, env)
	})}
}

// HoldDeliveries locks the deliveries table of the target's schema in
// EXCLUSIVE mode until release: the consumer's next INSERT waits for the
// lock, while reads (ACCESS SHARE) and appends to messages go on. Both
// services record deliveries through logc.Records, so one hold fits both.
func (s *ServiceTarget[A]) HoldDeliveries(t testing.TB) (release func()) {
	t.Helper()
	return lockDeliveries(t, kittest.Pool(t, s.Env["DATABASE_URL"], s.Env["DATABASE_SCHEMA"]), "EXCLUSIVE")
}

// MeasureDeliveryPerSynchronousCommit runs MeasureDelivery as two
// sub-benchmarks, on a target newTarget starts with SYNCHRONOUS_COMMIT on,
// then off: what the setting costs or saves each side's delivery.
func MeasureDeliveryPerSynchronousCommit[T kittest.Target](b *testing.B, newTarget func(tb testing.TB, extra map[string]string) T) {
	b.Helper()
	for _, mode := range []string{"on", "off"} {
		b.Run(mode, func(b *testing.B) {
			MeasureDelivery(b, newTarget(b, map[string]string{"SYNCHRONOUS_COMMIT": mode}).URL())
		})
	}
}
