package raw

import (
	"context"
	"testing"
	"time"
)

// TestMeasureRetention runs the retention measurement on a small history
// and checks what each part must show whatever the machine: the cleaner
// and the dropped partitions remove the same oldest half, the cleaner
// leaves that many dead tuples and its VACUUM none, dropping leaves none,
// and the claims run in both queue table states, the head's dead tuples
// counted before the VACUUM and removed by it. The scratch schema is gone
// at the end.
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
		if m.Rows != half || m.Seconds <= 0 || m.BytesBefore <= 0 || m.BytesAfter <= 0 || m.Desc == "" {
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
	// Fewer, not none: another session's old snapshot on the shared
	// server keeps VACUUM from removing what it can still see.
	if del.Vacuum == nil || del.Vacuum.DeadTuples >= del.DeadTuples {
		t.Errorf("vacuum after the delete: %+v", del.Vacuum)
	}
	if drop.Statements != r.Days/2 || drop.DeadTuples != 0 || drop.BytesAfter >= drop.BytesBefore || drop.Vacuum != nil {
		t.Errorf("drop: %+v", drop)
	}
	if drop.WALBytes >= del.WALBytes {
		t.Errorf("dropping wrote %d WAL bytes, deleting %d", drop.WALBytes, del.WALBytes)
	}
	head, vac := r.Claims[0], r.Claims[1]
	if head.State != DeadHead || vac.State != Vacuumed {
		t.Fatalf("states %s, %s", head.State, vac.State)
	}
	if head.DeadTuples < int64(r.ClaimHead) || vac.DeadTuples >= head.DeadTuples {
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
