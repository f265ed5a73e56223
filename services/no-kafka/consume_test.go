package main

import (
	"maps"
	"testing"

	logc "github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/log"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/log/conformance"
)

// testUnconsumedGroup runs the pair's CONSUME_GROUPS check in a design:
// the group the first instance does not consume keeps its slot (design
// slots, inactive, retaining WAL) or its cursor row (design cursors),
// lags, and a second instance that lists it catches up.
func testUnconsumedGroup(t *testing.T, env map[string]string) {
	first := map[string]string{logc.ConsumeGroupsVar: conformance.ConsumedGroup}
	maps.Copy(first, env)
	tg := newTarget(t, first)
	conformance.UnconsumedGroup(t, tg, func(t testing.TB, consume string) string {
		env := maps.Clone(tg.Env)
		env[logc.ConsumeGroupsVar] = consume
		base, _ := secondInstance(t, env)
		return base
	})
}

// TestUnconsumedGroup: CONSUME_GROUPS with a slot per group.
func TestUnconsumedGroup(t *testing.T) {
	t.Parallel()
	testUnconsumedGroup(t, nil)
}

// TestUnconsumedGroupCursors: CONSUME_GROUPS with GROUPS_DESIGN=cursors.
func TestUnconsumedGroupCursors(t *testing.T) {
	t.Parallel()
	testUnconsumedGroup(t, cursorsEnv)
}
