// The suite's entry point: Features, Target, Options, NewTarget and Run,
// which calls each area's run function (one file per area).

package conformance

import (
	"fmt"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/cache"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// Features are what distinguishes one side's cache from another's.
type Features struct {
	// SharedCache: the instances share one cache (Redis, a table, the
	// memory Backend), so a value one instance filled is a hit on the
	// other. False for the in-process cache, where each instance fills
	// its own.
	SharedCache bool
	// PushedInvalidation: each instance also keeps a copy of what it read
	// (redis' client-side mode), dropped when the server pushes the
	// invalidation of another instance's write. The peer's GET right
	// after a PUT may race that push, so the suite waits for the peer
	// (bounded, far below PRODUCT_TTL) even with a SharedCache; the
	// instance that wrote must still answer the new value at once.
	PushedInvalidation bool
	// SmallMessages, when not empty, says why the side's pub/sub bus
	// carries less than the contract's cache.MaxMessageBytes (a Postgres
	// NOTIFY payload is under 8000 bytes): the suite checks the side's
	// own bound (the "limit" of its 413) and skips the delivery of a
	// message of the contract's size, naming this reason.
	SmallMessages string
}

// peerAtOnce reports whether the peer must serve a PUT's value at once
// (a shared cache nothing copies), rather than soon.
func (f Features) peerAtOnce() bool { return f.SharedCache && !f.PushedInvalidation }

// Target is one running side under test (see kittest.Target): an
// instance, and a peer instance on the same origin (the same products
// table) and the same cache namespace (the same Redis key prefix, the
// same kv table, or, for in-process caches, the same invalidation
// channel). Neither side holds anything unconfirmed in the process (a
// write is answered once the origin or the cache has it), so Crash may be
// a Restart.
type Target interface {
	kittest.Target
	// PeerURL is the base URL of the peer instance.
	PeerURL() string
}

// Options are what a subtest asks of the target it starts.
type Options struct {
	// OriginWork is added to every origin load (ORIGIN_WORK_MS; the
	// memory Origin's Work). Zero: none.
	OriginWork time.Duration
	// SubscribersMax and SubscriberBuffer are SUBSCRIBERS_MAX and
	// SUBSCRIBER_BUFFER_BYTES (cache.RolesConfig); zero: the defaults.
	SubscribersMax   int
	SubscriberBuffer int64
}

// Env is the environment that configures a side as o asks:
// ORIGIN_WORK_MS, and SUBSCRIBERS_MAX and SUBSCRIBER_BUFFER_BYTES when
// set.
func (o Options) Env() map[string]string {
	env := map[string]string{"ORIGIN_WORK_MS": fmt.Sprint(o.OriginWork.Milliseconds())}
	if o.SubscribersMax > 0 {
		env["SUBSCRIBERS_MAX"] = fmt.Sprint(o.SubscribersMax)
	}
	if o.SubscriberBuffer > 0 {
		env["SUBSCRIBER_BUFFER_BYTES"] = fmt.Sprint(o.SubscriberBuffer)
	}
	return env
}

// NewTarget starts a side on state of its own (a Postgres schema with the
// seeded products, a Redis key prefix), configured by o, and registers
// its cleanup.
type NewTarget func(t testing.TB, o Options) Target

// Run is the cache pair's conformance suite: both services' tests call it
// with their side's Features and NewTarget, and both must pass it
// unchanged. Read-only subtests share one target and use product ids of
// their own; the others start their own target. Each area of the
// contract is one call, and its subtests live in the area's file.
func Run(t *testing.T, f Features, newTarget NewTarget) {
	kittest.ValidateOpenAPI(t, kittest.NewOpenAPI(t, cache.OpenAPI))
	shared := side{Target: newTarget(t, Options{}), Features: f}
	own := func(t testing.TB, o Options) side { return side{Target: newTarget(t, o), Features: f} }
	runShared(t, shared, own)
	runReadThrough(t, shared, own)
	runInvalidation(t, shared, own)
	runKV(t, shared, own)
	runBadInput(t, shared, own)
	runLocks(t, shared, own)
	runPubSub(t, shared, own)
	runLimits(t, shared, own)
}
