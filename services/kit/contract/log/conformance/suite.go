// The suite's entry point: Features, Target, NewTarget and Run, which
// calls each area's run function (one file per area).

package conformance

import (
	"testing"

	logc "github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/log"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// Features declares what a side of the log pair cannot do. Both sides
// pass every test today, so it has no flags yet; a gap found later becomes
// a field here, and the tests that need it skip naming the field.
type Features struct{}

// Target is one running instance of a service under the suite (see
// kittest.Target). Each NewTarget call gets state of its own (a schema, a
// slot or a topic and group), so subtests run in parallel.
//
// Restart stops the instance gracefully (HTTP drain, consumer stop with
// its position confirmed) and starts a new one on the same schema and
// slot or topic/group. Crash stops it as a consumer killed before it
// confirmed its position would (no-kafka: the replication connection
// closed without a final standby status; kafka: the group's committed
// offsets rewound to the start, as if never committed), then starts a new
// one: everything since the last confirmation is redelivered.
type Target interface {
	kittest.Target
	// HoldDeliveries stops the consumer from recording deliveries (its
	// next record blocks) until release is called or the test ends; reads
	// and appends go on. The suite's 408 check uses it to have an event
	// that exists but cannot be delivered yet. release is safe to call
	// more than once.
	HoldDeliveries(t testing.TB) (release func())
}

// NewTarget starts a fresh instance for one test and stops it when the
// test ends.
type NewTarget func(t testing.TB) Target

// Run is the log pair's conformance suite. Both services' tests call it
// with their side's Features and NewTarget. Every subtest runs in parallel
// on its own target. Each area of the contract is one call, and its
// subtests live in the area's file.
func Run(t *testing.T, _ Features, newTarget NewTarget) {
	kittest.ValidateOpenAPI(t, kittest.NewOpenAPI(t, logc.OpenAPI, "DELETE /events"))
	runWrite(t, newTarget)
	runBadInput(t, newTarget)
	runDelivery(t, newTarget)
	runRestart(t, newTarget)
	runGroups(t, newTarget)
}
