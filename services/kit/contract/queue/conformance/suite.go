// The suite's entry point: Features, Settings, Target, NewTarget and
// Run, which calls each area's run function (one file per area).

package conformance

import (
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// Features declares what a side can do; a test of a capability the side
// lacks checks the honest opposite or skips, naming the flag.
type Features struct {
	// AtomicOutbox is true when a payment row and its task commit in one
	// transaction (no-rabbitmq). Without it (rabbitmq) a crash between the
	// insert and the publish leaves an orphaned payment, which the suite
	// then demonstrates instead of skipping.
	AtomicOutbox bool
	// BacklogBound is true when the side sheds enqueues past MAX_BACKLOG
	// (queue.Admission): both services. The in-memory reference backend
	// has no backlog count, and skips the test.
	BacklogBound bool
	// RecordsOnConsume, when not empty, says why the side has no record
	// of a task between its 202 and the moment a worker takes it
	// (rabbitmq's PUBLISH_MODE=broker-only: the broker alone holds the
	// task until then), so that GET /tasks/{id} answers 404 right after
	// the enqueue. The checks that read a task right after enqueueing it
	// are subtests that skip with this reason; the rest of their tests
	// runs (a wait waits for the record: queue.Options.LateRecords), and
	// what they would have read of the records at once is checked once
	// the tasks are done. Empty: the record commits before the 202, as
	// on both services' other modes.
	RecordsOnConsume string
}

// Settings configures a service instance under test. Zero values mean the
// service's defaults, except where noted.
type Settings struct {
	// Workers is WORKERS.
	Workers int
	// Work is WORK_MS, the simulated work per attempt.
	Work time.Duration
	// MaxAttempts is MAX_ATTEMPTS.
	MaxAttempts int
	// RetryBase is RETRY_BASE.
	RetryBase time.Duration
	// Lease is the Postgres side's lease (LEASE); the RabbitMQ side ignores
	// it (an unacked delivery goes back when its channel closes).
	Lease time.Duration
	// Faults is FAULTS: allow POST /payments?fault=between.
	Faults bool
	// APIOnly is WORKERS=0: no worker takes a task, so a test may set
	// the tasks' states itself.
	APIOnly bool
	// TaskRetention is TASK_RETENTION.
	TaskRetention time.Duration
	// RetentionInterval is RETENTION_INTERVAL.
	RetentionInterval time.Duration
	// MaxBacklog is MAX_BACKLOG.
	MaxBacklog int
	// BacklogInterval is BACKLOG_INTERVAL.
	BacklogInterval time.Duration
	// Fanout is FANOUT: the kinds with subscribers (queue.ParseFanout).
	Fanout string
}

// Env returns the environment variables that set s, for a test that
// builds a service from a config map.
func (s Settings) Env() map[string]string {
	m := map[string]string{}
	if s.Workers > 0 {
		m["WORKERS"] = strconv.Itoa(s.Workers)
	}
	if s.Work > 0 {
		m["WORK_MS"] = strconv.Itoa(int(s.Work / time.Millisecond))
	}
	if s.MaxAttempts > 0 {
		m["MAX_ATTEMPTS"] = strconv.Itoa(s.MaxAttempts)
	}
	if s.RetryBase > 0 {
		m["RETRY_BASE"] = s.RetryBase.String()
	}
	if s.Lease > 0 {
		m["LEASE"] = s.Lease.String()
	}
	if s.Faults {
		m["FAULTS"] = "true"
	}
	if s.APIOnly {
		m["WORKERS"] = "0"
	}
	if s.TaskRetention > 0 {
		m["TASK_RETENTION"] = s.TaskRetention.String()
	}
	if s.RetentionInterval > 0 {
		m["RETENTION_INTERVAL"] = s.RetentionInterval.String()
	}
	if s.MaxBacklog > 0 {
		m["MAX_BACKLOG"] = strconv.Itoa(s.MaxBacklog)
	}
	if s.BacklogInterval > 0 {
		m["BACKLOG_INTERVAL"] = s.BacklogInterval.String()
	}
	if s.Fanout != "" {
		m["FANOUT"] = s.Fanout
	}
	return m
}

// Target is one service under test, on its own schema (and broker
// queues). Its methods are called from the test goroutine only.
//
// Restart stops the instance gracefully (HTTP drain, workers finish,
// connections closed). Crash stops it as a crash would: tasks its workers
// hold are neither completed nor acknowledged nor released. Both then
// start a new instance on the same schema and queues, with the Settings
// last given to NewTarget or Configure.
type Target interface {
	kittest.Target
	// DB is a pool on the target's schema, to check the business records.
	// A target that implements Records is read through it instead, and
	// its DB may return nil.
	DB() *pgxpool.Pool
	// Configure sets the Settings the next Restart or Crash starts the
	// new instance with.
	Configure(s Settings)
}

// NewTarget starts a fresh target (unique schema and queues) with s; it
// registers its own cleanup.
type NewTarget func(t testing.TB, s Settings) Target

// Run is the queue pair's conformance suite. Both services' tests call it
// with their side's Features and NewTarget, against real Postgres and
// RabbitMQ. Every subtest runs in parallel on its own target. Each area
// of the contract is one call, and its subtests live in the area's file.
func Run(t *testing.T, f Features, newTarget NewTarget) {
	kittest.ValidateOpenAPI(t, kittest.NewOpenAPI(t, queue.OpenAPI, "DELETE /tasks"))
	runShared(t, f, newTarget)
	runEnqueue(t, f, newTarget)
	runBacklog(t, f, newTarget)
	runRetries(t, f, newTarget)
	runBadInput(t, f, newTarget)
	runDelivery(t, f, newTarget)
	runRestart(t, f, newTarget)
	runPayments(t, f, newTarget)
	runFanout(t, f, newTarget)
}
