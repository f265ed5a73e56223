package report

import (
	"fmt"
	"strings"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/raw"
)

// Verdicts.
const (
	Holds         = "holds"
	DoesNotHold   = "does not hold"
	NotMeasurable = "not measurable here"
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
	// Verdict is Holds, DoesNotHold or NotMeasurable; Why explains a
	// NotMeasurable.
	Verdict, Why string
}

// runs indexes the runs by command.
type runs map[string]*driver.Run

func (rs runs) points(cmd, scenario string) []*driver.Point {
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

func (rs runs) point(cmd, scenario, name string) *driver.Point {
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

// median returns a side's median of a metric in p.
func median(p *driver.Point, metric, side string) (float64, bool) {
	if p == nil {
		return 0, false
	}
	m := p.Find(metric)
	if m == nil {
		return 0, false
	}
	a, ok := m.Sides[side]
	return a.Median, ok
}

// at names one side's median of a metric in a point, for medians.
type at struct {
	p            *driver.Point
	metric, side string
}

// medians returns the medians qs name, in order, and whether every one
// was measured.
func medians(qs ...at) ([]float64, bool) {
	vs := make([]float64, len(qs))
	for i, q := range qs {
		v, ok := median(q.p, q.metric, q.side)
		if !ok {
			return nil, false
		}
		vs[i] = v
	}
	return vs, true
}

func ratio(p *driver.Point, metric string) (float64, bool) {
	if p == nil {
		return 0, false
	}
	m := p.Find(metric)
	if m == nil || m.Ratio == nil {
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
	// pair, short, claim and rule are Claim's fields of the same names.
	pair, short, claim, rule string
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
}

// notRun is the outcome when the runs lack what a claim reads.
func notRun(what string) outcome {
	return outcome{missing: "the " + what + " scenario is not in these results"}
}

// ferretWhy is the reason a claim comparing with MongoDB is not
// measurable on a FerretDB run.
const ferretWhy = "the MongoDB side ran on FerretDB (SQLite backend, no wildcard index, full scans), not MongoDB: its numbers say nothing about MongoDB"

// agedShort is the short name of the long-lived claim.
const agedShort = "ages within 2× of fresh"

// claimTable holds every numeric claim of the reference measurements, in
// the order of RESULTS.md's claims table.
var claimTable = []claimSpec{
	{pair: "queue", short: "design-target ceiling",
		claim:    "The Postgres queue reaches ≥ 10,000 tasks/s send→processed on a 2-core machine (design target)",
		rule:     "no-rabbitmq's median ceiling ≥ 10,000/s",
		evaluate: ceilingAtLeast("queue", "no-rabbitmq", 10000)},
	{pair: "queue", short: "delivery p99 close to RabbitMQ's",
		claim: "Delivery p99 on Postgres within 1.5× of RabbitMQ's at 1,000 tasks/s (design target)",
		rule:  "median per-round ratio no-rabbitmq ÷ rabbitmq of server delivery p99 ≤ 1.5",
		evaluate: atPoint("queue", "queue.rate", "1000/s", "queue 1000/s point", func(_ claimInputs, p *driver.Point) outcome {
			a, _ := median(p, "server.delivery.p99_ms", "no-rabbitmq")
			b, _ := median(p, "server.delivery.p99_ms", "rabbitmq")
			r, ok := ratio(p, "server.delivery.p99_ms")
			if !ok {
				return outcome{missing: "no delivery latency was recorded at 1000/s"}
			}
			return outcome{measured: fmt.Sprintf("%s ms vs %s ms: %s×", num(a), num(b), num(r)), holds: r <= 1.5}
		})},
	{pair: "queue", short: "cost of a logged queue table",
		claim: "p99 send→processed goes from 4 ms to 11 ms when the queue tables become logged",
		rule:  "no-rabbitmq's send→processed p99 with QUEUE_TABLE=logged ≥ 1.5× the unlogged one, same rate, same run",
		evaluate: func(in claimInputs) outcome {
			def, dur := in.rs.point("queue", "queue.default", ""), in.rs.point("queue", "queue.durable", "")
			if def == nil || dur == nil {
				return notRun("queue durable variant")
			}
			u, ok1 := median(def, "server.processing.p99_ms", "no-rabbitmq")
			l, ok2 := median(dur, "server.processing.p99_ms", "no-rabbitmq")
			if !ok1 || !ok2 || u <= 0 {
				return outcome{missing: "send→processed was not recorded in both modes"}
			}
			return outcome{measured: fmt.Sprintf("%s ms unlogged → %s ms logged at %s (%s×)", num(u), num(l), def.Name, num(l/u)), holds: l/u >= 1.5}
		}},
	{pair: "queue", short: agedShort,
		claim:    "The queue stays within 2× of its fresh-table p99 after a million finished tasks, with retention on",
		rule:     "no-rabbitmq's delivery p99 at 1000/s in the long-lived run (≥ 1,000,000 finished tasks of history, TASK_RETENTION 24h) ≤ 2× its median at 1000/s in the fresh run",
		evaluate: agedWithin("no-rabbitmq", "1000/s", "server.delivery.p99_ms", 1_000_000, 2)},
	{pair: "log", short: "low delivery p95 on both sides",
		claim: "Delivery p95 ≤ 2 ms on both sides at 100, 150 and 200 events/s",
		rule:  "every side's median delivery p95 ≤ 2 ms at every one of those rates",
		evaluate: everyLogRate("server.delivery.p95_ms", "no-kafka / kafka: ", func(rate string, pg, kafka float64) (string, bool) {
			return fmt.Sprintf("%s: %s / %s ms", rate, num(pg), num(kafka)), pg <= 2 && kafka <= 2
		})},
	{pair: "log", short: "Kafka's write p99 above Postgres'",
		claim: "Kafka write p99 16 ms versus 5–7 ms on Postgres",
		rule:  "kafka's median write p99 above no-kafka's at every fixed rate",
		evaluate: everyLogRate("server.write.p99_ms", "kafka vs no-kafka: ", func(rate string, pg, kafka float64) (string, bool) {
			return fmt.Sprintf("%s: %s vs %s ms", rate, num(kafka), num(pg)), kafka > pg
		})},
	{pair: "log", short: "synchronous_commit=off delays delivery",
		claim: "With synchronous_commit=off, logical delivery p50 ≈ 160 ms (the WAL writer's flush delay)",
		rule:  "no-kafka's delivery p50 with SYNCHRONOUS_COMMIT=off between 80 and 320 ms (within 2×)",
		evaluate: atPoint("log", "log.sync_off", "", "log sync-off variant", func(in claimInputs, p *driver.Point) outcome {
			v, ok := median(p, "server.delivery.p50_ms", "no-kafka")
			if !ok {
				return outcome{missing: "no delivery latency recorded"}
			}
			o := outcome{measured: fmt.Sprintf("%s ms at %s", num(v), p.Name), holds: v >= 80 && v <= 320}
			if d, ok := median(in.rs.point("log", "log.default", ""), "server.delivery.p50_ms", "no-kafka"); ok {
				o.measured += fmt.Sprintf(" (%s ms with synchronous_commit=on)", num(d))
			}
			return o
		})},
	{pair: "log", short: "design-target ceiling",
		claim:    "One slot keeps up with ≥ 15,000 events/s (design target)",
		rule:     "no-kafka's median ceiling ≥ 15,000/s",
		evaluate: ceilingAtLeast("log", "no-kafka", 15000)},
	{pair: "documents", short: "search p95 vs MongoDB", mongo: true,
		claim: "Containment search p95: 33 ms on Postgres vs 48 ms on MongoDB",
		rule:  "Postgres' search p95 below MongoDB's, same data set",
		evaluate: atPoint("documents", "documents.search", "", "documents", func(in claimInputs, p *driver.Point) outcome {
			a, _ := median(p, "server.search.p95_ms", "no-mongodb")
			b, _ := median(p, "server.search.p95_ms", "mongodb")
			if in.ferret {
				return outcome{measured: fmt.Sprintf("Postgres %s ms; FerretDB %s ms (%s)", num(a), num(b), p.Name)}
			}
			return outcome{measured: fmt.Sprintf("Postgres %s ms vs MongoDB %s ms (%s)", num(a), num(b), p.Name), holds: a < b}
		})},
	{pair: "documents", short: "rewrite ÷ patch on Postgres",
		claim:    "Rewriting a 512 KB–2 MB profile costs 3.6–4.7× a neighbour-column patch on Postgres",
		rule:     "no-mongodb's rewrite ÷ patch p50 within 2× of the range (1.8–9.4×) at every size",
		evaluate: costRatioWithin("no-mongodb", 1.8, 9.4)},
	{pair: "documents", short: "lz4 TOAST compression vs pglz",
		claim:    "lz4 TOAST compression (PostgreSQL 14+) makes a large jsonb rewrite cheaper than the default pglz",
		rule:     "no-mongodb's rewrite p50 with TOAST_COMPRESSION=lz4 below its rewrite p50 with pglz, at every size, in the same run",
		evaluate: lz4BeatsPglz},
	{pair: "documents", short: "rewrite ÷ patch on MongoDB", mongo: true,
		claim:    "The same rewrite costs 1.9–2.4× a patch on MongoDB",
		rule:     "mongodb's rewrite ÷ patch p50 within 2× of the range (0.95–4.8×) at every size",
		evaluate: costRatioWithin("mongodb", 0.95, 4.8)},
	{pair: "documents", short: "large rewrite p99 vs MongoDB", mongo: true,
		claim: "At 2 MB, Postgres' rewrite p99 is 2.6× MongoDB's",
		rule:  "median per-round ratio no-mongodb ÷ mongodb of rewrite p99 at 2MB within 2× of 2.6 (1.3–5.2)",
		evaluate: atPoint("documents", "documents.rewrite", "2MB", "documents 2MB rewrite point", func(in claimInputs, p *driver.Point) outcome {
			r, ok := ratio(p, "client.rewrite.p99_ms")
			switch {
			case in.ferret:
				return outcome{measured: fmt.Sprintf("Postgres ÷ FerretDB: %s×", num(r))}
			case !ok:
				return outcome{missing: "no 2MB rewrite latencies on both sides"}
			}
			return outcome{measured: fmt.Sprintf("%s×", num(r)), holds: r >= 1.3 && r <= 5.2}
		})},
}

// agedWithin evaluates "side's metric at point in the long-lived run
// (at least minHistory rows of history) is at most factor × its median in
// the fresh queue run"; the other side's ratio is shown beside it.
func agedWithin(side, point, metric string, minHistory int64, factor float64) func(claimInputs) outcome {
	return func(in claimInputs) outcome {
		ll := in.rs["longlived"]
		fresh := in.rs.point("queue", "queue.rate", point)
		aged := in.rs.point("longlived", "queue.rate", point)
		switch {
		case ll == nil || aged == nil:
			return notRun("long-lived queue " + point)
		case fresh == nil:
			return notRun("fresh queue " + point)
		case ll.StartState == nil || ll.StartState.HistoryRows < minHistory:
			rows := int64(0)
			if ll.StartState != nil {
				rows = ll.StartState.HistoryRows
			}
			return outcome{missing: fmt.Sprintf("the long-lived run had %s rows of history, fewer than %s", count(rows), count(minHistory))}
		}
		f, okF := median(fresh, metric, side)
		a, okA := median(aged, metric, side)
		if !okF || !okA || f <= 0 {
			return outcome{missing: "no " + metric + " of " + side + " in both runs"}
		}
		measured := fmt.Sprintf("%s ms fresh → %s ms on %s rows of history (%s×)", num(f), num(a), count(ll.StartState.HistoryRows), num(a/f))
		for _, other := range aged.Sides {
			if other == side {
				continue
			}
			of, ok1 := median(fresh, metric, other)
			oa, ok2 := median(aged, metric, other)
			if ok1 && ok2 && of > 0 {
				measured += fmt.Sprintf("; %s %s → %s ms (%s×)", other, num(of), num(oa), num(oa/of))
			}
		}
		return outcome{measured: measured, holds: a <= factor*f}
	}
}

// atPoint evaluates a claim on one point (the first of scenario when
// name is empty); what names the missing scenario when there is none.
func atPoint(cmd, scenario, name, what string, f func(claimInputs, *driver.Point) outcome) func(claimInputs) outcome {
	return func(in claimInputs) outcome {
		p := in.rs.point(cmd, scenario, name)
		if p == nil {
			return notRun(what)
		}
		return f(in, p)
	}
}

// ceilingAtLeast evaluates "service's median ceiling in cmd is at least
// target".
func ceilingAtLeast(cmd, service string, target float64) func(claimInputs) outcome {
	return func(in claimInputs) outcome {
		ce := in.rs.ceiling(cmd, service)
		if ce == nil {
			return notRun(cmd + " ceiling")
		}
		return outcome{measured: fmt.Sprintf("ceiling %s/s (rounds: %s; the driver shares the 2 cores)", cell(ce.Rate, true), ceilingRounds(*ce)),
			holds: ce.Rate.Median >= target}
	}
}

// atEveryPoint evaluates a rule that must hold at every point of a
// scenario: each returns the point's part of the measured text and
// whether the rule holds there; prefix heads the joined parts.
func atEveryPoint(cmd, scenario, what string, prefix func(claimInputs) string, each func(*driver.Point) (string, bool)) func(claimInputs) outcome {
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
func everyLogRate(metric, prefix string, each func(rate string, pg, kafka float64) (string, bool)) func(claimInputs) outcome {
	return atEveryPoint("log", "log.rate", "log", func(claimInputs) string { return prefix }, func(p *driver.Point) (string, bool) {
		a, okA := median(p, metric, "no-kafka")
		b, okB := median(p, metric, "kafka")
		part, holds := each(p.Name, a, b)
		return part, okA && okB && holds
	})
}

// costRatioWithin evaluates "side's rewrite ÷ patch p50 is within
// [lo, hi] at every size".
func costRatioWithin(side string, lo, hi float64) func(claimInputs) outcome {
	prefix := func(in claimInputs) string {
		if in.ferret && side == "mongodb" {
			return "FerretDB: "
		}
		return ""
	}
	return atEveryPoint("documents", "documents.rewrite", "documents", prefix, func(p *driver.Point) (string, bool) {
		v, ok := median(p, "cost_ratio.p50", side)
		return fmt.Sprintf("%s: %s×", p.Name, num(v)), ok && v >= lo && v <= hi
	})
}

// lz4BeatsPglz compares the Postgres side's rewrite p50 and rewrite ÷
// patch at each size of documents.rewrite (pglz) and
// documents.rewrite_lz4.
func lz4BeatsPglz(in claimInputs) outcome {
	pg := in.rs.points("documents", "documents.rewrite")
	if len(pg) == 0 || len(in.rs.points("documents", "documents.rewrite_lz4")) == 0 {
		return outcome{missing: "no rewrite points with both pglz and lz4 (documents scenario with -lz4)"}
	}
	var parts []string
	holds := true
	for _, p := range pg {
		l := in.rs.point("documents", "documents.rewrite_lz4", p.Name)
		a, okA := median(p, "client.rewrite.p50_ms", "no-mongodb")
		ra, _ := median(p, "cost_ratio.p50", "no-mongodb")
		if l == nil {
			return outcome{missing: "no lz4 rewrite point at " + p.Name}
		}
		b, okB := median(l, "client.rewrite.p50_ms", "no-mongodb")
		rb, _ := median(l, "cost_ratio.p50", "no-mongodb")
		if !okA || !okB {
			return outcome{missing: "no rewrite p50 at " + p.Name}
		}
		parts = append(parts, fmt.Sprintf("%s: rewrite p50 %s ms (pglz, %s× a patch) vs %s ms (lz4, %s×)", p.Name, num(a), num(ra), num(b), num(rb)))
		holds = holds && b < a
	}
	return outcome{measured: strings.Join(parts, "; "), holds: holds}
}

// Claims evaluates every claim of claimTable against the runs and, for
// the claims the raw loops settle, the raw results rr (the first, if
// given).
func Claims(all []*driver.Run, rr ...raw.Results) []Claim {
	in := claimInputs{rs: runs{}}
	if len(rr) > 0 {
		in.raw = rr[0]
	}
	for _, r := range all {
		in.rs[r.Command] = r
	}
	if docs := in.rs["documents"]; docs != nil {
		in.ferret = docs.Versions.MongoFlavor == "FerretDB"
	}
	out := make([]Claim, 0, len(claimTable))
	for _, s := range claimTable {
		c := Claim{Pair: s.pair, Short: s.short, Claim: s.claim, Rule: s.rule}
		switch o := s.evaluate(in); {
		case o.missing != "":
			c.Verdict, c.Why, c.Measured = NotMeasurable, o.missing, "–"
		case s.mongo && in.ferret:
			c.Verdict, c.Why, c.Measured = NotMeasurable, ferretWhy, o.measured
		case o.unmeasurable != "":
			c.Verdict, c.Why, c.Measured = NotMeasurable, o.unmeasurable, o.measured
		default:
			c.Verdict, c.Measured = verdict(o.holds), o.measured
		}
		out = append(out, c)
	}
	return out
}
