package report

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/eventstore"
	sc "github.com/where-postgres-ends/where-postgres-ends/loadtests/scenario"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// row is one metric shown in a table, with its label.
type row struct {
	metric driver.Metric
	label  string
}

// keyMetrics lists, per scenario, the metrics tables show.
func keyMetrics(scenario driver.ScenarioName) []row {
	if rows, ok := extraMetrics[scenario]; ok {
		return rows
	}
	client := []row{{driver.ClientP50, "client p50 ms"}, {driver.ClientP99, "client p99 ms"}, {driver.ClientErrors, "errors"}, {driver.ClientShed, "shed (503)"}}
	switch {
	case strings.HasSuffix(string(scenario), ".throughput"):
		return throughputRows()
	case strings.HasPrefix(string(scenario), "queue."):
		return append(client,
			row{sc.MetricThroughput, "processed/s"}, row{sc.MetricBacklogEnd, "backlog at end"},
			row{driver.ServerSendP50, "send p50 ms"}, row{driver.ServerSendP99, "send p99 ms"},
			row{driver.ServerDeliveryP50, "delivery p50 ms"}, row{driver.ServerDeliveryP99, "delivery p99 ms"},
			row{driver.ServerProcessingP50, "send→processed p50 ms"}, row{driver.ServerProcessingP99, "send→processed p99 ms"})
	case strings.HasPrefix(string(scenario), "log."):
		return append(client,
			row{sc.MetricThroughput, "delivered/s"}, row{sc.MetricBacklogEnd, "backlog at end"},
			row{driver.ServerWriteP50, "write p50 ms"}, row{driver.ServerWriteP99, "write p99 ms"},
			row{driver.ServerDeliveryP50, "delivery p50 ms"}, row{driver.ServerDeliveryP95, "delivery p95 ms"},
			row{driver.ServerDeliveryP99, "delivery p99 ms"})
	case scenario == sc.PairScenarioName(pairs.Documents, sc.KindSearch):
		return []row{{driver.ClientP50, "client p50 ms"}, {driver.ClientP95, "client p95 ms"}, {driver.ClientP99, "client p99 ms"},
			{driver.ClientErrors, "errors"}, {driver.ServerSearchP50, "search p50 ms"}, {driver.ServerSearchP95, "search p95 ms"},
			{driver.ServerSearchP99, "search p99 ms"}}
	case scenario == sc.DocumentsScale:
		return []row{{sc.ScaleLoadS, "bulk load s (the driver generating the users included)"}, {sc.ScaleIndexBuildS, "index build s"}, {sc.ScaleSearchIndexMB, "search index MB"},
			{sc.ScaleIndexesMB, "all indexes MB"}, {sc.ScaleTableMB, "table MB"}, {sc.ScaleOneSearchMS, "one search ms (no ceiling searched)"}}
	case strings.HasPrefix(string(scenario), "documents.rewrite"):
		return []row{{driver.ClientRewrite.P50(), "rewrite p50 ms"}, {driver.ClientRewrite.P99(), "rewrite p99 ms"},
			{driver.ClientPatch.P50(), "neighbour patch p50 ms"}, {driver.ClientPatch.P99(), "neighbour patch p99 ms"},
			{sc.MetricCostRatioP50, "rewrite ÷ patch (p50)"}, {sc.MetricCostRatioP99, "rewrite ÷ patch (p99)"},
			{driver.ServerReplaceProfileP50, "server rewrite p50 ms"}, {driver.ServerPatchFieldsP50, "server patch p50 ms"},
			{sc.MetricServerCostRatioP50, "server rewrite ÷ patch (p50)"},
			{sc.MetricWALPerRewrite, "WAL bytes per rewrite"}, {sc.MetricWALPerPatch, "WAL bytes per patch"},
			{driver.ClientRewrite.Errors(), "rewrite errors"}, {driver.ClientPatch.Errors(), "patch errors"}}
	}
	return client
}

// SideLabel names a side for the reader: the mongodb service is labelled
// with FerretDB when the run's buildInfo said FerretDB.
func SideLabel(run *driver.Run, service string) string {
	if service == pairs.MongoDB && run.Versions.MongoFlavor == "FerretDB" {
		return "mongodb (on FerretDB)"
	}
	return service
}

