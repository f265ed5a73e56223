package raw

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestMeasureRetention runs the retention measurement on a small history
// and checks what each part must show whatever the machine: the cleaner
// and the dropped partitions remove the same oldest half, the cleaner
// leaves that many dead tuples and its VACUUM none, dropping leaves none,
// and the claims run in both queue table states, the head's dead tuples
// counted before the VACUUM and removed by it. Dropping writes less WAL
// than deleting, counted from the records of each removal alone (other
// packages' tests write WAL at the same time). The scratch schema is
// gone at the end.
func TestMeasureRetention(t *testing.T) {
	t.Parallel()
	o := options(t)
	o.RetentionRows = 16_000
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := MeasureRetention(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s", r.summary(nil))
	half := int64(o.RetentionRows / 2)
	if len(r.Removals) != 2 || len(r.Claims) != 2 {
		t.Fatalf("%d removals, %d claim states: %+v", len(r.Removals), len(r.Claims), r)
	}
	del, drop := r.Removals[0], r.Removals[1]
	if del.Method != BatchedDelete || drop.Method != DropPartitions {
		t.Fatalf("methods %s, %s", del.Method, drop.Method)
	}
	for _, m := range r.Removals {
		if m.Rows != half || m.Seconds <= 0 || m.BytesBefore <= 0 || m.BytesAfter <= 0 || m.Desc != "" || (Results{Retention: &r}).RemovalDesc(m) == "" {
			t.Errorf("%s: %+v", m.Method, m)
		}
	}
	// 8,000 rows in batches of 1,000: eight full batches and a short one.
	if want := int(half)/r.Batch + 1; del.Statements != want {
		t.Errorf("batched delete: %d statements, want %d", del.Statements, want)
	}
	if del.DeadTuples < half || del.BytesAfter != del.BytesBefore {
		t.Errorf("batched delete left %d dead tuples (want %d), size %d -> %d", del.DeadTuples, half, del.BytesBefore, del.BytesAfter)
	}
	// Another session's snapshot on the shared server (r.Notes names
	// it) keeps VACUUM from removing what that session can still see.
	held := len(r.Notes) > 0
	if held {
		t.Logf("held back: %v", r.Notes)
	}
	if del.Vacuum == nil || (!held && del.Vacuum.DeadTuples >= del.DeadTuples) {
		t.Errorf("vacuum after the delete: %+v", del.Vacuum)
	}
	if drop.Statements != r.Days/2 || drop.DeadTuples != 0 || drop.BytesAfter >= drop.BytesBefore || drop.Vacuum != nil {
		t.Errorf("drop: %+v", drop)
	}
	// The stack's superuser reads pg_walinspect, so the WAL figures
	// are the removals' own records, whatever the parallel tests write.
	if r.WAL != WALRecords {
		t.Errorf("WAL measured as %q (%s), want %q", r.WAL, r.WALNote, WALRecords)
	}
	if drop.WALBytes <= 0 || drop.WALBytes >= del.WALBytes || del.Vacuum == nil || del.Vacuum.WALBytes <= 0 {
		t.Errorf("dropping wrote %d WAL bytes, deleting %d, its VACUUM %+v", drop.WALBytes, del.WALBytes, del.Vacuum)
	}
	head, vac := r.Claims[0], r.Claims[1]
	if head.State != DeadHead || vac.State != Vacuumed {
		t.Fatalf("states %s, %s", head.State, vac.State)
	}
	if head.DeadTuples < int64(r.ClaimHead) || (!held && vac.DeadTuples >= head.DeadTuples) {
		t.Errorf("dead tuples: %d with the head (want >= %d), %d after VACUUM", head.DeadTuples, r.ClaimHead, vac.DeadTuples)
	}
	for _, c := range r.Claims {
		if c.Items <= 0 || c.Rate <= 0 || c.Error != "" {
			t.Errorf("%s: %+v", c.State, c)
		}
	}
	pool, err := onePool(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_namespace WHERE nspname = $1`, o.schema()).Scan(&n); err != nil || n != 0 {
		t.Errorf("scratch schema %s: %d left (%v)", o.schema(), n, err)
	}
}

// TestWaitRemovable holds a snapshot open in a transaction of its own,
// taken before another transaction commits: waitRemovable waits for it, then names it in its note; once the
// transaction ends it returns at once with no note.
func TestWaitRemovable(t *testing.T) {
	o := options(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, err := onePool(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	holder, err := pgx.Connect(ctx, o.PostgresURL)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(context.Background())
	var pid int
	if err := holder.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	tx, err := holder.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT 1`); err != nil {
		t.Fatal(err)
	}
	// A transaction that commits after the snapshot (as the deletes do):
	// the snapshot can still see what it would have deleted.
	if _, err := pool.Exec(ctx, `SELECT pg_current_xact_id()`); err != nil {
		t.Fatal(err)
	}
	defer func(w time.Duration) { horizonWait = w }(horizonWait)
	horizonWait = 300 * time.Millisecond
	start := time.Now()
	note, err := waitRemovable(ctx, pool, "test")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(note, fmt.Sprintf("pid %d ", pid)) || time.Since(start) < horizonWait {
		t.Errorf("note %q after %v", note, time.Since(start))
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	horizonWait = 10 * time.Second
	if note, err := waitRemovable(ctx, pool, "test"); err != nil || strings.Contains(note, fmt.Sprintf("pid %d ", pid)) {
		t.Errorf("after rollback: %q, %v", note, err)
	}
}
