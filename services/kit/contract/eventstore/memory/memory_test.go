package memory_test

import (
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/eventstore"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/eventstore/conformance"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/eventstore/memory"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/stats"
)

// target serves one memory Backend; a restart starts a new service on the
// same Backend, which is the whole state.
type target struct {
	*kittest.Instance[struct{}]
}

func (target) Names() (service, backend string) { return "memory", "memory" }

// Crash is a Restart: the Backend holds nothing unconfirmed.
func (tg target) Crash(t testing.TB) { tg.Restart(t) }

// newTarget starts a service on a fresh memory Backend with o (Stats and
// Stopping are filled in).
func newTarget(t testing.TB, o eventstore.Options) target {
	t.Helper()
	b := new(memory.Backend)
	return target{kittest.StartInstance(t, func(t testing.TB) (struct{}, *service.Service) {
		svc := kittest.NewService(t, stats.Info{Service: "memory", Pair: "eventstore", Backend: "memory"},
			0, eventstore.LatencyNames, eventstore.CounterNames)
		o.Stats, o.Stopping = svc.Stats, svc.Stopping()
		eventstore.Mount(svc.Router, b, o)
		return struct{}{}, svc
	})}
}

// TestSlowSubscriberIsDroppedAndResumes: a subscriber that stops reading
// is dropped at the send timeout and resumes with Last-Event-ID.
func TestSlowSubscriberIsDroppedAndResumes(t *testing.T) {
	t.Parallel()
	const timeout = time.Second
	conformance.SlowSubscriberIsDroppedAndResumes(t, newTarget(t, eventstore.Options{SendTimeout: timeout}), timeout)
}

// TestConformance runs the event store suite, with OpenAPI validation, on
// the memory Backend. It needs no server, so -short runs it too.
func TestConformance(t *testing.T) {
	t.Parallel()
	b := new(memory.Backend)
	conformance.Run(t, b.Capabilities(), func(t testing.TB) conformance.Target {
		return newTarget(t, eventstore.Options{})
	})
}
