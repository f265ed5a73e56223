package report

import (
	"fmt"
	"strings"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/experiments"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/raw"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// NotifyTitle is the heading of the NOTIFY table, a subsection of the
// raw-limits section.
const NotifyTitle = "NOTIFY in the committing transaction vs debounced (raw loops)"

// notifyShort and debounceShort are the short names of the NOTIFY
// claims: the reference's, and the project's remedy.
const (
	notifyShort   = "NOTIFY serializes commits"
	debounceShort = "debounced NOTIFY keeps the commit rate"
)

// Thresholds of the NOTIFY claims, at notifyAt committers.
const (
	notifyAt          = 16
	notifyInTxBelow   = 0.5
	notifyDebounceMin = 0.8
)

func init() { claimTable = append(claimTable, rawClaims...) }

// rawClaims are the claims the raw loops' results settle.
var rawClaims = []claimSpec{
	{pair: pairs.Queue, short: notifyShort,
		claimText: texts("queue notify", figures),
		evaluate:  func(in claimInputs) outcome { return notifyEvaluate(in, notifySerializesIn) }},
	{pair: pairs.Queue, short: debounceShort,
		claimText: texts("queue debounce", figures),
		evaluate:  func(in claimInputs) outcome { return notifyEvaluate(in, debounceKeepsUpIn) }},
}

// notifyMeasure is one measurement of the three NOTIFY modes at
// notifyAt committers: their commits per second, and the NOTIFYs the
// debounced mode sent and its listener received.
type notifyMeasure struct {
	// where names the measurement ("the raw loops, PostgreSQL 15.18").
	where           string
	none, inTx, deb float64
	sent, received  float64
}

// text is m in the measured column: "<where>: 16 committers: … tps
// plain, … with pg_notify in the transaction (28%), … debounced (79%; …
// NOTIFYs sent, … received)".
func (m notifyMeasure) text() string {
	return fmt.Sprintf("%s: %d committers: %s tps plain, %s with pg_notify in the transaction (%.0f%%), %s debounced (%.0f%%; %s NOTIFYs sent, %s received)",
		m.where, notifyAt, num(m.none), num(m.inTx), 100*m.inTx/m.none, num(m.deb), 100*m.deb/m.none, count(int64(m.sent)), count(int64(m.received)))
}

// notifySerializesIn is the reference's claim on one measurement.
func notifySerializesIn(m notifyMeasure) (bool, string) {
	return m.inTx/m.none < notifyInTxBelow, fmt.Sprintf("%s: %.0f%%", m.where, 100*m.inTx/m.none)
}

// debounceKeepsUpIn is the remedy's claim on one measurement.
func debounceKeepsUpIn(m notifyMeasure) (bool, string) {
	return m.deb/m.none >= notifyDebounceMin && m.sent > 0 && m.received >= m.sent,
		fmt.Sprintf("%s: %.0f%% (%s of %s NOTIFYs received)", m.where, 100*m.deb/m.none, num(m.received), num(m.sent))
}

// notifyEvaluate decides a NOTIFY claim with judge on every measurement
// of in (notifyMeasures): it holds when every one holds, does not when
// none does, and is inconclusive otherwise.
func notifyEvaluate(in claimInputs, judge func(notifyMeasure) (bool, string)) outcome {
	ms, measured := notifyMeasures(in)
	if len(ms) == 0 {
		return outcome{missing: "neither the raw loops' NOTIFY series nor the notify-serializes-commits experiment is in these results (`go run ./loadtests raw`, `go run ./loadtests experiments -only notify-serializes-commits`)"}
	}
	var held, missed []string
	for _, m := range ms {
		ok, text := judge(m)
		if ok {
			held = append(held, text)
		} else {
			missed = append(missed, text)
		}
	}
	o := outcome{measured: measured, holds: len(missed) == 0}
	switch {
	case len(held) > 0 && len(missed) > 0:
		o.inconclusive = fmt.Sprintf("holds in %s; not in %s", strings.Join(held, ", "), strings.Join(missed, ", "))
	case len(ms) > 1:
		o.note = fmt.Sprintf("every measurement agrees (%d: %s)", len(ms), strings.Join(append(held, missed...), ", "))
	}
	return o
}

// notifyMeasures returns every measurement of the NOTIFY modes at
// notifyAt committers in the results (the raw loops' series first, then
// the notify-serializes-commits experiment's per version), and the
// measured column's text for them.
func notifyMeasures(in claimInputs) ([]notifyMeasure, string) {
	var ms []notifyMeasure
	var measured []string
	if s := in.raw.Notify; s != nil {
		a, okA := s.Find(raw.NotifyNone, notifyAt)
		b, okB := s.Find(raw.NotifyInTx, notifyAt)
		c, okC := s.Find(raw.NotifyDebounced, notifyAt)
		if okA && okB && okC && a.TPS > 0 {
			where := "the raw loops"
			if s.ServerVersion != "" {
				where += ", PostgreSQL " + s.ServerVersion
			}
			m := notifyMeasure{where: where, none: a.TPS, inTx: b.TPS, deb: c.TPS, sent: float64(c.Sent), received: float64(c.Received)}
			ms = append(ms, m)
			text := m.text()
			if one, ok1 := s.Find(raw.NotifyNone, 1); ok1 {
				if oneB, ok2 := s.Find(raw.NotifyInTx, 1); ok2 {
					text += fmt.Sprintf("; 1 committer: %s vs %s tps", num(one.TPS), num(oneB.TPS))
				}
			}
			measured = append(measured, text)
		} else {
			measured = append(measured, fmt.Sprintf("the raw loops' NOTIFY series lacks a mode at %d committers", notifyAt))
		}
	}
	xm, xtext := notifyExperimentMeasures(in)
	return append(ms, xm...), strings.Join(append(measured, xtext...), "; ")
}

// notifyExperimentMeasures are the notify-serializes-commits
// experiment's measurements: the stack's server, then each other
// version it compared on a private server, and their texts (with why
// other versions were not measured).
func notifyExperimentMeasures(in claimInputs) ([]notifyMeasure, []string) {
	if in.xf == nil {
		return nil, nil
	}
	for _, r := range in.xf.Results {
		if r.Name != experiments.NotifySerializes || r.Error != "" {
			continue
		}
		var ms []notifyMeasure
		var texts []string
		prefixes := []string{""}
		for _, p := range strings.Split(r.Settings["compared"], ",") {
			if p != "" {
				prefixes = append(prefixes, p+".")
			}
		}
		for _, p := range prefixes {
			at := func(what driver.MetricPrefix, mode string) float64 {
				return r.Metrics[experiments.NotifyKey(p, what, mode, notifyAt)]
			}
			none := at(experiments.MetricNotifyTPSOf, raw.NotifyNone)
			if none <= 0 {
				continue
			}
			where := experiments.NotifySerializes + ", PostgreSQL " + r.Settings[p+"server_version"]
			if p != "" {
				where += " (a private server)"
			}
			m := notifyMeasure{where: where, none: none, inTx: at(experiments.MetricNotifyTPSOf, raw.NotifyInTx), deb: at(experiments.MetricNotifyTPSOf, raw.NotifyDebounced),
				sent: at(experiments.MetricNotifySentOf, raw.NotifyDebounced), received: at(experiments.MetricNotifyReceivedOf, raw.NotifyDebounced)}
			ms = append(ms, m)
			texts = append(texts, m.text())
		}
		if why := r.Settings["not_compared"]; why != "" {
			texts = append(texts, "other versions not measured: "+why)
		}
		return ms, texts
	}
	return nil, nil
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
