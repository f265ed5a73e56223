package report

import (
	"fmt"
	"strings"
	"sync"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/eventstore"
)

// The words a value that is not a valid figure is printed as.
const (
	// notRecorded is a metric a valid side did not report.
	notRecorded = "not recorded"
	// notMeasuredHere is a figure no scenario of these runs measured.
	notMeasuredHere = "not measured"
	// failedAbove is a failed side's metric cell under the point's
	// status row, which gives the reason.
	failedAbove = "failed (reason above)"
	// skippedAbove is the cell of a side skipped by design.
	skippedAbove = "skipped (reason above)"
)

// validate fills the statuses runs built in memory lack (files read
// with driver.ReadRun have them already).
func validate(all []*driver.Run) {
	for _, r := range all {
		if r != nil {
			r.Validate()
		}
	}
}

// statusText is a status in words for a table cell.
func statusText(st driver.Status) string { return md(st.String()) }

// readLog collects the sides that are not valid among those one claim
// reads (median), in reading order, each once.
type readLog struct {
	seen   map[string]bool
	failed []string
	// reads counts the sides read, valid or not; lacking those of points
	// without the round of the view being evaluated (lackRound).
	reads, lacking int
}

func (l *readLog) reset() { l.seen, l.failed, l.reads, l.lacking = map[string]bool{}, nil, 0, 0 }

func (l *readLog) add(what string) {
	if !l.seen[what] {
		l.seen[what] = true
		l.failed = append(l.failed, what)
	}
}

// trackers maps the points of a claims evaluation's private copies of the
// runs to the log of the claim being evaluated, so that median and ratio,
// which see only a point, can report the invalid sides a claim reads.
// Points outside Claims' copies (the README's, the charts') have none.
var trackers sync.Map // *driver.Point → *readLog

// lackRound holds the points of a claims evaluation's per-round views
// that have several rounds but not the view's (a 2-round sustainable
// search in the view of round 2): such a point is kept whole in the view,
// so a view that reads one is not a round, and decides nothing.
var lackRound sync.Map // *driver.Point → struct{}

// sideValid reports whether side of p holds valid figures; when it does
// not and p belongs to a claims evaluation, the side is logged there.
func sideValid(p *driver.Point, side string) bool {
	l, tracked := trackers.Load(p)
	if tracked {
		l.(*readLog).reads++
		if _, lacks := lackRound.Load(p); lacks {
			l.(*readLog).lacking++
		}
	}
	st := p.SideStatus(side)
	if st.OK() {
		return true
	}
	if tracked {
		l.(*readLog).add(fmt.Sprintf("%s %s, %s: %s", p.Scenario, p.Name, side, st))
	}
	return false
}

// metricMissing logs, when p belongs to a claims evaluation, that a
// valid side of p lacks metric: a renamed or dropped metric makes the
// claim a failed run that names it, never a silent "not measured".
func metricMissing(p *driver.Point, metric driver.Metric, side string) {
	if l, tracked := trackers.Load(p); tracked {
		l.(*readLog).add(fmt.Sprintf("%s %s, %s: no metric %q in the results (renamed or not recorded)", p.Scenario, p.Name, side, metric))
	}
}

// statusRow is the row a point's table gets when a side is not valid:
// each side's status in words.
func statusRow(p *driver.Point) ([4]string, bool) {
	a, b := p.SideStatus(p.Sides[0]), driver.Status{State: driver.StateOK}
	if len(p.Sides) >= 2 {
		b = p.SideStatus(p.Sides[1])
	}
	if a.OK() && b.OK() {
		return [4]string{}, false
	}
	word := func(st driver.Status) string {
		if st.OK() {
			return "ok"
		}
		return statusText(st)
	}
	why := " not valid"
	if (a.OK() || a.State == driver.StateSkipped) && (b.OK() || b.State == driver.StateSkipped) {
		why = " skipped"
	}
	return [4]string{"validity", word(a), word(b), "no ratio: " + strings.Join(invalidSides(p), " and ") + why}, true
}

// invalidSides names the sides of p that are not valid.
func invalidSides(p *driver.Point) []string {
	var out []string
	for _, s := range p.Sides {
		if !p.SideStatus(s).OK() {
			out = append(out, s)
		}
	}
	return out
}

// FailedPoints names every point, side, ceiling and event-store row of
// these runs that is not valid, with its reason: what `results` refuses
// to publish unless told to (PublishDecision).
func FailedPoints(all []*driver.Run) []string {
	all, bench := splitBench(all)
	return failedPoints(all, eventStoreOf(bench))
}

// failedPoints is FailedPoints with the event store's results apart.
func failedPoints(all []*driver.Run, es eventstore.Results) []string {
	var out []string
	for _, f := range driver.FailedPoints(all) {
		out = append(out, f.String())
	}
	if a := es.Append; a != nil {
		for _, r := range a.Rows {
			if st := appendStatus(r); r.Measured && !st.OK() {
				out = append(out, fmt.Sprintf("eventstore append %s %s round %d, %s: %s", modeOf(r), r.Series, r.Round, r.Engine, st))
			}
		}
	}
	if p := es.PointRead; p != nil {
		for _, r := range p.Rows {
			if st := pointReadStatus(r); (r.Measured || r.Failed != "") && !st.OK() {
				out = append(out, fmt.Sprintf("eventstore point-read, %s: %s", r.Engine, st))
			}
		}
	}
	return out
}

// PublishDecision decides whether a results run may publish its report:
// nil when nothing failed, or when publishFailed says to publish the
// failed points as failed; otherwise an error naming every failed point.
func PublishDecision(failed []string, publishFailed bool) error {
	if len(failed) == 0 || publishFailed {
		return nil
	}
	return fmt.Errorf("%d failed points (RESULTS.md shows them as failed; rerun, or pass -publish-failed to publish them so):\n  %s",
		len(failed), strings.Join(failed, "\n  "))
}

// FailedSection is RESULTS.md's list of the points that are not valid,
// each with its reason; "" when every point is valid.
func FailedSection(all []*driver.Run) string {
	all, bench := splitBench(all)
	return failedSection(all, eventStoreOf(bench))
}

// failedSection is FailedSection with the event store's results apart.
func failedSection(all []*driver.Run, es eventstore.Results) string {
	failed := failedPoints(all, es)
	if len(failed) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n## Failed points\n\nThese points were run but their figures are not valid; every table, chart and claim below shows them as failed, never as a number. A point fails when " +
		fmt.Sprintf("%s or more of a phase's requests fail (sheds, 503 with Retry-After, apart), nothing is accepted, no metric is recorded, or the run aborts before it.\n\n", pct(driver.FailShare)))
	for _, f := range failed {
		b.WriteString("- " + md(f) + "\n")
	}
	return b.String()
}

// pct formats a share as a percentage.
func pct(share float64) string { return num(100*share) + "%" }
