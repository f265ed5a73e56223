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
// rabbitmq: instances consuming one queue (each with its prefetch), their
// records on one schema, each a process of its own; a killed instance's
// unacknowledged deliveries are redelivered when its connection closes.
func TestScaleOut(t *testing.T) {
	t.Parallel()
	conformance.RunScaleOut(t, func(t testing.TB) conformance.Shared {
		e := newEnv(t)
		return conformance.Shared{
			Env: map[string]string{"DATABASE_URL": e.pgURL, "DATABASE_SCHEMA": e.schema, "RABBITMQ_URL": e.amqpURL, "RABBITMQ_QUEUE": e.queue},
			DB:  kittest.Pool(t, e.pgURL, e.schema),
		}
	})
}
