package cleaner_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/cleaner"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/stats"
)

// table is a fake job's rows: rows to remove, and the limits it was given.
type table struct {
	mu     sync.Mutex
	left   int64
	limits []int
	ages   []time.Duration
	fail   error
}

func (tb *table) delete(_ context.Context, olderThan time.Duration, limit int) (int64, error) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.limits = append(tb.limits, limit)
	tb.ages = append(tb.ages, olderThan)
	if tb.fail != nil {
		return 0, tb.fail
	}
	n := min(tb.left, int64(limit))
	tb.left -= n
	return n, nil
}

func newRecorder(tb testing.TB) *stats.Recorder {
	tb.Helper()
	return stats.New(stats.Info{Service: "test"}, nil, nil)
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestRunOnceDeletesInBoundedBatchesAndCounts(t *testing.T) {
	t.Parallel()
	st := newRecorder(t)
	a, b := &table{left: 25}, &table{left: 3}
	c := cleaner.New(cleaner.Config{Retention: time.Hour, Batch: 10}, st, quiet(),
		cleaner.Job{Name: "a", Delete: a.delete}, cleaner.Job{Name: "b", Delete: b.delete})
	counters := st.Snapshot().Counters
	for _, n := range cleaner.Counters(cleaner.Job{Name: "a"}, cleaner.Job{Name: "b"}) {
		if v, ok := counters[n]; !ok || v != 0 {
			t.Errorf("before a pass, /stats counter %s = %d (present %v), want 0", n, v, ok)
		}
	}
	n, err := c.RunOnce(t.Context())
	if err != nil || n != 28 {
		t.Fatalf("RunOnce = %d, %v; want 28, nil", n, err)
	}
	if got := a.limits; len(got) != 3 || got[0] != 10 {
		t.Errorf("job a got limits %v, want three batches of 10 (10, 10, then 5 < 10 ends it)", got)
	}
	if a.ages[0] != time.Hour {
		t.Errorf("job a got retention %v, want 1h", a.ages[0])
	}
	counters = st.Snapshot().Counters
	if counters["retention_removed_a"] != 25 || counters["retention_removed_b"] != 3 || counters[cleaner.StatPasses] != 1 {
		t.Errorf("counters %v", counters)
	}
	if last := counters[cleaner.StatLastRun]; time.Since(time.Unix(last, 0)) > time.Minute {
		t.Errorf("%s = %d, want about now", cleaner.StatLastRun, last)
	}
	st.Reset()
	if _, err := c.RunOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	if last := st.Snapshot().Counters[cleaner.StatLastRun]; time.Since(time.Unix(last, 0)) > time.Minute {
		t.Errorf("after a /stats reset and a pass, %s = %d, want about now", cleaner.StatLastRun, last)
	}
}

func TestErrorsAreCountedAndOtherJobsStillRun(t *testing.T) {
	t.Parallel()
	st := newRecorder(t)
	bad, good := &table{fail: errors.New("boom")}, &table{left: 4}
	c := cleaner.New(cleaner.Config{Retention: time.Hour, Batch: 10}, st, quiet(),
		cleaner.Job{Name: "bad", Delete: bad.delete}, cleaner.Job{Name: "good", Delete: good.delete})
	n, err := c.RunOnce(t.Context())
	if err == nil || n != 4 {
		t.Fatalf("RunOnce = %d, %v; want 4 and bad's error", n, err)
	}
	if got := st.Snapshot().Counters[cleaner.StatErrors]; got != 1 {
		t.Errorf("%s = %d, want 1", cleaner.StatErrors, got)
	}
}

func TestZeroRetentionKeepsEverything(t *testing.T) {
	t.Parallel()
	tb := &table{left: 5}
	c := cleaner.New(cleaner.Config{}, newRecorder(t), quiet(), cleaner.Job{Name: "t", Delete: tb.delete})
	c.Start()
	if n, err := c.RunOnce(t.Context()); n != 0 || err != nil {
		t.Fatalf("RunOnce = %d, %v; want nothing", n, err)
	}
	if err := c.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(tb.limits) != 0 {
		t.Errorf("a zero retention called Delete %d times", len(tb.limits))
	}
}

func TestLoopRunsEveryIntervalAndStopsOnCloseTwice(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	block := make(chan struct{})
	job := cleaner.Job{Name: "t", Delete: func(ctx context.Context, _ time.Duration, _ int) (int64, error) {
		if calls.Add(1) == 3 {
			// The third pass blocks until Close cancels it.
			select {
			case <-ctx.Done():
				return 0, ctx.Err()
			case <-block:
			}
		}
		return 0, nil
	}}
	c := cleaner.New(cleaner.Config{Retention: time.Second, Interval: 10 * time.Millisecond}, newRecorder(t), quiet(), job)
	c.Start()
	c.Start() // a second Start is a no-op
	deadline := time.Now().Add(5 * time.Second)
	for calls.Load() < 3 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if calls.Load() < 3 {
		t.Fatalf("%d passes in 5s at a 10ms interval", calls.Load())
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := c.Close(ctx); err != nil {
		t.Fatalf("Close with a statement in flight: %v", err)
	}
	if err := c.Close(ctx); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	n := calls.Load()
	time.Sleep(50 * time.Millisecond)
	if calls.Load() != n {
		t.Error("the loop ran after Close")
	}
	c.Start() // after Close: a no-op
	time.Sleep(30 * time.Millisecond)
	if calls.Load() != n {
		t.Error("Start after Close ran the loop again")
	}
}

func TestReadConfig(t *testing.T) {
	t.Parallel()
	r := config.FromMap(nil)
	c := cleaner.ReadConfig(r, "TASK_RETENTION", 24*time.Hour)
	if r.Err() != nil || c.Retention != 24*time.Hour || c.Interval != cleaner.DefaultInterval || c.Batch != cleaner.DefaultBatch {
		t.Fatalf("defaults: %+v, %v", c, r.Err())
	}
	r = config.FromMap(map[string]string{"TASK_RETENTION": "-1s", "RETENTION_INTERVAL": "1ms", "RETENTION_BATCH": "0"})
	cleaner.ReadConfig(r, "TASK_RETENTION", time.Hour)
	err := r.Err()
	for _, name := range []string{"TASK_RETENTION", "RETENTION_INTERVAL", "RETENTION_BATCH"} {
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("error %v does not name %s", err, name)
		}
	}
}

// TestSQLJobOnRealPostgres runs an SQLJob's Delete on a real table: the
// retention reaches the statement in microseconds, the limit as $2, and
// the count of removed rows comes back.
func TestSQLJobOnRealPostgres(t *testing.T) {
	t.Parallel()
	url := kittest.PostgresURL(t)
	pool := kittest.Pool(t, url, kittest.Schema(t, url))
	kittest.Exec(t, pool, `CREATE TABLE done (at timestamptz NOT NULL)`)
	kittest.Exec(t, pool, `INSERT INTO done SELECT now() - interval '2 hours' FROM generate_series(1, 5)`)
	kittest.Exec(t, pool, `INSERT INTO done VALUES (now())`)
	job := cleaner.SQLJob("done", pool, `DELETE FROM done WHERE ctid = ANY(ARRAY(
		SELECT ctid FROM done WHERE at < now() - $1 * interval '1 microsecond' LIMIT $2))`)
	if job.Name != "done" {
		t.Errorf("Name = %q", job.Name)
	}
	n, err := job.Delete(t.Context(), time.Hour, 3)
	if err != nil || n != 3 {
		t.Fatalf("Delete(1h, 3) = %d, %v; want 3 rows", n, err)
	}
	if n, err = job.Delete(t.Context(), time.Hour, 3); err != nil || n != 2 {
		t.Fatalf("second Delete(1h, 3) = %d, %v; want the 2 left past the retention", n, err)
	}
	if left := kittest.Count(t, pool, `SELECT count(*) FROM done`); left != 1 {
		t.Errorf("%d rows left, want the one inside the retention", left)
	}
}