// num formats a number compactly: whole numbers and figures from 100 up
// without decimals, from 10 with one, from 0.1 with two, and smaller ones
// with two significant digits, so that a small measured value (a ratio
// of 2.30 ms to 1232 ms) never prints as 0.00.
func num(v float64) string {
	switch a := math.Abs(v); {
	case math.IsNaN(v):
		return "n/a"
	case v == math.Trunc(v) && a < 1e9:
		return fmt.Sprintf("%.0f", v)
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 0.1:
		return fmt.Sprintf("%.2f", v)
	case a < 1e-6:
		return fmt.Sprintf("%.2g", v)
	}
	return fmt.Sprintf("%.*f", int(math.Ceil(-math.Log10(math.Abs(v))))+1, v)
}

// cell formats an aggregate: "median (min–max)", or the median alone for
// one round; a metric the side did not report is "not recorded".
func cell(a driver.Agg, ok bool) string {
	if !ok {
		return notRecorded
	}
	if a.N <= 1 || a.Min == a.Max {
		return num(a.Median)
	}
	return fmt.Sprintf("%s (%s–%s)", num(a.Median), num(a.Min), num(a.Max))
}

// noRatio says why a ratio cell holds no ratio.
const (
	noRatioZero    = "no ratio: a side is 0"
	noRatioBoth    = "no ratio: both 0"
	noRatioMissing = "no ratio: a side not recorded"
	noRatioNone    = "no ratio: a side has none"
)

// ratioCell formats the median ratio and every round's; a ratio is only
// printed when both sides' medians are measured and not zero (0 vs 257
// is not "0×"), and a round without one is "n/a".
func ratioCell(m *driver.MetricSummary, sides []string) string {
	if m == nil || len(sides) < 2 {
		return noRatioMissing
	}
	a, okA := m.Sides[sides[0]]
	b, okB := m.Sides[sides[1]]
	switch {
	case !okA || !okB:
		return noRatioMissing
	case a.Median == 0 && b.Median == 0:
		return noRatioBoth
	case a.Median == 0 || b.Median == 0 || m.Ratio == nil || *m.Ratio == 0:
		return noRatioZero
	}
	var rs []string
	for _, r := range m.Ratios {
		if r == nil || *r == 0 {
			rs = append(rs, "n/a")
		} else {
			rs = append(rs, num(*r))
		}
	}
	if len(rs) <= 1 {
		return num(*m.Ratio) + "×"
	}
	return fmt.Sprintf("%s× [%s]", num(*m.Ratio), strings.Join(rs, " "))
}

// sideCell is a side's cell of metric m in p: its status when the side
// is not valid, else its aggregate, else what its absence means
// (absentMeans) or "not recorded".
func sideCell(p *driver.Point, m *driver.MetricSummary, side string) string {
	if st := p.SideStatus(side); st.State == driver.StateSkipped {
		return skippedAbove
	} else if !st.OK() {
		return failedAbove
	}
	if m == nil {
		return notRecorded
	}
	a, ok := m.Sides[side]
	if !ok {
		if am, found := absentMeans[string(m.Name)]; found && hasValue(p, side, am.given) {
			return am.cell
		}
	}
	return cell(a, ok)
}

// absentMeans says, by metric, what a side's missing figure means when
// the same side recorded the metric given: the scale point measures a
// side's search index among all its indexes, so with those measured
// and no search index among them, the side has none (FerretDB, which
// refuses MongoDB's wildcard index), not a figure lost.
var absentMeans = map[string]struct{ given, cell string }{
	sc.ScaleSearchIndexMB: {sc.ScaleIndexesMB, "none: no index of this side serves the search (its indexes were measured)"},
}

// pointRows returns the table rows of a point: label, A, B, A/B. A point
// with a side that is not valid starts with a validity row giving each
// side's status, and the invalid side's cells and the ratios say so
// instead of showing a figure.
func pointRows(p *driver.Point) [][4]string {
	var out [][4]string
	st, bad := statusRow(p)
	if bad {
		out = append(out, st)
	}
	for _, km := range keyMetrics(p.Scenario) {
		m := p.Find(km.metric)
		if m == nil {
			continue
		}
		r := ratioCell(m, p.Sides)
		a, b := sideCell(p, m, p.Sides[0]), sideBCell(p, m)
		if am, ok := absentMeans[string(km.metric)]; ok && (a == am.cell || b == am.cell) {
			r = noRatioNone
		}
		if bad {
			r = st[3]
		}
		out = append(out, [4]string{km.label, a, b, r})
	}
	return out
}

