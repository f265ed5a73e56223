package report

import (
	"fmt"
	"strings"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/raw"
)

// RetentionTitle is the heading of RESULTS.md's retention section.
const RetentionTitle = "Retention and dead tuples (raw loops)"

// RetentionSection renders the raw run's retention measurement (issue 16):
// the oldest half of a history table removed by the cleaner's batched
// DELETE and by dropping day partitions, then the claim rate with dead
// tuples at the queue table's head and after VACUUM. It is "" when r has
// no retention measurement.
func RetentionSection(r raw.Results) string {
	m := r.Retention
	if m == nil {
		return ""
	}
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("## %s\n\n", RetentionTitle)
	w("Measured with the raw loops (alone: `go run ./loadtests raw -only postgres`), run `%s`, on the queue pair's own tables: its migrations create `tasks` and `queue_jobs` in a scratch schema, dropped afterwards. ", r.ID)
	w("Autovacuum is off on the scratch tables, so that what each method leaves behind is counted before anything cleans it. ")
	if m.WAL == raw.WALRecords {
		w("WAL is each removal's own, read with pg_walinspect: every record that changes a page of the table (heap, visibility map, indexes, TOAST) and every record of the transactions that wrote them or that the removal ran, full-page images included, so other work on the server does not count. ")
	} else {
		w("WAL is the server's WAL position's advance, so anything else writing at the time counts too%s. ", noteOf(m.WALNote))
	}
	w("The project's choice and its reasons are in [docs/queue.md](docs/queue.md#retention) and [docs/log.md](docs/log.md#retention).\n\n")
	if m.Error != "" {
		w("The measurement stopped early: %s\n\n", md(m.Error))
	}
	for _, n := range m.Notes {
		w("- Another session held the deleted rows back (its snapshot could still see them, so VACUUM could not remove them nor claims skip them as dead): %s\n", md(n))
	}
	if len(m.Notes) > 0 {
		w("\n")
	}
	retentionRemovals(&b, r, m)
	retentionClaims(&b, r, m)
	w("\n")
	return b.String()
}

// retentionRemovals writes the subsection on removing the oldest half of
// the history: batched DELETE vs dropped partitions.
func retentionRemovals(b *strings.Builder, r raw.Results, m *raw.Retention) {
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	w("### Removing the oldest half of the history: batched DELETE vs dropped partitions\n\n")
	w("`tasks` holds %s done tasks processed over %d days, and a copy partitioned by day on `processed_at` (primary key `(id, processed_at)`) holds the same rows; both are vacuumed first, as old history is. The oldest %d days are removed. ", count(int64(m.Rows)), m.Days, m.Days/2)
	if m.Checkpoint {
		w("A CHECKPOINT runs before each removal, so the first change of each page writes a full-page image, as it does for rows written long ago.\n\n")
	} else {
		w("No CHECKPOINT could run before the removals (%s): pages changed since the last one write no full-page image, so the WAL figures are low.\n\n", md(orDash(m.CheckpointError)))
	}
	w("| method | how | rows removed | statements | seconds | WAL written | WAL per row | dead tuples left | total size before → after | VACUUM after it: seconds, WAL, dead tuples left, size |\n|---|---|---|---|---|---|---|---|---|---|\n")
	method := func(x *raw.Removal) string { return x.Method }
	del, drop := lastWith(m.Removals, method, raw.BatchedDelete), lastWith(m.Removals, method, raw.DropPartitions)
	for _, x := range m.Removals {
		if x.Error != "" {
			w("| %s | %s | not measured: %s | | | | | | | |\n", x.Method, md(r.RemovalDesc(x)), md(x.Error))
			continue
		}
		perRow := "no rows"
		if x.Rows > 0 {
			perRow = num(float64(x.WALBytes)/float64(x.Rows)) + " bytes"
		}
		vac := "none needed"
		if v := x.Vacuum; v != nil {
			vac = fmt.Sprintf("%s s, %s, %s, %s", num(v.Seconds), bytesIEC(v.WALBytes), count(v.DeadTuples), bytesIEC(v.Bytes))
		} else if x.DeadTuples > 0 {
			vac = "not run"
		}
		w("| %s | %s | %s | %d | %s | %s | %s | %s | %s → %s | %s |\n", x.Method, md(r.RemovalDesc(x)), count(x.Rows), x.Statements, num(x.Seconds),
			bytesIEC(x.WALBytes), perRow, count(x.DeadTuples), bytesIEC(x.BytesBefore), bytesIEC(x.BytesAfter), vac)
	}
	if del != nil && drop != nil && del.Error == "" && drop.Error == "" && drop.WALBytes > 0 && drop.Seconds > 0 {
		w("\nThe batched DELETE took %s× the time and wrote %s× the WAL of dropping the partitions (%s× with the VACUUM it leaves to do), and left %s dead tuples; ",
			num(del.Seconds/drop.Seconds), num(float64(del.WALBytes)/float64(drop.WALBytes)),
			num(float64(del.WALBytes+vacuumWAL(del))/float64(drop.WALBytes)), count(del.DeadTuples))
		w("its table keeps its size (VACUUM makes the space reusable by new rows, it does not give it back), while dropping returns the partitions' files at once.\n")
	}

}

