package main

import (
	"maps"
	"testing"

	logc "github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/log"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/log/conformance"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service/servicetest"
)

// TestUnconsumedGroup runs the pair's CONSUME_GROUPS check: the group the
// first instance does not consume keeps its Kafka group and committed
// start, lags by the events written, and a second instance that lists it
// joins the Kafka group and catches up.
func TestUnconsumedGroup(t *testing.T) {
	t.Parallel()
	tg := newTarget(t, map[string]string{logc.ConsumeGroupsVar: conformance.ConsumedGroup})
	conformance.UnconsumedGroup(t, tg, func(t testing.TB, consume string) string {
		env := maps.Clone(tg.Env)
		env[logc.ConsumeGroupsVar] = consume
		return kittest.StartInstance(t, func(t testing.TB) (*app, *service.Service) {
			return servicetest.Assembled(t, readConfig, assemble, env)
		}).URL()
	})
}