// oneSide is the B cell and header of a point measured on one side only
// (a Postgres side's second design, as the scale-out scenario's).
const oneSide = "(one side)"

// sideBCell is m's cell of p's B side, oneSide for a point with one.
func sideBCell(p *driver.Point, m *driver.MetricSummary) string {
	if len(p.Sides) < 2 {
		return oneSide
	}
	return sideCell(p, m, p.Sides[1])
}

// sideLabels are the labels of p's A and B sides, oneSide for a point
// with one side.
func sideLabels(run *driver.Run, p *driver.Point) (string, string) {
	if len(p.Sides) < 2 {
		return SideLabel(run, p.Sides[0]), oneSide
	}
	return SideLabel(run, p.Sides[0]), SideLabel(run, p.Sides[1])
}

// sideErrors lists the errors of a point's sides.
func sideErrors(p *driver.Point) []string {
	var out []string
	for _, r := range p.Rounds {
		for _, s := range r.Order {
			if sr := r.Sides[s]; sr != nil && sr.Error != "" {
				out = append(out, fmt.Sprintf("round %d %s: %s", r.Index, s, sr.Error))
			}
		}
	}
	return out
}

// Table prints a run's points and ceilings as aligned text tables.
func Table(w io.Writer, run *driver.Run) {
	run.Validate()
	for i := range run.Points {
		p := &run.Points[i]
		a, b := sideLabels(run, p)
		fmt.Fprintf(w, "\n== %s %s (%g s per attack, %d rounds; A/B = %s ÷ %s)\n", p.Scenario, p.Name, p.DurationS, len(p.Rounds), a, b)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "metric\t%s\t%s\tA/B [per round]\n", a, b)
		for _, r := range pointRows(p) {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r[0], r[1], r[2], r[3])
		}
		tw.Flush()
		for _, e := range sideErrors(p) {
			fmt.Fprintln(w, "  error:", e)
		}
	}
	if len(run.Ceilings) > 0 {
		fmt.Fprintln(w, "\n== ceilings")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "scenario\tservice\tceiling/s median (min–max)\tper round")
		for _, c := range run.Ceilings {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.Scenario, SideLabel(run, c.Service), ceilingCell(c), ceilingRounds(c))
		}
		tw.Flush()
	}
	for _, n := range notesOf(run) {
		fmt.Fprintln(w, "note:", n)
	}
}

// ceilingCell is a ceiling's median knee with its range, or why it is no
// figure (kneeCell).
func ceilingCell(c driver.Ceiling) string { return kneeCell(kneeOf(&c)) }

func ceilingRounds(c driver.Ceiling) string {
	var rs []string
	for _, r := range c.Rounds {
		s := num(r.Rate)
		if r.Rate == 0 {
			s = "no step passed"
		}
		if r.Capped {
			s += "+"
		}
		rs = append(rs, s)
	}
	return strings.Join(rs, " ")
}

