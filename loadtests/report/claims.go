package report

import (
	"fmt"
	"strings"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
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

func missing(c Claim, why string) Claim {
	c.Verdict, c.Why, c.Measured = NotMeasurable, why, "–"
	return c
}

// Claims evaluates every numeric claim of the reference measurements
// against the runs.
func Claims(all []*driver.Run) []Claim {
	rs := runs{}
	for _, r := range all {
		rs[r.Command] = r
	}
	notRun := func(cmd string) string { return "the " + cmd + " scenario is not in these results" }
	var out []Claim

	// queue
	c := Claim{Pair: "queue", Short: "design-target ceiling", Claim: "The Postgres queue reaches ≥ 10,000 tasks/s send→processed on a 2-core machine (design target)",
		Rule: "no-rabbitmq's median ceiling ≥ 10,000/s"}
	if ce := rs.ceiling("queue", "no-rabbitmq"); ce != nil {
		c.Measured = fmt.Sprintf("ceiling %s/s (rounds: %s; the driver shares the 2 cores)", cell(ce.Rate, true), ceilingRounds(*ce))
		c.Verdict = verdict(ce.Rate.Median >= 10000)
	} else {
		c = missing(c, notRun("queue ceiling"))
	}
	out = append(out, c)

	c = Claim{Pair: "queue", Short: "delivery p99 close to RabbitMQ's", Claim: "Delivery p99 on Postgres within 1.5× of RabbitMQ's at 1,000 tasks/s (design target)",
		Rule: "median per-round ratio no-rabbitmq ÷ rabbitmq of server delivery p99 ≤ 1.5"}
	if p := rs.point("queue", "queue.rate", "1000/s"); p != nil {
		a, _ := median(p, "server.delivery.p99_ms", "no-rabbitmq")
		b, _ := median(p, "server.delivery.p99_ms", "rabbitmq")
		if r, ok := ratio(p, "server.delivery.p99_ms"); ok {
			c.Measured = fmt.Sprintf("%s ms vs %s ms: %s×", num(a), num(b), num(r))
			c.Verdict = verdict(r <= 1.5)
		} else {
			c = missing(c, "no delivery latency was recorded at 1000/s")
		}
	} else {
		c = missing(c, notRun("queue 1000/s point"))
	}
	out = append(out, c)

	c = Claim{Pair: "queue", Short: "cost of a logged queue table", Claim: "p99 send→processed goes from 4 ms to 11 ms when the queue tables become logged",
		Rule: "no-rabbitmq's send→processed p99 with QUEUE_TABLE=logged ≥ 1.5× the unlogged one, same rate, same run"}
	def, dur := rs.point("queue", "queue.default", ""), rs.point("queue", "queue.durable", "")
	if def != nil && dur != nil {
		u, ok1 := median(def, "server.processing.p99_ms", "no-rabbitmq")
		l, ok2 := median(dur, "server.processing.p99_ms", "no-rabbitmq")
		if ok1 && ok2 && u > 0 {
			c.Measured = fmt.Sprintf("%s ms unlogged → %s ms logged at %s (%s×)", num(u), num(l), def.Name, num(l/u))
			c.Verdict = verdict(l/u >= 1.5)
		} else {
			c = missing(c, "send→processed was not recorded in both modes")
		}
	} else {
		c = missing(c, notRun("queue durable variant"))
	}
	out = append(out, c)

	// log
	c = Claim{Pair: "log", Short: "low delivery p95 on both sides", Claim: "Delivery p95 ≤ 2 ms on both sides at 100, 150 and 200 events/s",
		Rule: "every side's median delivery p95 ≤ 2 ms at every one of those rates"}
	if ps := rs.points("log", "log.rate"); len(ps) > 0 {
		ok := true
		var parts []string
		for _, p := range ps {
			a, okA := median(p, "server.delivery.p95_ms", "no-kafka")
			b, okB := median(p, "server.delivery.p95_ms", "kafka")
			ok = ok && okA && okB && a <= 2 && b <= 2
			parts = append(parts, fmt.Sprintf("%s: %s / %s ms", p.Name, num(a), num(b)))
		}
		c.Measured = "no-kafka / kafka: " + strings.Join(parts, "; ")
		c.Verdict = verdict(ok)
	} else {
		c = missing(c, notRun("log"))
	}
	out = append(out, c)

	c = Claim{Pair: "log", Short: "Kafka's write p99 above Postgres'", Claim: "Kafka write p99 16 ms versus 5–7 ms on Postgres",
		Rule: "kafka's median write p99 above no-kafka's at every fixed rate"}
	if ps := rs.points("log", "log.rate"); len(ps) > 0 {
		ok := true
		var parts []string
		for _, p := range ps {
			a, okA := median(p, "server.write.p99_ms", "no-kafka")
			b, okB := median(p, "server.write.p99_ms", "kafka")
			ok = ok && okA && okB && b > a
			parts = append(parts, fmt.Sprintf("%s: %s vs %s ms", p.Name, num(b), num(a)))
		}
		c.Measured = "kafka vs no-kafka: " + strings.Join(parts, "; ")
		c.Verdict = verdict(ok)
	} else {
		c = missing(c, notRun("log"))
	}
	out = append(out, c)

	c = Claim{Pair: "log", Short: "synchronous_commit=off delays delivery", Claim: "With synchronous_commit=off, logical delivery p50 ≈ 160 ms (the WAL writer's flush delay)",
		Rule: "no-kafka's delivery p50 with SYNCHRONOUS_COMMIT=off between 80 and 320 ms (within 2×)"}
	if p := rs.point("log", "log.sync_off", ""); p != nil {
		v, ok := median(p, "server.delivery.p50_ms", "no-kafka")
		d, okD := median(rs.point("log", "log.default", ""), "server.delivery.p50_ms", "no-kafka")
		if ok {
			c.Measured = fmt.Sprintf("%s ms at %s", num(v), p.Name)
			if okD {
				c.Measured += fmt.Sprintf(" (%s ms with synchronous_commit=on)", num(d))
			}
			c.Verdict = verdict(v >= 80 && v <= 320)
		} else {
			c = missing(c, "no delivery latency recorded")
		}
	} else {
		c = missing(c, notRun("log sync-off variant"))
	}
	out = append(out, c)

	c = Claim{Pair: "log", Short: "design-target ceiling", Claim: "One slot keeps up with ≥ 15,000 events/s (design target)",
		Rule: "no-kafka's median ceiling ≥ 15,000/s"}
	if ce := rs.ceiling("log", "no-kafka"); ce != nil {
		c.Measured = fmt.Sprintf("ceiling %s/s (rounds: %s; the driver shares the 2 cores)", cell(ce.Rate, true), ceilingRounds(*ce))
		c.Verdict = verdict(ce.Rate.Median >= 15000)
	} else {
		c = missing(c, notRun("log ceiling"))
	}
	out = append(out, c)

	// documents
	docs := rs["documents"]
	ferret := docs != nil && docs.Versions.MongoFlavor == "FerretDB"
	ferretWhy := "the MongoDB side ran on FerretDB (SQLite backend, no wildcard index, full scans), not MongoDB: its numbers say nothing about MongoDB"
	c = Claim{Pair: "documents", Short: "search p95 vs MongoDB", Claim: "Containment search p95: 33 ms on Postgres vs 48 ms on MongoDB",
		Rule: "Postgres' search p95 below MongoDB's, same data set"}
	if p := rs.point("documents", "documents.search", ""); p != nil {
		a, _ := median(p, "server.search.p95_ms", "no-mongodb")
		b, _ := median(p, "server.search.p95_ms", "mongodb")
		if ferret {
			c.Verdict, c.Why = NotMeasurable, ferretWhy
			c.Measured = fmt.Sprintf("Postgres %s ms; FerretDB %s ms (%s)", num(a), num(b), p.Name)
		} else {
			c.Measured = fmt.Sprintf("Postgres %s ms vs MongoDB %s ms (%s)", num(a), num(b), p.Name)
			c.Verdict = verdict(a < b)
		}
	} else {
		c = missing(c, notRun("documents"))
	}
	out = append(out, c)

	c = Claim{Pair: "documents", Short: "rewrite ÷ patch on Postgres", Claim: "Rewriting a 512 KB–2 MB profile costs 3.6–4.7× a neighbour-column patch on Postgres",
		Rule: "no-mongodb's rewrite ÷ patch p50 within 2× of the range (1.8–9.4×) at every size"}
	if ps := rs.points("documents", "documents.rewrite"); len(ps) > 0 {
		ok := true
		var parts []string
		for _, p := range ps {
			v, okV := median(p, "cost_ratio.p50", "no-mongodb")
			ok = ok && okV && v >= 1.8 && v <= 9.4
			parts = append(parts, fmt.Sprintf("%s: %s×", p.Name, num(v)))
		}
		c.Measured = strings.Join(parts, "; ")
		c.Verdict = verdict(ok)
	} else {
		c = missing(c, notRun("documents"))
	}
	out = append(out, c)

	c = Claim{Pair: "documents", Short: "rewrite ÷ patch on MongoDB", Claim: "The same rewrite costs 1.9–2.4× a patch on MongoDB",
		Rule: "mongodb's rewrite ÷ patch p50 within 2× of the range (0.95–4.8×) at every size"}
	if ps := rs.points("documents", "documents.rewrite"); len(ps) > 0 {
		ok := true
		var parts []string
		for _, p := range ps {
			v, okV := median(p, "cost_ratio.p50", "mongodb")
			ok = ok && okV && v >= 0.95 && v <= 4.8
			parts = append(parts, fmt.Sprintf("%s: %s×", p.Name, num(v)))
		}
		if ferret {
			c.Verdict, c.Why, c.Measured = NotMeasurable, ferretWhy, "FerretDB: "+strings.Join(parts, "; ")
		} else {
			c.Measured = strings.Join(parts, "; ")
			c.Verdict = verdict(ok)
		}
	} else {
		c = missing(c, notRun("documents"))
	}
	out = append(out, c)

	c = Claim{Pair: "documents", Short: "large rewrite p99 vs MongoDB", Claim: "At 2 MB, Postgres' rewrite p99 is 2.6× MongoDB's",
		Rule: "median per-round ratio no-mongodb ÷ mongodb of rewrite p99 at 2MB within 2× of 2.6 (1.3–5.2)"}
	if p := rs.point("documents", "documents.rewrite", "2MB"); p != nil {
		r, ok := ratio(p, "client.rewrite.p99_ms")
		if ferret {
			c.Verdict, c.Why = NotMeasurable, ferretWhy
			c.Measured = fmt.Sprintf("Postgres ÷ FerretDB: %s×", num(r))
		} else if ok {
			c.Measured = fmt.Sprintf("%s×", num(r))
			c.Verdict = verdict(r >= 1.3 && r <= 5.2)
		} else {
			c = missing(c, "no 2MB rewrite latencies on both sides")
		}
	} else {
		c = missing(c, notRun("documents 2MB rewrite point"))
	}
	out = append(out, c)
	return out
}
