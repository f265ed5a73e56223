package main

import (
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue/conformance"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// TestMain lets the scale-out tests start this test binary again as the
// service itself (conformance.StartProcess), so that they can kill -9 an
// instance.
func TestMain(m *testing.M) { kittest.Main(m, main) }

// TestScaleOut runs the pair's competing-consumer checks against
// no-rabbitmq: instances on one schema, each a process of its own,
// claiming with FOR UPDATE SKIP LOCKED; a killed instance's tasks come
// back when their leases expire.
func TestScaleOut(t *testing.T) {
	t.Parallel()
	conformance.RunScaleOut(t, func(t testing.TB) conformance.Shared {
		sc := newSchema(t)
		return conformance.Shared{Env: map[string]string{"DATABASE_URL": sc.url, "DATABASE_SCHEMA": sc.name}, DB: sc.pool}
	})
}