// demoMetrics are the few numbers the demo shows per pair.
var demoMetrics = map[string][]row{
	pairs.Queue: {{sc.MetricThroughput, "processed/s"}, {driver.ClientP50, "POST /tasks p50 ms"}, {driver.ClientP99, "POST /tasks p99 ms"},
		{driver.ServerDeliveryP50, "delivery p50 ms"}, {driver.ServerDeliveryP99, "delivery p99 ms"},
		{driver.ServerProcessingP50, "send→processed p50 ms"}, {driver.ServerProcessingP99, "send→processed p99 ms"}, {driver.ClientErrors, "errors"}, {driver.ClientShed, "shed (503)"}},
	pairs.Log: {{sc.MetricThroughput, "delivered/s"}, {driver.ServerWriteP50, "write p50 ms"}, {driver.ServerWriteP99, "write p99 ms"},
		{driver.ServerDeliveryP50, "delivery p50 ms"}, {driver.ServerDeliveryP99, "delivery p99 ms"}, {driver.ClientErrors, "errors"}, {driver.ClientShed, "shed (503)"}},
	"documents.search": {{driver.ClientOKRate, "searches/s"}, {driver.ServerSearchP50, "search p50 ms"}, {driver.ServerSearchP99, "search p99 ms"}, {driver.ClientErrors, "errors"}},
	"documents.rewrite": {{driver.ClientRewrite.P50(), "rewrite p50 ms"}, {driver.ClientRewrite.P99(), "rewrite p99 ms"},
		{driver.ClientPatch.P50(), "neighbour patch p50 ms"}, {sc.MetricCostRatioP50, "rewrite ÷ patch"}, {sc.MetricWALPerRewrite, "WAL bytes per rewrite"}},
	"cache.profile":    {{driver.ClientOKRate, "requests/s"}, {driver.ClientP50, "client p50 ms"}, {driver.ClientP99, "client p99 ms"}, {driver.ClientErrors, "errors"}},
	"cache.kv_write":   {{driver.ClientP50, "kv PUT p50 ms"}, {driver.ClientP99, "kv PUT p99 ms"}, {driver.ClientErrors, "errors"}},
	"cache.kv_read":    {{driver.ClientP50, "kv GET p50 ms"}, {driver.ClientP99, "kv GET p99 ms"}, {driver.ClientErrors, "errors"}},
	"cache.raw_lookup": {{driver.ClientP50, "lookup p50 ms (no HTTP)"}, {driver.ClientP99, "lookup p99 ms (no HTTP)"}},
	"cache.stampede":   {{sc.MetricStampedeOriginLoadsOf.Of(sc.StampedeOneInstance), "origin loads, instance 1"}, {sc.MetricStampedeOriginLoadsOf.Of(sc.StampedeTwoInstances), "origin loads, instance 2"}},
	"cache.staleness":  {{sc.MetricStaleMS, "stale after an UPDATE, ms"}},
	// The event store in the demo: the bench's append scenario.
	"eventstore.append.read-then-append": {{eventstore.MetricAppendOpsPerSec, "appends/s"}, {driver.ClientP50, "append p50 ms"}, {driver.ClientP99, "append p99 ms"}, {eventstore.MetricAppendErrors, "errors"}},
	"eventstore.append.blind":            {{eventstore.MetricAppendOpsPerSec, "appends/s"}, {driver.ClientP50, "append p50 ms"}, {driver.ClientP99, "append p99 ms"}, {eventstore.MetricAppendErrors, "errors"}},
}

// Demo prints one side-by-side table for a pair's run: throughput, the
// key latencies' p50/p99, errors and the A/B ratio.
func Demo(w io.Writer, run *driver.Run) {
	run.Validate()
	if len(run.Points) == 0 {
		fmt.Fprintf(w, "%s: no measurement (%s)\n\n", run.Command, strings.Join(notesOf(run), "; "))
		return
	}
	p0 := run.Points[0]
	a, b := sideLabels(run, &p0)
	fmt.Fprintf(w, "%s pair: %s vs %s\n", run.Command, a, b)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "  \t%s\t%s\tratio\n", a, b)
	for i := range run.Points {
		p := &run.Points[i]
		rows := demoMetrics[run.Command]
		if rows == nil {
			rows = demoMetrics[string(p.Scenario)]
		}
		fmt.Fprintf(tw, "  %s %s\t\t\t\n", p.Scenario, p.Name)
		if st, bad := statusRow(p); bad {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", st[0], st[1], st[2], st[3])
		}
		for _, r := range rows {
			m := p.Find(r.metric)
			if m == nil {
				continue
			}
			ratio := ratioCell(m, p.Sides)
			if bad := invalidSides(p); len(bad) > 0 {
				ratio = "no ratio: " + strings.Join(bad, " and ") + " not valid"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", r.label, sideCell(p, m, p.Sides[0]), sideBCell(p, m), ratio)
		}
		for _, e := range sideErrors(p) {
			fmt.Fprintf(tw, "  error: %s\t\t\t\n", e)
		}
	}
	tw.Flush()
	fmt.Fprintln(w)
}

// hasValue reports whether side recorded metric name in p.
func hasValue(p *driver.Point, side, name string) bool {
	_, ok := pointValue(p, side, driver.Metric(name))
	return ok
}
