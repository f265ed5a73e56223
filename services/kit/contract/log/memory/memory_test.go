package memory_test

import (
	"context"
	"testing"

	logc "github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/log"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/log/conformance"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/log/memory"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/stats"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/waiter"
)

// target serves one memory Log; each start builds a new service and
// consumer on it.
type target struct {
	*kittest.Instance[*memory.Backend]
	log *memory.Log
}

// HoldDeliveries holds the Log until release or the test's end.
func (tg target) HoldDeliveries(t testing.TB) func() {
	release := tg.log.Hold()
	t.Cleanup(release)
	return release
}

// GroupHeld reports whether the Log still holds the group
// (conformance.GroupHolder).
func (tg target) GroupHeld(_ testing.TB, name string) bool { return tg.log.GroupHeld(name) }

// Crash stops the consumer without confirming its position, then starts
// a new instance: everything it consumed is redelivered.
func (tg target) Crash(t testing.TB) {
	tg.App().Crash()
	tg.Restart(t)
}

// TestConformance runs the log suite, with OpenAPI validation, on the
// memory Log. It needs no server, so -short runs it too.
func TestConformance(t *testing.T) {
	t.Parallel()
	conformance.Run(t, conformance.Features{}, func(t testing.TB) conformance.Target {
		l := new(memory.Log)
		return target{log: l, Instance: kittest.StartInstance(t, func(t testing.TB) (*memory.Backend, *service.Service) {
			svc := kittest.NewService(t, stats.Info{Service: "memory", Pair: "log", Backend: "memory"}, 0, logc.Latencies, logc.Counters)
			hub := new(waiter.Hub)
			b := memory.New(l, &logc.Deliverer{Records: l, Hub: hub, Stats: svc.Stats})
			b.Start()
			svc.OnStop("consumer", func(context.Context) error { b.Stop(); return nil })
			logc.Mount(svc.Router, b, logc.Options{Records: l, Hub: hub, Stats: svc.Stats, Stopping: svc.Stopping()})
			return b, svc
		})}
	})
}
