package report

import (
	"strings"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/raw"
)

// retentionFixture is a raw run with a retention measurement: 300,000
// rows, the delete 50× slower than the drop and 64× its WAL, the claims
// at 60% of their vacuumed rate with the dead head.
func retentionFixture() raw.Results {
	return raw.Results{ID: "20260102T025000Z-raw", Settings: map[string]any{"duration_s": 3}, Retention: &raw.Retention{
		Rows: 300000, Days: 8, Batch: 1000, Checkpoint: true, ClaimHead: 300000, ClaimFill: 300000, WAL: raw.WALRecords,
		Removals: []raw.Removal{
			{Method: raw.BatchedDelete, Desc: "the cleaner", Rows: 150000, Statements: 151, Seconds: 4, WALBytes: 64 << 20,
				DeadTuples: 150000, BytesBefore: 80 << 20, BytesAfter: 80 << 20,
				Vacuum: &raw.VacuumCost{Seconds: 0.25, WALBytes: 16 << 20, Bytes: 80 << 20}},
			{Method: raw.DropPartitions, Desc: "DROP TABLE", Rows: 150000, Statements: 4, Seconds: 0.08, WALBytes: 1 << 20,
				BytesBefore: 80 << 20, BytesAfter: 40 << 20},
		},
		Claims: []raw.ClaimState{
			{State: raw.DeadHead, Desc: "claims", DeadTuples: 300000, Bytes: 75 << 20, Items: 54000, Seconds: 3, Rate: 18000},
			{State: raw.Vacuumed, Desc: "claims", Bytes: 90 << 20, Items: 90000, Seconds: 3, Rate: 30000, RanOut: true},
		},
	}}
}

// TestRetentionSection renders both tables and the ratios computed from
// them, and nothing for a raw run without the measurement.
func TestRetentionSection(t *testing.T) {
	md := RetentionSection(retentionFixture())
	wantContains(t, "section", md,
		"## "+RetentionTitle,
		"run `20260102T025000Z-raw`",
		"`tasks` holds 300,000 done tasks processed over 8 days",
		"The oldest 4 days are removed. A CHECKPOINT runs before each removal",
		"| batched_delete | the cleaner | 150,000 | 151 | 4 | 64 MB | 447 bytes | 150,000 | 80 MB → 80 MB | 0.25 s, 16 MB, 0, 80 MB |",
		"| drop_partitions | DROP TABLE | 150,000 | 4 | 0.080 | 1024 kB | 6.99 bytes | 0 | 80 MB → 40 MB | none needed |",
		"took 50× the time and wrote 64× the WAL of dropping the partitions (80× with the VACUUM it leaves to do), and left 150,000 dead tuples",
		"| dead tuples at the head (no vacuum since the delete) | claims | 300,000 | 75 MB | 54,000 | 3 | 18000 |",
		"| after VACUUM | claims | 0 | 90 MB | 90,000 | 3 | 30000 (the rows ran out before the loop's end) |",
		"With 300,000 dead tuples at the head, claims ran at 60% of their rate after VACUUM.",
		"WAL is each removal's own, read with pg_walinspect",
	)
	r := retentionFixture()
	r.Retention.Checkpoint, r.Retention.CheckpointError = false, "permission denied"
	r.Retention.Claims[1].Error = "boom"
	r.Retention.Notes = []string{"VACUUM of tasks: after 10s, pid 7 (psql, idle in transaction) still saw the deleted rows"}
	r.Retention.WAL, r.Retention.WALNote = raw.WALAdvance, "pg_walinspect cannot be read (no EXECUTE)"
	md = RetentionSection(r)
	wantContains(t, "section", md, "WAL is the server's WAL position's advance, so anything else writing at the time counts too (pg_walinspect cannot be read (no EXECUTE)). ", "No CHECKPOINT could run before the removals (permission denied)", "not measured: boom",
		"- Another session held the deleted rows back (its snapshot could still see them, so VACUUM could not remove them nor claims skip them as dead): VACUUM of tasks: after 10s, pid 7 (psql, idle in transaction) still saw the deleted rows\n")
	if strings.Contains(md, "claims ran at") {
		t.Errorf("a ratio with a failed state:\n%s", md)
	}
	if s := RetentionSection(raw.Results{ID: "x"}); s != "" {
		t.Errorf("section without a measurement: %q", s)
	}
	if !strings.Contains(RawSection(retentionFixture(), nil), "## "+RetentionTitle) {
		t.Error("RawSection leaves the retention section out")
	}
}
