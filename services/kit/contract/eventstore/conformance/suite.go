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

// Timeout bounds each wait of the suite; generous because the machines
// running it are small and shared.
const suiteTimeout = 60 * time.Second

// Run is the one conformance suite every event store service runs, with
// its side's Features and NewTarget. Every subtest runs in parallel on its
// own target. Each area of the contract is one call, and its subtests
// live in the area's file.
func Run(t *testing.T, f Features, newTarget NewTarget) {
	kittest.ValidateOpenAPI(t, kittest.NewOpenAPI(t, eventstore.OpenAPI))
	runShared(t, f, newTarget)
	runAppend(t, f, newTarget)
	runBadInput(t, f, newTarget)
	runConcurrency(t, f, newTarget)
	runSubscribe(t, f, newTarget)
	runRestart(t, f, newTarget)
}
