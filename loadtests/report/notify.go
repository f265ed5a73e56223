package report

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/experiments"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/raw"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// NotifyTitle is the heading of the NOTIFY table, a subsection of the
// raw-limits section.
const NotifyTitle = "NOTIFY in the committing transaction vs debounced (raw loops)"

// notifyShort is the short name of the NOTIFY claim.
const notifyShort = "NOTIFY serializes commits"

// Thresholds of the NOTIFY claim, at notifyAt committers.
const (
	notifyAt          = 16
	notifyInTxBelow   = 0.5
	notifyDebounceMin = 0.8
)

func init() { claimTable = append(claimTable, rawClaims...) }

// rawClaims are the claims the raw loops' results settle.
var rawClaims = []claimSpec{
	{pair: pairs.Queue, short: notifyShort,
		claim: "NOTIFY in the committing transaction serializes commits (the reference adds \"fixed only in PostgreSQL 19\"; " +
			"the PostgreSQL source does not confirm that: commit 282b1cde9d for 19 reworks listener wake-ups, and PreCommit_Notify " +
			"still takes the cluster-wide lock on \"database 0\" until the commit ends, see docs/queue.md). Verified here on the stack's PostgreSQL 15, and on every other version the notify-serializes-commits experiment measured beside it (PostgreSQL 18 from make deps-cluster), named in the measured column",
		rule: fmt.Sprintf("at %d concurrent committers, INSERT + pg_notify in the transaction reaches < %.0f%% of plain INSERT + COMMIT's tps, "+
			"and the debounced mode (NOTIFY_MODE=debounced: at most one NOTIFY per 5 ms, outside the transactions) ≥ %.0f%% of it while its listener still receives every NOTIFY sent",
			notifyAt, 100*notifyInTxBelow, 100*notifyDebounceMin),
		evaluate: notifySerializes},
}

// notifySerializes evaluates the NOTIFY claim on the raw results' NOTIFY
// series.
func notifySerializes(in claimInputs) outcome {
	s := in.raw.Notify
	if s == nil || len(s.Points) == 0 {
		return outcome{missing: "the raw loops' NOTIFY series is not in these results (`go run ./loadtests raw`)"}
	}
	a, okA := s.Find(raw.NotifyNone, notifyAt)
	b, okB := s.Find(raw.NotifyInTx, notifyAt)
	c, okC := s.Find(raw.NotifyDebounced, notifyAt)
	if !okA || !okB || !okC {
		return outcome{missing: fmt.Sprintf("the NOTIFY series lacks a mode at %d committers", notifyAt)}
	}
	rb, rc := b.TPS/a.TPS, c.TPS/a.TPS
	measured := fmt.Sprintf("%d committers: %s tps plain, %s with pg_notify in the transaction (%.0f%%), %s debounced (%.0f%%; %s NOTIFYs sent, %s received)",
		notifyAt, num(a.TPS), num(b.TPS), 100*rb, num(c.TPS), 100*rc, count(c.Sent), count(c.Received))
	if one, ok1 := s.Find(raw.NotifyNone, 1); ok1 {
		if oneB, ok2 := s.Find(raw.NotifyInTx, 1); ok2 {
			measured += fmt.Sprintf("; 1 committer: %s vs %s tps", num(one.TPS), num(oneB.TPS))
		}
	}
	if s.ServerVersion != "" {
		measured += "; PostgreSQL " + s.ServerVersion
	}
	measured += notifyOtherVersions(in)
	return outcome{measured: measured, holds: rb < notifyInTxBelow && rc >= notifyDebounceMin && c.Sent > 0 && c.Received >= c.Sent}
}

// notifyModeLabels are the table's column heads per mode.
var notifyModeLabels = map[string]string{
	raw.NotifyNone:      "INSERT + COMMIT",
	raw.NotifyInTx:      "INSERT + pg_notify + COMMIT",
	raw.NotifyDebounced: "debounced NOTIFY (5 ms)",
}

