package memory_test

import (
	"testing"

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

// TestConformance runs the event store suite, with OpenAPI validation, on
// the memory Backend. It needs no server, so -short runs it too.
func TestConformance(t *testing.T) {
	t.Parallel()
	b := new(memory.Backend)
	conformance.Run(t, b.Capabilities(), func(t testing.TB) conformance.Target {
		b := new(memory.Backend)
		return target{kittest.StartInstance(t, func(t testing.TB) (struct{}, *service.Service) {
			svc := kittest.NewService(t, stats.Info{Service: "memory", Pair: "eventstore", Backend: "memory"},
				0, eventstore.LatencyNames, eventstore.CounterNames)
			eventstore.Mount(svc.Router, b, eventstore.Options{Stats: svc.Stats, Stopping: svc.Stopping()})
			return struct{}{}, svc
		})}
	})
}
