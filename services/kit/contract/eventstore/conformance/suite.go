// The suite's entry point: Features, Target, NewTarget, Options and Run,
// which calls each area's run function (one file per area).

package conformance

import (
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/eventstore"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// Features are the capability flags a side declares; they must equal
// what its GET /capabilities answers, and the suite skips the tests that
// need a capability the side lacks, naming the flag.
type Features = eventstore.Capabilities

// Target is one running service under test (see kittest.Target).
//
// Restart stops the service gracefully (open subscriptions end) and
// starts a new one on the same backend state (schema, topic, server).
// No side holds anything unconfirmed in the process (an append is
// answered once the engine has it), so a side's Crash may be a Restart;
// the suite checks that every answered append survives both and that a
// subscription resumes from a position taken before.
type Target interface {
	kittest.Target
	// Names are the service and backend names /stats must report.
	Names() (service, backend string)
}

// NewTarget starts a fresh service with backend state of its own (a
// schema, a topic) for one test, stopped when that test ends.
type NewTarget func(t testing.TB) Target

// Option declares, for one side, a promise of the suite the side does not
// keep; the tests that check it check what the side does promise instead,
// and log the reason.
type Option func(*options)

type options struct {
	noTotalOrder, scansAPartition string
}

// WithoutTotalOrder declares a side whose subscription delivers no total
// order across streams (a keyed Kafka topic: each partition in order, the
// partitions interleaved), for reason. The subscription tests then check
// each stream's order and that every event arrives, not the order between
// streams nor that global positions increase along the subscription.
func WithoutTotalOrder(reason string) Option {
	return func(o *options) { o.noTotalOrder = reason }
}

// ScansAPartition declares a side without server_side_stream_read whose
// read of a stream consumes one partition of the store, not all of it
// (a keyed Kafka topic), for reason. RecordsScannedIsHonest then checks
// that records_scanned lies between the events returned and every record
// the test wrote, instead of at least every record.
func ScansAPartition(reason string) Option {
	return func(o *options) { o.scansAPartition = reason }
}

// Timeout bounds each wait of the suite; generous because the machines
// running it are small and shared.
const suiteTimeout = 60 * time.Second

// Run is the one conformance suite every event store service runs, with
// its side's Features and NewTarget. Every subtest runs in parallel on its
// own target. Each area of the contract is one call, and its subtests
// live in the area's file.
func Run(t *testing.T, f Features, newTarget NewTarget, opts ...Option) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	kittest.ValidateOpenAPI(t, kittest.NewOpenAPI(t, eventstore.OpenAPI))
	newSide := func(t testing.TB) side { return side{Target: newTarget(t), Features: f, options: o} }
	runShared(t, newSide)
	runAppend(t, newSide)
	runBadInput(t, newSide)
	runConcurrency(t, newSide)
	runSubscribe(t, newSide)
	runRestart(t, newSide)
}
