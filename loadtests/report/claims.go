package report

import (
	"fmt"
	"slices"
	"strings"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/experiments"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/raw"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/scenario"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// Verdicts.
const (
	Holds         = "holds"
	DoesNotHold   = "does not hold"
	NotMeasurable = "not measurable here"
	// Inconclusive is a claim whose rounds disagree: it held in some and
	// not in others.
	Inconclusive = "inconclusive"
	// FailedRun is a claim that reads a point, side or ceiling that is
	// not valid (failed or not run): no figure of it decides anything.
	FailedRun = "failed run"
)

// Claim is one row of the claims table.
type Claim struct {
	// Pair is queue, log or documents.
	Pair string
	// Claim is the reference's claim, with its figure.
	Claim string
	// Short names the claim without figures, for the README's summary.
	Short string
	// Rule is how the verdict is decided.
	Rule string
	// Measured is what this run measured.
	Measured string
	// Verdict is Holds, DoesNotHold, Inconclusive, FailedRun or
	// NotMeasurable; Why explains every verdict but a plain Holds or
	// DoesNotHold.
	Verdict, Why string
}

// runs indexes the runs by command.
type runs map[string]*driver.Run

func (rs runs) points(cmd string, scenario driver.ScenarioName) []*driver.Point {
	r := rs[cmd]
	if r == nil {
		return nil
	}
	var out []*driver.Point
	for i := range r.Points {
		if r.Points[i].Scenario == scenario {
			out = append(out, &r.Points[i])
		}
	}
	return out
}

func (rs runs) point(cmd string, scenario driver.ScenarioName, name string) *driver.Point {
	for _, p := range rs.points(cmd, scenario) {
		if name == "" || p.Name == name {
			return p
		}
	}
	return nil
}

func (rs runs) ceiling(cmd, service string) *driver.Ceiling {
	if r := rs[cmd]; r != nil {
		for i := range r.Ceilings {
			if r.Ceilings[i].Service == service && len(r.Ceilings[i].Rounds) > 0 {
				return &r.Ceilings[i]
			}
		}
	}
	return nil
}

// median returns a side's median of a metric in p. A valid side without
// the metric is logged in the claim's evaluation (metricMissing): the
// claim becomes a failed run naming the metric.
func median(p *driver.Point, metric driver.Metric, side string) (float64, bool) {
	return medianOf(p, metric, side, true)
}

// medianOf is median; required says whether a missing metric is logged.
func medianOf(p *driver.Point, metric driver.Metric, side string, required bool) (float64, bool) {
	if p == nil {
		return 0, false
	}
	if !sideValid(p, side) {
		return 0, false
	}
	m := p.Find(metric)
	var a driver.Agg
	ok := m != nil
	if ok {
		a, ok = m.Sides[side]
	}
	if !ok && required {
		metricMissing(p, metric, side)
	}
	return a.Median, ok
}

// at names one side's median of a metric in a point, for medians.
type at struct {
	p      *driver.Point
	metric driver.Metric
	side   string
}

// medians returns the medians qs name, in order, and whether every one
// was measured.
func medians(qs ...at) ([]float64, bool) { return mediansOf(true, qs...) }

// optionalMedians is medians of figures a claim adds to its text when
// they were recorded (the cache's CPU per operation): a missing one is no
// error.
func optionalMedians(qs ...at) ([]float64, bool) { return mediansOf(false, qs...) }

func mediansOf(required bool, qs ...at) ([]float64, bool) {
	vs := make([]float64, len(qs))
	for i, q := range qs {
		v, ok := medianOf(q.p, q.metric, q.side, required)
		if !ok {
			return nil, false
		}
		vs[i] = v
	}
	return vs, true
}

// ratio returns the median per-round A/B ratio of metric in p, when both
// sides are valid and neither median is 0.
func ratio(p *driver.Point, metric driver.Metric) (float64, bool) {
	if p == nil || len(p.Sides) < 2 {
		return 0, false
	}
	okA, okB := sideValid(p, p.Sides[0]), sideValid(p, p.Sides[1])
	if !okA || !okB {
		return 0, false
	}
	m := p.Find(metric)
	if m == nil {
		metricMissing(p, metric, p.Sides[0]+" and "+p.Sides[1])
		return 0, false
	}
	if m.Ratio == nil || *m.Ratio == 0 || m.Sides[p.Sides[1]].Median == 0 {
		return 0, false
	}
	return *m.Ratio, true
}

func verdict(ok bool) string {
	if ok {
		return Holds
	}
	return DoesNotHold
}

// claimSpec is one declared claim: the row's fixed text and evaluate,
// which reads the runs and returns what was measured and whether the rule
// holds.
type claimSpec struct {
	// pair and short are Claim's fields of the same names: short is how
	// the code and tests find a claim, so it stays beside it.
	pair, short string
	// claimText is Claim's Claim and Rule, rendered from claims.tmpl
	// (texts).
	claimText
	// mongo is set on the claims that compare with MongoDB: on runs whose
	// MongoDB side was FerretDB their verdict is NotMeasurable.
	mongo bool
	// evaluate decides the claim on the runs.
	evaluate func(in claimInputs) outcome
}

// claimInputs is what a claim is evaluated on.
type claimInputs struct {
	rs runs
	// ferret is true when the documents run's MongoDB side was FerretDB.
	ferret bool
	// raw is the raw loops' results (zero when there are none).
	raw raw.Results
	// xf is the failure-mode experiments' results (nil when there are
	// none).
	xf *experiments.File
}

// outcome is a claim's evaluation: what was measured and whether the
// rule holds, or, when missing is not empty, why nothing could be
// measured.
type outcome struct {
	measured string
	holds    bool
	missing  string
	// unmeasurable, when not empty, says why what was measured cannot
	// decide the claim: the verdict is NotMeasurable, the measured text
	// stays.
	unmeasurable string
	// failed, when not empty, names an input that is not valid (a
	// ceiling, an event-store row) that median and ratio cannot see: the
	// verdict is FailedRun.
	failed string
	// floor, when not empty, names this machine's figure that decides
	// the claim (commit cost, HTTP floor, the driver's CPU share): it is
	// added to the verdict.
	floor string
	// inconclusive, when not empty, says why the medians decide nothing
	// (a tie): the verdict is Inconclusive whatever the rounds say.
	inconclusive string
	// perRound is set by rules that read rounds without median (the
	// ceilings): their verdict is decided round by round too.
	perRound bool
	// note, when not empty, is added to the verdict (by how much a
	// result beats a claimed capacity, which part of a claim holds).
	note string
}

// notRun is the outcome when the runs lack what a claim reads.
func notRun(what string) outcome {
	return outcome{missing: "the " + what + " scenario is not in these results"}
}

// ferretWhy is the reason a claim comparing with MongoDB is not
// measurable on a FerretDB run.
const ferretWhy = "the MongoDB side ran on FerretDB (SQLite backend, no wildcard index, full scans), not MongoDB: its numbers say nothing about MongoDB"

// agedShort is the short name of the long-lived claim.
var agedShort = fmt.Sprintf("ages within %s× of fresh", num(agedFactor))

// The thresholds of claimTable's rules: each is written here once and the
// rule's prose is generated from it.
const (
	// queueCeilingTarget and logCeilingTarget are the design targets'
	// ceilings, per second.
	queueCeilingTarget = 10000
	logCeilingTarget   = 15000
	// deliveryP99Within is the highest no-rabbitmq ÷ rabbitmq delivery
	// p99 ratio of the design target, at deliveryAt.
	deliveryP99Within = 1.5
	deliveryAt        = "1000/s"
	// loggedAtLeast is the least logged ÷ unlogged send→processed p99
	// that shows the claimed cost of a logged queue table (4 → 11 ms).
	loggedAtLeast = 1.5
	// agedFactor, agedHistory: the long-lived claim's bound and the
	// history it needs.
	agedFactor  = 2.0
	agedHistory = 1_000_000
	// logDeliveryP95MS is the claimed delivery p95 bound, in ms.
	logDeliveryP95MS = 2.0
	// syncOffDeliveryP50MS is the claimed delivery p50 with
	// synchronous_commit=off, in ms.
	syncOffDeliveryP50MS = 160.0
	// pgRewriteLo/Hi and mongoRewriteLo/Hi are the claimed rewrite ÷
	// patch ranges.
	pgRewriteLo, pgRewriteHi       = 3.6, 4.7
	mongoRewriteLo, mongoRewriteHi = 1.9, 2.4
	// rewriteP99Ratio is the claimed Postgres ÷ MongoDB rewrite p99 at
	// 2 MB.
	rewriteP99Ratio = 2.6
	// tolerance is how far from a reference figure measured on other
	// machines a result may be and still agree with it: within 2×.
	tolerance = 2.0
	// tieWithin is the relative difference under which two medians tie:
	// a tie decides no direction.
	tieWithin = 0.05
)

// band is a range of values that agrees with a reference figure.
type band struct{ lo, hi float64 }

// around is the band within tolerance of the reference range lo–hi.
func around(lo, hi float64) band { return band{lo / tolerance, hi * tolerance} }

func (b band) has(v float64) bool { return v >= b.lo && v <= b.hi }

func (b band) String() string { return num(b.lo) + "–" + num(b.hi) }

// tie reports whether a and b are within tieWithin of each other.
func tie(a, b float64) bool {
	m := max(a, b)
	return m > 0 && (max(a, b)-min(a, b))/m < tieWithin
}

// Queue is the queue pair's Pair: the section every rate pair's tables
// make, with the outbox subsection and the rate-latency chart.
func Queue() Pair {
	return Pair{Name: pairs.Queue, Title: "Queue: rabbitmq vs no-rabbitmq", after: OutboxSection,
		overview: rateOverview(pairs.Queue),
		caption: "Lower is better; both axes are logarithmic, so the low rates get as much room as the high ones. " +
			"Where the two lines run close, the sides are about as fast; where a line climbs by orders of magnitude, " +
			"that side has stopped keeping up and its latency is the age of a growing backlog, not its service time.",
		chart:   &pairChart{"queue-rate", queueRateFile, func(r *driver.Run, path string) (bool, error) { return rateLatencyChart(r, pairs.Queue, path) }},
		card:    "queue-rate",
		ceiling: rateSource{pairs.Queue, scenario.CeilingScenarioName(pairs.Queue, ""), "sent one per request"},
		verdict: queueVerdict,
		text: cardText{question: "a table with `FOR UPDATE SKIP LOCKED`, or RabbitMQ?",
			pgWhen: "each task goes to one worker and must commit with its business row in one transaction"},
		findings: &queueFindings}
}

// Log is the log pair's Pair: the section every rate pair's tables make,
// with the rate-latency chart.
func Log() Pair {
	return Pair{Name: pairs.Log, Title: "Log: kafka vs no-kafka",
		overview: rateOverview(pairs.Log),
		caption: "Lower is better; both axes are logarithmic, so the vertical gap between the lines is the ratio of the sides' latencies: " +
			"a steady gap means one side is slower by a constant factor, a gap that widens with the rate means it degrades under load.",
		chart:   &pairChart{"log-rate", logRateFile, func(r *driver.Run, path string) (bool, error) { return rateLatencyChart(r, pairs.Log, path) }},
		ceiling: rateSource{pairs.Log, scenario.CeilingScenarioName(pairs.Log, ""), "written one per request"},
		verdict: logVerdict,
		text: cardText{question: "logical replication with wal2json, or Kafka?",
			pgWhen: "one consumer reads the stream (one replication slot) and the event must commit with the row"},
		findings: &logFindings}
}

// Documents is the documents pair's Pair: the section every pair's
// tables make, with the cost-ratio overview and the TOAST chart.
func Documents() Pair {
	return Pair{Name: pairs.Documents, Title: "Documents: mongodb vs no-mongodb",
		overview: documentsOverview,
		caption: "Each bar is a side's rewrite p50 divided by its neighbour-patch p50 in the same rounds. " +
			"The higher the bar, the more a profile's size costs that side; compare how each side's bar grows from the smaller size to the larger.",
		chart: &pairChart{"toast", toastFile, toastChart}, card: "toast",
		ceiling: rateSource{pairs.Documents, scenario.DocumentsSearchCeiling, "one containment search per request"},
		verdict: documentsVerdict,
		text: cardText{question: "`jsonb` with a GIN index, or MongoDB?",
			pgWhen: "search is containment (`@>`) and large documents are rarely rewritten whole"},
		findings: &documentsFindings}
}

// claimTable holds every numeric claim of the reference measurements, in
// the order of RESULTS.md's claims table.
var claimTable = []claimSpec{
	{pair: pairs.Queue, short: designTarget,
		claimText: designTargetText("queue design target", pairs.NoRabbitMQ, "send→processed", queueCeilingTarget, 0),
		evaluate:  sustainedAtLeast(pairs.Queue, pairs.NoRabbitMQ, "tasks", queueCeilingTarget, 0)},
	{pair: pairs.Queue, short: "delivery p99 close to RabbitMQ's",
		claimText: texts("queue delivery p99", figures),
		evaluate: atPoint(pairs.Queue, scenario.RateScenarioName(pairs.Queue), deliveryAt, "queue "+deliveryAt+" point", func(in claimInputs, p *driver.Point) outcome {
			a, _ := median(p, driver.ServerDeliveryP99, pairs.NoRabbitMQ)
			b, _ := median(p, driver.ServerDeliveryP99, pairs.RabbitMQ)
			r, ok := ratio(p, driver.ServerDeliveryP99)
			if !ok {
				return outcome{missing: "no delivery latency was recorded at " + deliveryAt}
			}
			o := outcome{measured: fmt.Sprintf("%s ms vs %s ms: %s×", num(a), num(b), num(r)), holds: r <= deliveryP99Within}
			if f, where, ok := queueFloor(in); ok && a <= nearFloor*f && b <= nearFloor*f {
				o.floor = fmt.Sprintf("both p99s sit within %s× of the lowest delivery p99 of any side and fixed rate here, %s ms (%s): a floor of this machine's, not of either system", num(nearFloor), num(f), where)
			}
			return o
		})},
	{pair: pairs.Queue, short: "cost of a logged queue table",
		claimText: texts("queue logged table", figures),
		evaluate: func(in claimInputs) outcome {
			def, dur := in.rs.point(pairs.Queue, scenario.PairScenarioName(pairs.Queue, scenario.KindDefault), ""), in.rs.point(pairs.Queue, scenario.PairScenarioName(pairs.Queue, scenario.VariantDurable), "")
			if def == nil || dur == nil {
				return notRun("queue durable variant")
			}
			u, ok1 := median(def, driver.ServerProcessingP99, pairs.NoRabbitMQ)
			l, ok2 := median(dur, driver.ServerProcessingP99, pairs.NoRabbitMQ)
			if !ok1 || !ok2 || u <= 0 {
				return outcome{missing: "send→processed was not recorded in both modes"}
			}
			return outcome{measured: fmt.Sprintf("%s ms unlogged → %s ms logged at %s (%s×)", num(u), num(l), def.Name, num(l/u)), holds: l/u >= loggedAtLeast,
				floor: commitFloor(in)}
		}},
	{pair: pairs.Queue, short: agedShort,
		claimText: texts("queue aged", figures),
		evaluate:  agedWithin(pairs.NoRabbitMQ, driver.ServerDeliveryP99, agedHistory, agedFactor)},
	fanoutClaim,
	{pair: pairs.Log, short: "low delivery p95 on both sides",
		claimText: texts("log delivery p95", figures),
		evaluate: everyLogRate(driver.ServerDeliveryP95, "no-kafka / kafka: ", func(rate string, pg, kafka float64) (string, bool) {
			return fmt.Sprintf("%s: %s / %s ms", rate, num(pg), num(kafka)), pg <= logDeliveryP95MS && kafka <= logDeliveryP95MS
		})},
	{pair: pairs.Log, short: "Kafka's write p99 above Postgres'",
		claimText: texts("log write p99", figures),
		evaluate: everyLogRate(driver.ServerWriteP99, "kafka vs no-kafka: ", func(rate string, pg, kafka float64) (string, bool) {
			return fmt.Sprintf("%s: %s vs %s ms", rate, num(kafka), num(pg)), kafka > pg && !tie(kafka, pg)
		})},
	{pair: pairs.Log, short: "synchronous_commit=off delays delivery",
		claimText: texts("log sync off", figures),
		evaluate: atPoint(pairs.Log, scenario.PairScenarioName(pairs.Log, scenario.VariantSyncOff), "", "log sync-off variant", func(in claimInputs, p *driver.Point) outcome {
			v, ok := median(p, driver.ServerDeliveryP50, pairs.NoKafka)
			if !ok {
				return outcome{missing: "no delivery latency recorded"}
			}
			o := outcome{measured: fmt.Sprintf("%s ms at %s", num(v), p.Name), holds: around(syncOffDeliveryP50MS, syncOffDeliveryP50MS).has(v)}
			if d, ok := median(in.rs.point(pairs.Log, scenario.PairScenarioName(pairs.Log, scenario.KindDefault), ""), driver.ServerDeliveryP50, pairs.NoKafka); ok {
				o.measured += fmt.Sprintf(" (%s ms with synchronous_commit=on)", num(d))
			}
			return o
		})},
	{pair: pairs.Log, short: designTarget,
		claimText: designTargetText("log design target", pairs.NoKafka, "write→delivered", logCeilingTarget, slotMinBatch),
		evaluate:  sustainedAtLeast(pairs.Log, pairs.NoKafka, "events", logCeilingTarget, slotMinBatch)},
	groupsClaim,
	slotClaim,
	{pair: pairs.Documents, short: "search p95 vs MongoDB", mongo: true,
		claimText: texts("documents search p95", figures),
		evaluate: atPoint(pairs.Documents, scenario.PairScenarioName(pairs.Documents, scenario.KindSearch), "", pairs.Documents, func(in claimInputs, p *driver.Point) outcome {
			a, okA := median(p, driver.ServerSearchP95, pairs.NoMongoDB)
			b, okB := median(p, driver.ServerSearchP95, pairs.MongoDB)
			if !okA || !okB {
				return outcome{missing: "no search p95 on both sides"}
			}
			if in.ferret {
				return outcome{measured: fmt.Sprintf("Postgres %s ms; FerretDB %s ms (%s)", num(a), num(b), p.Name)}
			}
			return outcome{measured: fmt.Sprintf("Postgres %s ms vs MongoDB %s ms (%s)", num(a), num(b), p.Name), holds: a < b && !tie(a, b)}
		})},
	{pair: pairs.Documents, short: "rewrite ÷ patch on Postgres",
		claimText: texts("documents rewrite on Postgres", figures),
		evaluate:  costRatioWithin(pairs.NoMongoDB, around(pgRewriteLo, pgRewriteHi))},
	{pair: pairs.Documents, short: "lz4 TOAST compression vs pglz",
		claimText: texts("documents lz4", figures),
		evaluate:  lz4BeatsPglz},
	{pair: pairs.Documents, short: "rewrite ÷ patch on MongoDB", mongo: true,
		claimText: texts("documents rewrite on MongoDB", figures),
		evaluate:  costRatioWithin(pairs.MongoDB, around(mongoRewriteLo, mongoRewriteHi))},
	{pair: pairs.Documents, short: "large rewrite p99 vs MongoDB", mongo: true,
		claimText: texts("documents rewrite p99", figures),
		evaluate: atPoint(pairs.Documents, scenario.PairScenarioName(pairs.Documents, scenario.KindRewrite), "2MB", "documents 2MB rewrite point", func(in claimInputs, p *driver.Point) outcome {
			r, ok := ratio(p, driver.ClientRewrite.P99())
			switch {
			case !ok:
				return outcome{missing: "no 2MB rewrite latencies on both sides"}
			case in.ferret:
				return outcome{measured: fmt.Sprintf("Postgres ÷ FerretDB: %s×", num(r))}
			}
			return outcome{measured: fmt.Sprintf("%s×", num(r)), holds: around(rewriteP99Ratio, rewriteP99Ratio).has(r)}
		})},
}

// nearFloor is how close to this machine's floor two figures must both
// be for the floor, not the systems, to decide a comparison of them.
const nearFloor = 1.5

// queueFloor is the lowest median delivery p99 of any side at any fixed
// rate of the queue run, and where: the floor queue latencies sit on here.
func queueFloor(in claimInputs) (float64, string, bool) {
	best, where := 0.0, ""
	for _, p := range in.rs.points(pairs.Queue, scenario.RateScenarioName(pairs.Queue)) {
		for _, s := range p.Sides {
			if v, ok := median(p, driver.ServerDeliveryP99, s); ok && v > 0 && (where == "" || v < best) {
				best, where = v, s+" at "+p.Name
			}
		}
	}
	return best, where, where != ""
}

// fsyncOf is the first pg_test_fsync measurement of the runs, or nil.
func fsyncOf(rs []*driver.Run) *driver.Fsync {
	for _, r := range rs {
		if r != nil && r.Versions.Fsync != nil {
			return r.Versions.Fsync
		}
	}
	return nil
}

// fsyncLine is this machine's fsync cost in words, from pg_test_fsync:
// "2,100 fdatasync/s (0.48 ms per flush), …", its error, or "" when no
// run measured it.
func fsyncLine(rs []*driver.Run) string {
	f := fsyncOf(rs)
	switch {
	case f == nil:
		return ""
	case f.FdatasyncOpsPerSec == nil || *f.FdatasyncOpsPerSec <= 0:
		return "not measured: " + md(orWhy("", f.Error))
	}
	s := fmt.Sprintf("%s fdatasync/s, %s ms per flush (`%s`)", count(int64(*f.FdatasyncOpsPerSec)), num(1000 / *f.FdatasyncOpsPerSec), md(f.Tool))
	if f.FsyncOpsPerSec != nil && *f.FsyncOpsPerSec > 0 {
		s += fmt.Sprintf("; %s fsync/s", count(int64(*f.FsyncOpsPerSec)))
	}
	return s
}

// commitFloor names this machine's commit cost, from the raw loops' plain
// commits with one committer, when they were measured: a claim about
// logged tables is decided on this machine's disk.
func commitFloor(in claimInputs) string {
	var rs []*driver.Run
	for _, r := range in.rs {
		rs = append(rs, r)
	}
	slices.SortFunc(rs, func(a, b *driver.Run) int { return strings.Compare(a.Command, b.Command) })
	if f := fsyncOf(rs); f != nil && f.FdatasyncOpsPerSec != nil && *f.FdatasyncOpsPerSec > 0 {
		return fmt.Sprintf("a WAL flush costs %s ms here (pg_test_fsync: %s fdatasync/s)", num(1000 / *f.FdatasyncOpsPerSec), count(int64(*f.FdatasyncOpsPerSec)))
	}
	if s := in.raw.Notify; s != nil {
		if p, ok := s.Find(raw.NotifyNone, 1); ok && p.TPS > 0 {
			return fmt.Sprintf("a commit costs %s ms here (%s tps with 1 committer, raw loops)", num(1000/p.TPS), count(int64(p.TPS)))
		}
	}
	return ""
}

// agedWithin evaluates "side's metric in the long-lived run (at least
// minHistory rows of history) is at most factor × its median in the fresh
// queue run", at every rate both runs measured; the other side's ratio is
// shown beside it.
func agedWithin(side string, metric driver.Metric, minHistory int64, factor float64) func(claimInputs) outcome {
	return func(in claimInputs) outcome {
		ll := in.rs[scenario.LongLivedCommand]
		agedPts := in.rs.points(scenario.LongLivedCommand, scenario.RateScenarioName(pairs.Queue))
		switch {
		case ll == nil || len(agedPts) == 0:
			return notRun("long-lived queue")
		case ll.StartState == nil || ll.StartState.HistoryRows < minHistory:
			rows := int64(0)
			if ll.StartState != nil {
				rows = ll.StartState.HistoryRows
			}
			return outcome{missing: fmt.Sprintf("the long-lived run had %s rows of history, fewer than %s", count(rows), count(minHistory))}
		}
		var parts []string
		holds, seen := true, false
		for _, aged := range agedPts {
			fresh := in.rs.point(pairs.Queue, scenario.RateScenarioName(pairs.Queue), aged.Name)
			if fresh == nil {
				continue
			}
			f, okF := median(fresh, metric, side)
			a, okA := median(aged, metric, side)
			if !okF || !okA || f <= 0 {
				continue
			}
			seen = true
			part := fmt.Sprintf("%s: %s ms fresh → %s ms aged (%s×)", aged.Name, num(f), num(a), num(a/f))
			for _, other := range aged.Sides {
				if other == side {
					continue
				}
				of, ok1 := median(fresh, metric, other)
				oa, ok2 := median(aged, metric, other)
				if ok1 && ok2 && of > 0 {
					part += fmt.Sprintf(", %s %s → %s ms (%s×)", other, num(of), num(oa), num(oa/of))
				}
			}
			parts = append(parts, part)
			holds = holds && a <= factor*f
		}
		if !seen {
			return outcome{missing: "no " + string(metric) + " of " + side + " at a rate both the fresh and the long-lived run measured"}
		}
		return outcome{measured: fmt.Sprintf("on %s rows of history: %s", count(ll.StartState.HistoryRows), strings.Join(parts, "; ")), holds: holds}
	}
}

// atPoint evaluates a claim on one point (the first of scenario when
// name is empty); what names the missing scenario when there is none.
func atPoint(cmd string, scenario driver.ScenarioName, name, what string, f func(claimInputs, *driver.Point) outcome) func(claimInputs) outcome {
	return func(in claimInputs) outcome {
		p := in.rs.point(cmd, scenario, name)
		if p == nil {
			return notRun(what)
		}
		return f(in, p)
	}
}

// designTarget is the short name of the design targets' throughput
// claims (README's load answer quotes them).
const designTarget = "design-target rate"

// sustainedAtLeast decides "side carries target items/s" from its
// sustainable rate (at batches of at least minBatch): holds at or above
// it; a search capped below it measured only a lower bound and decides
// nothing.
func sustainedAtLeast(pair, side, item string, target float64, minBatch int) func(claimInputs) outcome {
	return func(in claimInputs) outcome {
		if len(in.rs.points(scenario.ThroughputCommand, scenario.SustainScenarioName(pair))) == 0 {
			return notRun("sustainable throughput")
		}
		v, p, ok := sustainedRate(in.rs, pair, side, minBatch)
		if !ok {
			return outcome{missing: fmt.Sprintf("no sustainable rate was recorded for %s", side)}
		}
		o := outcome{measured: fmt.Sprintf("%s %s/s sustainable at %s", sustainedText(p, side, v), item, p.Name), holds: v >= target}
		if c, ok := sideAgg(p, scenario.MetricCapped, side); ok && c.Max >= 1 && !o.holds {
			o.unmeasurable = fmt.Sprintf("the search passed its ladder's top, %s/s, below the target: how far %s goes is not measured", num(v), side)
		}
		if cpus := in.rs[scenario.ThroughputCommand].Machine.CPUs; cpus > 0 {
			o.floor = fmt.Sprintf("the load driver shares the machine's %d cores with the servers", cpus)
		}
		return o
	}
}

// atEveryPoint evaluates a rule that must hold at every point of a
// scenario: each returns the point's part of the measured text and
// whether the rule holds there; prefix heads the joined parts.
func atEveryPoint(cmd string, scenario driver.ScenarioName, what string, prefix func(claimInputs) string, each func(*driver.Point) (string, bool)) func(claimInputs) outcome {
	return func(in claimInputs) outcome {
		ps := in.rs.points(cmd, scenario)
		if len(ps) == 0 {
			return notRun(what)
		}
		holds := true
		var parts []string
		for _, p := range ps {
			part, ok := each(p)
			holds = holds && ok
			parts = append(parts, part)
		}
		return outcome{measured: prefix(in) + strings.Join(parts, "; "), holds: holds}
	}
}

// everyLogRate evaluates a rule on both sides' medians of metric at every
// fixed rate of the log pair; a side without the metric fails the rule.
func everyLogRate(metric driver.Metric, prefix string, each func(rate string, pg, kafka float64) (string, bool)) func(claimInputs) outcome {
	return atEveryPoint(pairs.Log, scenario.RateScenarioName(pairs.Log), pairs.Log, func(claimInputs) string { return prefix }, func(p *driver.Point) (string, bool) {
		a, okA := median(p, metric, pairs.NoKafka)
		b, okB := median(p, metric, pairs.Kafka)
		if !okA || !okB {
			return p.Name + ": " + notRecorded, false
		}
		return each(p.Name, a, b)
	})
}

// costRatioWithin evaluates "side's rewrite ÷ patch p50 is within the
// band at every size".
func costRatioWithin(side string, within band) func(claimInputs) outcome {
	prefix := func(in claimInputs) string {
		if in.ferret && side == pairs.MongoDB {
			return "FerretDB: "
		}
		return ""
	}
	return atEveryPoint(pairs.Documents, scenario.PairScenarioName(pairs.Documents, scenario.KindRewrite), pairs.Documents, prefix, func(p *driver.Point) (string, bool) {
		v, ok := median(p, scenario.MetricCostRatioP50, side)
		if !ok {
			return p.Name + ": " + notRecorded, false
		}
		return fmt.Sprintf("%s: %s×", p.Name, num(v)), within.has(v)
	})
}

// lz4BeatsPglz compares the Postgres side's rewrite p50 and rewrite ÷
// patch at each size of documents.rewrite (pglz) and
// documents.rewrite_lz4.
func lz4BeatsPglz(in claimInputs) outcome {
	pg := in.rs.points(pairs.Documents, scenario.PairScenarioName(pairs.Documents, scenario.KindRewrite))
	if len(pg) == 0 || len(in.rs.points(pairs.Documents, scenario.PairScenarioName(pairs.Documents, scenario.KindRewriteLZ4))) == 0 {
		if o, ok := toastLZ4(in); ok {
			return o
		}
		return outcome{missing: "no rewrite points with both pglz and lz4 (documents scenario with -lz4), and no TOAST experiment"}
	}
	var parts []string
	holds := true
	for _, p := range pg {
		l := in.rs.point(pairs.Documents, scenario.PairScenarioName(pairs.Documents, scenario.KindRewriteLZ4), p.Name)
		a, okA := median(p, driver.ClientRewrite.P50(), pairs.NoMongoDB)
		ra, _ := median(p, scenario.MetricCostRatioP50, pairs.NoMongoDB)
		if l == nil {
			return outcome{missing: "no lz4 rewrite point at " + p.Name}
		}
		b, okB := median(l, driver.ClientRewrite.P50(), pairs.NoMongoDB)
		rb, _ := median(l, scenario.MetricCostRatioP50, pairs.NoMongoDB)
		if !okA || !okB {
			return outcome{missing: "no rewrite p50 at " + p.Name}
		}
		parts = append(parts, fmt.Sprintf("%s: rewrite p50 %s ms (pglz, %s× a patch) vs %s ms (lz4, %s×)", p.Name, num(a), num(ra), num(b), num(rb)))
		holds = holds && b < a && !tie(a, b)
	}
	return outcome{measured: strings.Join(parts, "; "), holds: holds}
}

// toastExperiment is the failure-mode experiment that rewrites large
// jsonb documents with both compressions.
const toastExperiment = "toast-rewrite"

// toastLZ4 decides the lz4 claim on the TOAST experiment's figures, when
// it ran: its rewrite time with pglz and with lz4 at each size, the same
// document rewritten on a scratch table (SQL, no service, no rounds).
func toastLZ4(in claimInputs) (outcome, bool) {
	if in.xf == nil {
		return outcome{}, false
	}
	for _, r := range in.xf.Results {
		if r.Name != toastExperiment {
			continue
		}
		if r.Error != "" {
			return outcome{failed: toastExperiment + " experiment: failed: " + firstLine(r.Error)}, true
		}
		var sizes []string
		for k := range r.Metrics {
			if size, ok := experiments.ToastRewriteSize(k, "pglz"); ok {
				sizes = append(sizes, size)
			}
		}
		if len(sizes) == 0 {
			return outcome{}, false
		}
		slices.SortFunc(sizes, func(a, b string) int { return sizeBytes(a) - sizeBytes(b) })
		var parts []string
		holds := true
		for _, size := range sizes {
			p, okP := r.Metrics[experiments.ToastRewriteTime("pglz", size)]
			l, okL := r.Metrics[experiments.ToastRewriteTime("lz4", size)]
			if !okP || !okL || p <= 0 || l <= 0 {
				return outcome{failed: fmt.Sprintf("%s experiment: no rewrite time with both compressions at %s", toastExperiment, size)}, true
			}
			parts = append(parts, fmt.Sprintf("%s: rewrite %s ms (pglz) vs %s ms (lz4), %s×", size, num(p), num(l), num(l/p)))
			holds = holds && l < p && !tie(l, p)
		}
		return outcome{measured: fmt.Sprintf("the %s experiment (SQL on a scratch table, no service; median of its updates, no rounds): %s", toastExperiment, strings.Join(parts, "; ")), holds: holds}, true
	}
	return outcome{}, false
}

// sizeBytes orders size names ("512KiB", "2MiB").
func sizeBytes(s string) int {
	var n int
	var unit string
	_, _ = fmt.Sscanf(s, "%d%s", &n, &unit)
	switch strings.ToLower(unit) {
	case "kib", "kb":
		return n << 10
	case "mib", "mb":
		return n << 20
	}
	return n
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

// Claims evaluates every claim of claimTable against the runs and, for
// the claims the raw loops settle, the raw results rr (the first, if
// given).
//
// A claim is first evaluated on the medians of every round. If it reads
// a side, point or ceiling that is not valid its verdict is FailedRun,
// with the reasons. Otherwise it is evaluated again on each round alone
// (every point reduced to its k-th round): it holds or does not hold only
// when every round agrees, and is Inconclusive, naming the rounds, when
// they do not.
func Claims(all []*driver.Run, rr ...raw.Results) []Claim {
	var src Sources
	if len(rr) > 0 {
		src.Raw = rr[0]
	}
	return ClaimsFrom(all, src)
}

// Sources are what the claims read besides the runs: the raw loops'
// results and the failure-mode experiments (nil when there are none).
type Sources struct {
	Raw         raw.Results
	Experiments *experiments.File
	// Bench are the runs of the benches with sections of their own (the
	// event store's), for the server versions they measured (Write sets
	// them).
	Bench []*driver.Run
	// FailoverParts are the cluster profile's experiments' results
	// (experiments.LoadClusterParts), for the failover section, the
	// cards' failover lines and the failover chart.
	FailoverParts []experiments.ClusterPart
	// BeyondCRUD is the newest results file of the documents pair's
	// experiments beyond CRUD (experiments.BeyondCRUD), nil when none;
	// BeyondCRUDFile its base name.
	BeyondCRUD     *experiments.File
	BeyondCRUDFile string
	// Durability are the durability scenario's runs to show
	// (LoadDurabilityParts), for the cards' cost of losing nothing and the
	// durability tables.
	Durability []DurabilityPart
}

// first1 is the first of src, or none.
func first1(src []Sources) Sources {
	if len(src) == 0 {
		return Sources{}
	}
	return src[0]
}

// ClaimsFrom is Claims reading src as well: the raw loops and the
// failure-mode experiments settle some claims.
func ClaimsFrom(all []*driver.Run, src Sources) []Claim {
	validate(all)
	rr := []raw.Results{src.Raw}
	in, release := claimView(all, -1, rr...)
	in.xf = src.Experiments
	defer release()
	log := &readLog{}
	for _, r := range in.rs {
		for i := range r.Points {
			trackers.Store(&r.Points[i], log)
		}
	}
	rounds := 0
	for _, r := range all {
		for i := range r.Points {
			rounds = max(rounds, len(r.Points[i].Rounds))
		}
	}
	views := make([]claimInputs, rounds)
	viewLog := &readLog{}
	for k := range views {
		var rel func()
		views[k], rel = claimView(all, k, rr...)
		views[k].xf = src.Experiments
		defer rel()
		for _, r := range views[k].rs {
			for i := range r.Points {
				p := &r.Points[i]
				trackers.Store(p, viewLog)
				if n := len(p.Rounds); n > 1 && n <= k {
					lackRound.Store(p, struct{}{})
				}
			}
		}
	}
	specs := orderedClaims()
	out := make([]Claim, 0, len(specs))
	for _, s := range specs {
		out = append(out, decide(s, in, views, log, viewLog))
	}
	return out
}

// orderedClaims are claimTable's rows in the report's order of pairs
// (pairReports), each pair's in the order its files declare them: the
// claims table reads pair by pair, whatever file a claim is written in.
func orderedClaims() []claimSpec {
	rank := map[string]int{}
	for i, name := range pairCommands() {
		rank[name] = i
	}
	out := slices.Clone(claimTable)
	slices.SortStableFunc(out, func(a, b claimSpec) int {
		ra, oka := rank[a.pair]
		rb, okb := rank[b.pair]
		if !oka {
			ra = len(rank)
		}
		if !okb {
			rb = len(rank)
		}
		return ra - rb
	})
	return out
}

// decide is one claim's verdict: see Claims.
func decide(s claimSpec, in claimInputs, views []claimInputs, log, viewLog *readLog) Claim {
	c := Claim{Pair: s.pair, Short: s.short, Claim: s.claim, Rule: s.rule}
	log.reset()
	o := s.evaluate(in)
	if o.failed != "" {
		log.add(o.failed)
	}
	switch {
	case len(log.failed) > 0:
		c.Verdict, c.Why = FailedRun, strings.Join(log.failed, "; ")
		c.Measured = "no valid figure: an input failed (see the verdict)"
		return c
	case o.missing != "":
		c.Verdict, c.Why, c.Measured = NotMeasurable, o.missing, "nothing measured"
		return c
	case s.mongo && in.ferret:
		c.Verdict, c.Why, c.Measured = NotMeasurable, ferretWhy, o.measured
		return c
	case o.unmeasurable != "":
		c.Verdict, c.Why, c.Measured = NotMeasurable, o.unmeasurable, o.measured
		return c
	}
	c.Measured = o.measured
	if o.inconclusive != "" {
		c.Verdict, c.Why = Inconclusive, joinWhy(o.inconclusive, prefixed("decided on this machine's floor: ", o.floor))
		return c
	}
	var held, missed []int
	var missedText []string
	for k, v := range views {
		viewLog.reset()
		ok := s.evaluate(v)
		if ok.missing != "" || ok.failed != "" || ok.unmeasurable != "" || (viewLog.reads == 0 && !ok.perRound) {
			continue // not decided by rounds: the raw loops, a failure
		}
		if viewLog.lacking > 0 {
			continue // a point it read has no round k: not a round
		}
		if ok.holds {
			held = append(held, k)
		} else {
			missed = append(missed, k)
			missedText = append(missedText, fmt.Sprintf("round %d: %s", k, ok.measured))
		}
	}
	switch {
	case len(held) == 0 && len(missed) == 0:
		c.Verdict = verdict(o.holds)
	case len(missed) == 0:
		c.Verdict = Holds
	case len(held) == 0:
		c.Verdict = DoesNotHold
	default:
		c.Verdict = Inconclusive
		c.Why = fmt.Sprintf("holds in round %s, not in round %s (%s)", roundList(held), roundList(missed), strings.Join(missedText, "; "))
	}
	if c.Verdict != Inconclusive {
		if len(held)+len(missed) > 1 {
			c.Why = fmt.Sprintf("every round agrees (%d rounds)", len(held)+len(missed))
		}
		c.Why = joinWhy(o.note, c.Why)
	}
	if o.floor != "" {
		c.Why = joinWhy(c.Why, "decided on this machine's floor: "+o.floor)
	}
	return c
}

// prefixed is p+s, or "" for an empty s.
func prefixed(p, s string) string {
	if s == "" {
		return ""
	}
	return p + s
}

func joinWhy(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}

func roundList(ks []int) string {
	var out []string
	for _, k := range ks {
		out = append(out, fmt.Sprint(k))
	}
	return strings.Join(out, ", ")
}

// claimView copies the runs for one evaluation: round < 0 keeps every
// point whole (fresh copies, so that the claims evaluation can track its
// reads); round k reduces every point with more than k rounds to its
// k-th round and every ceiling with more than k rounds to its k-th
// search. release forgets the copies' trackers.
func claimView(all []*driver.Run, round int, rr ...raw.Results) (claimInputs, func()) {
	in := claimInputs{rs: runs{}}
	if len(rr) > 0 {
		in.raw = rr[0]
	}
	var copied []*driver.Point
	for _, r := range all {
		cp := *r
		cp.Points = make([]driver.Point, len(r.Points))
		for i, p := range r.Points {
			q := p
			if round >= 0 && len(p.Rounds) > round {
				q.Rounds = []driver.Round{p.Rounds[round]}
				q.Metrics = nil
				driver.Summarize(&q)
			}
			cp.Points[i] = q
		}
		for i := range cp.Points {
			copied = append(copied, &cp.Points[i])
		}
		cp.Ceilings = make([]driver.Ceiling, len(r.Ceilings))
		for i, c := range r.Ceilings {
			if round >= 0 && len(c.Rounds) > round {
				c.Rounds = []driver.CeilingRound{c.Rounds[round]}
				c.Rate = driver.Aggregate([]float64{c.Rounds[0].Rate})
			}
			cp.Ceilings[i] = c
		}
		in.rs[r.Command] = &cp
	}
	if docs := in.rs[pairs.Documents]; docs != nil {
		in.ferret = docs.Versions.MongoFlavor == "FerretDB"
	}
	return in, func() {
		for _, p := range copied {
			trackers.Delete(p)
			lackRound.Delete(p)
		}
	}
}
