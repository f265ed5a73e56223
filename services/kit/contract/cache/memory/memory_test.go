package memory_test

import (
	"context"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/cache"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/cache/conformance"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/cache/memory"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/stats"
)

// target serves two instances over one memory Backend and Origin; a
// restart or a crash starts a new service on the same state.
type target struct {
	*kittest.Instance[struct{}]
	peer *kittest.Instance[struct{}]
}

func (tg target) PeerURL() string { return tg.peer.URL() }

// Crash is a Restart: the Backend holds nothing unconfirmed.
func (tg target) Crash(t testing.TB) { tg.Restart(t) }

// TestConformance runs the cache suite, with OpenAPI validation, on the
// memory Backend. It needs no server, so -short runs it too.
func TestConformance(t *testing.T) {
	t.Parallel()
	conformance.Run(t, conformance.Features{SharedCache: true}, func(t testing.TB, opt conformance.Options) conformance.Target {
		b, o := new(memory.Backend), &memory.Origin{Work: opt.OriginWork}
		locks, limits, bus := new(memory.Locks), new(memory.Limits), new(memory.Bus)
		start := func() *kittest.Instance[struct{}] {
			return kittest.StartInstance(t, func(t testing.TB) (struct{}, *service.Service) {
				svc := kittest.NewService(t, stats.Info{Service: "memory", Pair: "cache", Backend: "memory"},
					cache.DefaultBodyLimit, cache.Latencies, cache.Counters)
				ps := bus.Client()
				svc.OnStop("bus", func(context.Context) error { return ps.Close() })
				cache.Mount(svc.Router, b, cache.Options{Stats: svc.Stats, Layer: "memory", Origin: o,
					Locks: locks, Limits: limits, PubSub: ps, Stopping: svc.Stopping(),
					Roles: cache.RolesConfig{SubscribersMax: opt.SubscribersMax, SubscriberBuffer: opt.SubscriberBuffer}})
				return struct{}{}, svc
			})
		}
		return target{Instance: start(), peer: start()}
	})
}