// NotifySection renders the NOTIFY series of r as a subsection of the
// raw-limits section: per count of committers, each mode's tps and p99
// commit latency, its tps as a share of plain commits', and the
// notifications the listener received; "" when r has no series.
func NotifySection(r raw.Results) string {
	s := r.Notify
	if s == nil {
		return ""
	}
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("### %s\n\n", NotifyTitle)
	w("Concurrent committers on one connection each insert one row per transaction into a logged scratch table, %vs per point, while one other connection LISTENs on the channel notified. ", s.PointSeconds)
	w("*INSERT + pg_notify + COMMIT* is NOTIFY_MODE=commit: the INSERT and `pg_notify` in one statement's transaction, so its round trips are the plain INSERT's. ")
	w("*debounced* is NOTIFY_MODE=debounced: plain commits, each followed by a poke of `pglisten.Debouncer`, which sends at most one NOTIFY per %v in a transaction of its own. ", num(s.IntervalMs)+" ms")
	w("p99 is the committing statement's latency (HdrHistogram); *received* counts what the listener got of the NOTIFYs sent. ")
	w("A committing transaction that has NOTIFYed takes a cluster-wide lock until its commit record is flushed, so such commits do not share WAL flushes (group commit); see docs/queue.md for what each PostgreSQL version does.\n\n")
	if s.Error != "" {
		w("Not measured: %s\n\n", md(s.Error))
		return b.String()
	}
	w("| committers |")
	for _, m := range raw.NotifyModes {
		w(" %s: tps | p99 ms |", notifyModeLabels[m])
		if m != raw.NotifyNone {
			w(" share of plain tps | NOTIFYs sent / received |")
		}
	}
	w("\n|---|")
	for _, m := range raw.NotifyModes {
		w("---|---|")
		if m != raw.NotifyNone {
			w("---|---|")
		}
	}
	w("\n")
	for _, n := range raw.NotifyCommitters {
		w("| %d |", n)
		base, okBase := s.Find(raw.NotifyNone, n)
		for _, m := range raw.NotifyModes {
			p, ok := s.Find(m, n)
			if !ok {
				w(" %s | |", notMeasured(s, m, n))
				if m != raw.NotifyNone {
					w(" | |")
				}
				continue
			}
			w(" %s | %s |", num(p.TPS), num(p.P99Ms))
			if m == raw.NotifyNone {
				continue
			}
			share := noRatioZero
			if okBase && base.TPS > 0 {
				share = fmt.Sprintf("%.0f%%", 100*p.TPS/base.TPS)
			}
			w(" %s | %s / %s |", share, count(p.Sent), count(p.Received))
		}
		w("\n")
	}
	w("\n")
	return b.String()
}

// notMeasured is the cell of a point that has no rate: its error, or
// "–".
func notMeasured(s *raw.NotifySeries, mode string, n int) string {
	for _, p := range s.Points {
		if p.Mode == mode && p.Committers == n && p.Error != "" {
			return "not measured: " + md(p.Error)
		}
	}
	return notMeasuredHere
}

// notifyOtherVersions is what the notify-serializes-commits experiment
// measured on the other PostgreSQL versions it compared ("; PostgreSQL
// 18.4 (notify-serializes-commits, a private server): … (12%), …"), or
// why it measured none; "" without the experiment's result. The verdict
// stays the raw loops'.
func notifyOtherVersions(in claimInputs) string {
	if in.xf == nil {
		return ""
	}
	for _, r := range in.xf.Results {
		if r.Name != experiments.NotifySerializes || r.Error != "" {
			continue
		}
		var out string
		for _, p := range strings.Split(r.Settings["compared"], ",") {
			at := func(mode string) float64 { return r.Metrics[p+".tps_"+mode+"_"+strconv.Itoa(notifyAt)] }
			none, inTx, deb := at(raw.NotifyNone), at(raw.NotifyInTx), at(raw.NotifyDebounced)
			if p == "" || none <= 0 {
				continue
			}
			out += fmt.Sprintf("; PostgreSQL %s (%s, a private server): %d committers: %s tps plain, %s with pg_notify in the transaction (%.0f%%), %s debounced (%.0f%%)",
				r.Settings[p+".server_version"], experiments.NotifySerializes, notifyAt, num(none), num(inTx), 100*inTx/none, num(deb), 100*deb/none)
		}
		if why := r.Settings["not_compared"]; why != "" {
			out += "; other versions not measured: " + why
		}
		return out
	}
	return ""
}