// retentionClaims writes the subsection on claims with dead tuples at the
// queue table's head, and after VACUUM.
func retentionClaims(b *strings.Builder, r raw.Results, m *raw.Retention) {
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	w("\n### Claims with dead tuples at the queue table's head, and after VACUUM\n\n")
	w("`queue_jobs` (unlogged, as by default) gets %s rows at its head and %s due after them, and is vacuumed; one DELETE removes the head, as completions do, leaving its dead tuples in the heap and in `queue_jobs_run_at`. ", count(int64(m.ClaimHead)), count(int64(m.ClaimFill)))
	w("Workers then claim with no-rabbitmq's statement shape (without its `tasks` update) and delete what they claimed, for %vs; then the due rows are topped up to %s again, a VACUUM runs, and the same claims run again.\n\n", r.Settings["duration_s"], count(int64(m.ClaimFill)))
	w("| queue_jobs state | how | dead tuples at start | total size at start | rows claimed and deleted | seconds | rows/s |\n|---|---|---|---|---|---|---|\n")
	state := func(c *raw.ClaimState) string { return c.State }
	head, vac := lastWith(m.Claims, state, raw.DeadHead), lastWith(m.Claims, state, raw.Vacuumed)
	for _, c := range m.Claims {
		rate := num(c.Rate)
		if c.Error != "" {
			rate = "not measured: " + md(c.Error)
		} else if c.RanOut {
			rate += " (the rows ran out before the loop's end)"
		}
		w("| %s | %s | %s | %s | %s | %s | %s |\n", claimStateLabel(c.State), md(r.ClaimDesc(c)), count(c.DeadTuples), bytesIEC(c.Bytes), count(c.Items), num(c.Seconds), rate)
	}
	if head != nil && vac != nil && head.Error == "" && vac.Error == "" && vac.Rate > 0 {
		w("\nWith %s dead tuples at the head, claims ran at %.0f%% of their rate after VACUUM.\n", count(head.DeadTuples), 100*head.Rate/vac.Rate)
	}
}

// vacuumWAL is the WAL of the VACUUM after x, 0 without one.
func vacuumWAL(x *raw.Removal) int64 {
	if x.Vacuum == nil {
		return 0
	}
	return x.Vacuum.WALBytes
}

// claimStateLabel names a queue table state in the claims table.
func claimStateLabel(state string) string {
	switch state {
	case raw.DeadHead:
		return "dead tuples at the head (no vacuum since the delete)"
	case raw.Vacuumed:
		return "after VACUUM"
	}
	return state
}

// noteOf is note as a parenthesis after a sentence, "" for none.
func noteOf(note string) string {
	if note == "" {
		return ""
	}
	return " (" + md(note) + ")"
}

// lastWith returns the last element of xs whose key is k, or nil.
func lastWith[T any](xs []T, key func(*T) string, k string) *T {
	var last *T
	for i := range xs {
		if key(&xs[i]) == k {
			last = &xs[i]
		}
	}
	return last
}
