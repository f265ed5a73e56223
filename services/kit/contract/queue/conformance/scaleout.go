// Not an area of Run: competing consumers, several processes of one
// side on one schema and queue (RunScaleOut), which the services run on
// their own.

package conformance

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// Shared is where several instances of one side meet: the environment
// that points each at the same schema (and, on the RabbitMQ side, the
// same queue), and a pool on that schema to read the task records.
type Shared struct {
	// Env is what every instance starts with beyond the test's
	// environment: DATABASE_URL, DATABASE_SCHEMA, RABBITMQ_QUEUE, ...
	Env map[string]string
	// DB is a pool on the shared schema.
	DB *pgxpool.Pool
}

// NewShared gives a test a schema (and queue) of its own, cleaned up when
// the test ends.
type NewShared func(t testing.TB) Shared

// RunScaleOut checks competing consumers on one side (issue 23): several
// instances of the service, each a process of its own on its own port
// (StartProcess: the service's TestMain must be kittest.Main), share one
// schema and one queue.
//   - Two instances process 1,000 tasks posted to one of them exactly
//     once (one delivery each, counted by both the records and the
//     instances' /stats), and each does part of the work.
//   - kill -9 of one of two instances while it holds tasks under load
//     loses nothing: every accepted task is done, those it held by the
//     other instance (no-rabbitmq: once their lease expires; rabbitmq:
//     redelivered when the killed connection closes). It logs how many it
//     held and how long after the kill each was processed.
func RunScaleOut(t *testing.T, newShared NewShared) {
	t.Run("TwoInstancesShareThousandTasksExactlyOnce", func(t *testing.T) {
		t.Parallel()
		testCompeting(t, newShared(t))
	})
	t.Run("KillNineOneOfTwoLosesNothing", func(t *testing.T) {
		t.Parallel()
		testKillOne(t, newShared(t))
	})
}

// startMember starts one more instance on sh with s.
func startMember(t testing.TB, sh Shared, s Settings) *Process {
	t.Helper()
	env := maps.Clone(sh.Env)
	maps.Copy(env, s.Env())
	return StartProcess(t, env)
}

// finishedCount counts the task records that are done or dead.
func finishedCount(t testing.TB, db *pgxpool.Pool) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var n int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM tasks WHERE status IN ('done', 'dead')`).Scan(&n); err != nil {
		t.Fatalf("count finished tasks: %v", err)
	}
	return n
}

func testCompeting(t *testing.T, sh Shared) {
	const n, batch = 1000, 100
	// Four workers of 10 ms each: about 400 tasks/s per instance, so that
	// the instance posted to cannot take the whole backlog alone before
	// the other is woken.
	s := Settings{Workers: 4, Work: 10 * time.Millisecond}
	a, b := startMember(t, sh, s), startMember(t, sh, s)
	var ids []string
	for range n / batch {
		ids = append(ids, enqueueBatch(t, a.URL(), batch, queue.TaskRequest{Kind: "compete"})...)
	}
	kittest.Eventually(t, 2*time.Minute, "1,000 tasks finished", func() bool { return finishedCount(t, sh.DB) >= n })
	total, done := doneTasks(t, sh.DB, ids, "")
	if total != n {
		t.Errorf("%d task records, want %d", total, n)
	}
	once := 0
	for _, r := range done {
		if r.Attempts == 1 {
			once++
		}
	}
	if once != n {
		t.Errorf("%d of %d tasks done after exactly one delivery", once, n)
	}
	cs := kittest.CountersReach(t, 30*time.Second, queue.CounterProcessed, n, a.URL(), b.URL())
	ca, cb := cs[0], cs[1]
	pa, pb := ca[queue.CounterProcessed], cb[queue.CounterProcessed]
	if pa+pb != n || ca[queue.CounterDelivered]+cb[queue.CounterDelivered] != n {
		t.Errorf("processed %d+%d, delivered %d+%d: want %d of each in all (none twice)",
			pa, pb, ca[queue.CounterDelivered], cb[queue.CounterDelivered], n)
	}
	if pa == 0 || pb == 0 {
		t.Errorf("processed %d by the instance posted to and %d by the other: each should do part of the work", pa, pb)
	}
	t.Logf("1,000 tasks posted to one instance: it processed %d, the other %d", pa, pb)
}

func testKillOne(t *testing.T, sh Shared) {
	const n = 400
	// 100 ms tasks keep work in hand; a one-second lease bounds the
	// Postgres side's wait for the victim's tasks.
	s := Settings{Workers: 4, Work: 100 * time.Millisecond, Lease: time.Second}
	victim, survivor := startMember(t, sh, s), startMember(t, sh, s)
	posted := append(enqueueBatch(t, survivor.URL(), n/2, queue.TaskRequest{Kind: "kill"}),
		enqueueBatch(t, survivor.URL(), n/2, queue.TaskRequest{Kind: "kill"})...)
	kittest.Eventually(t, time.Minute, "the victim working through tasks", func() bool {
		c, _ := getStats(t, victim.URL())
		return c[queue.CounterProcessed] >= 8 && c[queue.CounterDelivered] > c[queue.CounterProcessed]
	})
	killed := time.Now()
	victim.Kill(t)
	kittest.Eventually(t, 2*time.Minute, "every accepted task finished", func() bool { return finishedCount(t, sh.DB) >= n })
	// Nothing accepted is lost: every posted task is done.
	_, done := doneTasks(t, sh.DB, posted, " after the kill")
	var again []time.Duration
	for _, r := range done {
		if r.Attempts > 1 {
			again = append(again, r.ProcessedAt.Sub(killed))
		}
	}
	if len(again) == 0 {
		t.Fatal("no task was delivered again after the kill: the victim held none, and the test showed nothing")
	}
	slices.Sort(again)
	t.Logf("kill -9 while holding %d recorded deliveries: each processed by the survivor %v to %v after the kill (median %v); "+
		"each may have run twice (at-least-once: the victim may have finished its work without recording it)",
		len(again), again[0].Round(time.Millisecond), again[len(again)-1].Round(time.Millisecond), again[len(again)/2].Round(time.Millisecond))
}

// doneTasks reads every task record of db and returns how many there
// are and the records of those of ids that are done, in the order of
// ids, failing t for each of ids not recorded or not done (when, such as
// " after the kill", says at what point, in the message).
func doneTasks(t testing.TB, db *pgxpool.Pool, ids []string, when string) (total int, done []TaskRecord) {
	t.Helper()
	byID := map[string]TaskRecord{}
	for _, r := range (pgRecords{db}).Tasks(t) {
		byID[r.ID] = r
	}
	for _, id := range ids {
		r, ok := byID[id]
		switch {
		case !ok:
			t.Errorf("task %s accepted but not recorded", id)
		case r.Status != queue.StatusDone || r.ProcessedAt == nil:
			t.Errorf("task %s: status %s%s, want done", id, r.Status, when)
		default:
			done = append(done, r)
		}
	}
	return len(byID), done
}
