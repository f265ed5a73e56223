package memory_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue/conformance"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue/memory"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/stats"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/waiter"
)

// target serves one memory Store; each start builds a new service and
// workers on it with the Settings last configured.
type target struct {
	store    *memory.Store
	settings conformance.Settings
	*kittest.Instance[*memory.Backend]
}

var _ conformance.Records = (*target)(nil)

// DB is nil: the suite reads the records through Tasks and Payments.
func (*target) DB() *pgxpool.Pool { return nil }

func (tg *target) Configure(s conformance.Settings) { tg.settings = s }

// Crash drops the tasks the workers hold, then starts a new instance,
// which queues them again.
func (tg *target) Crash(t testing.TB) {
	tg.App().Crash()
	tg.Restart(t)
}

func (tg *target) Tasks(testing.TB) []conformance.TaskRecord {
	var out []conformance.TaskRecord
	for _, r := range tg.store.Tasks() {
		out = append(out, conformance.TaskRecord{Task: r.Task, Payload: r.Payload})
	}
	return out
}

func (tg *target) Payments(testing.TB) []conformance.PaymentRecord {
	var out []conformance.PaymentRecord
	for _, p := range tg.store.Payments() {
		out = append(out, conformance.PaymentRecord{ID: p.ID, TaskID: p.TaskID, Amount: p.Amount})
	}
	return out
}

// TestConformance runs the queue suite, with OpenAPI validation, on the
// memory Store. It needs no server, so -short runs it too.
func TestConformance(t *testing.T) {
	t.Parallel()
	conformance.Run(t, conformance.Features{AtomicOutbox: true}, func(t testing.TB, s conformance.Settings) conformance.Target {
		tg := &target{store: new(memory.Store), settings: s}
		tg.Instance = kittest.StartInstance(t, func(t testing.TB) (*memory.Backend, *service.Service) {
			s := tg.settings
			if s.Workers == 0 {
				s.Workers = queue.DefaultWorkers
			}
			svc := kittest.NewService(t, stats.Info{Service: "memory", Pair: "queue", Backend: "memory"}, 0, queue.Latencies, queue.Counters)
			hub := new(waiter.Hub)
			b := memory.New(tg.store, memory.Config{Workers: s.Workers, Work: s.Work, RetryBase: s.RetryBase, MaxAttempts: s.MaxAttempts}, hub, svc.Stats)
			b.Start()
			svc.OnStop("workers", func(context.Context) error { b.Stop(); return nil })
			fanout, err := queue.ParseFanout(s.Fanout)
			if err != nil {
				t.Fatalf("FANOUT: %v", err)
			}
			queue.Mount(svc.Router, b, queue.Options{Stats: svc.Stats, Hub: hub, Stopping: svc.Stopping(), Faults: s.Faults, Fanout: fanout})
			return b, svc
		})
		return tg
	})
}
