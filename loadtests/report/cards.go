package report

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/eventstore"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/scenario"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// Confidence of a figure: how it was obtained.
const (
	// MeasuredHere is a figure measured on this machine against the
	// named server.
	MeasuredHere = "measured here"
	// StandInFerretDB is a figure measured against FerretDB standing in
	// for MongoDB: it says nothing about MongoDB.
	StandInFerretDB = "stand-in: FerretDB"
	// NotRunKurrentDB marks KurrentDB, which never ran here.
	NotRunKurrentDB = "not run: KurrentDB"
)

// Figure is one number of a verdict card with its validity: a value in
// Unit, or Why there is none ("failed: <reason>", "not measured").
type Figure struct {
	Value float64
	Unit  string
	// Why is "" for a valid figure.
	Why string
	// Lo and Hi are the range across rounds of a median Value (the
	// sustainable rates), printed beside it when they differ; both 0 for
	// a figure without one.
	Lo, Hi float64
}

// OK reports whether the figure holds a valid value.
func (f Figure) OK() bool { return f.Why == "" }

// String is the value with its unit, or why there is none; a failed
// figure is never printed as a number.
func (f Figure) String() string {
	if !f.OK() {
		return f.Why
	}
	if f.Hi > f.Lo {
		return fmt.Sprintf("%s%s (%s–%s across rounds)", num(f.Value), f.Unit, num(f.Lo), num(f.Hi))
	}
	return num(f.Value) + f.Unit
}

// noFigure is a figure no result holds.
func noFigure(unit string) Figure { return Figure{Unit: unit, Why: "not measured"} }

// failedFigure is a figure whose measurement failed.
func failedFigure(unit string, st driver.Status) Figure {
	return Figure{Unit: unit, Why: st.String()}
}

// Verdict is one pair's measured thresholds, read from the results: what
// the README's card and the advise command say.
type Verdict struct {
	// Pair is the pair's short name: queue, log, documents, eventstore,
	// cache.
	Pair string
	// Title names the pair for the reader; Specialist the specialist
	// server; Item the unit of work (tasks, events, ...).
	Title, Specialist, Item string
	// SpecServer names the specialist server measured with its version
	// ("RabbitMQ 3.10.8 (Erlang 25.2.3)"); "" when not measured.
	SpecServer string
	// Claims tallies the reference's claims checked for the pair by
	// verdict ("holds: 2, does not hold: 1"); "" for none.
	Claims string
	// SpecConfidence is the confidence of the specialist's figures
	// (MeasuredHere, StandInFerretDB, NotRunKurrentDB).
	SpecConfidence string
	// PGRate and SpecRate are the highest rates (items/s) passing every
	// check of the ceiling search (median of the searches).
	PGRate, SpecRate Figure
	// RateCriterion is the latency bound those rates held ("server
	// delivery p99 < 100ms"), "" when no search ran.
	RateCriterion string
	// PGSustained and SpecSustained are the sustainable rates (open
	// loop, batched: backlog flat, end-to-end p99 under the SLO, median
	// of the rounds) at SustainedAt ("batch 100"), the batch size where
	// Postgres' was highest; SustainedAt is "" when none was searched.
	PGSustained, SpecSustained Figure
	SustainedAt                string
	// MaxRate is the highest rate any measurement of the pair offered:
	// the top of the measured range (0 when none).
	MaxRate float64
	// PGCPU and SpecCPU are CPU-seconds per 1,000 items, every process
	// counted, with one item per request.
	PGCPU, SpecCPU Figure
	// PayloadBytes are the item sizes measured, in bytes.
	PayloadBytes []float64
	// PGLatency is Postgres' figure for the latency question, described
	// by LatencyWhat; SpecLatency the specialist's.
	PGLatency, SpecLatency Figure
	LatencyWhat            string
	// SpecOnly lists what only the specialist does (the semantic limits
	// of the Postgres side).
	SpecOnly []string
	// Alt is a sentence on an alternative specialist measured instead
	// ("" for none).
	Alt string
	// Bites is the failure that bites Postgres first, with its figure.
	Bites string
	// Shape is the pair's data-shape figure in words ("" for none).
	Shape string
	// Failover is what each side lost when a node of its cluster died or
	// was cut off, and how soon writes came back (the cluster profile's
	// experiments), or why it is not measured; "" when the pair has no
	// failover experiment.
	Failover string
	// LoseNothing is what each side's setting that loses nothing costs
	// against its cheaper one (the durability scenario), or why it is not
	// measured; "" when the pair has none.
	LoseNothing string
	// Doc, Section and Chart link the details.
	Doc, Section, Chart string
}

// typicalPayload is the size of the queue's and the log's load bodies:
// a JSON object of 50 to 60 bytes (scenario's task and event bodies,
// loadtests/scenario/queue.go and logpair.go).
const typicalPayload = 60

// Verdicts returns the pairs' verdicts read from the runs (the event
// store's among them) and the raw results, in card order (queue, log,
// documents, event store, cache).
func Verdicts(all []*driver.Run, src ...Sources) []Verdict {
	all, bench := splitBench(all)
	validate(all)
	in := newInputs(all, eventStoreOf(bench), src...)
	return verdictsOf(in, first1(src))
}

// verdictsOf returns the pairs' verdicts from in, with their failover
// lines read from src, in card order.
func verdictsOf(in *inputs, src Sources) []Verdict {
	vs := []Verdict{queueVerdict(in), logVerdict(in), documentsVerdict(in), eventStoreVerdict(in), cacheVerdict(in)}
	for i := range vs {
		vs[i].Failover = failoverText(vs[i].Pair, src.FailoverParts)
		vs[i].LoseNothing = loseNothingText(vs[i].Pair, src.Durability)
	}
	return vs
}

// newInputs indexes the runs for the findings and the verdicts.
func newInputs(all []*driver.Run, es eventstore.Results, src ...Sources) *inputs {
	in := &inputs{rs: runs{}, es: es, claims: ClaimsFrom(all, first1(src))}
	for _, r := range all {
		in.rs[r.Command] = r
	}
	for _, c := range pairCommands() {
		if r := in.rs[c]; r != nil {
			in.order = append(in.order, r)
		}
	}
	return in
}

// ceilingFigure is a side's median knee, or why it is no figure (the
// search failed, the knee was not reached, the admission limit set it).
func ceilingFigure(in *inputs, cmd, side string) Figure {
	c := in.rs.ceiling(cmd, side)
	if c == nil {
		return noFigure("/s")
	}
	if st := c.CeilingStatus(); !st.OK() {
		return failedFigure("/s", st)
	}
	v, why := kneeOf(c).value()
	if why != "" {
		return Figure{Unit: "/s", Why: why}
	}
	return Figure{Value: v, Unit: "/s"}
}

// criterionLatency is the latency bound of a ceiling's criteria ("server
// delivery p99 < 100 ms, and under 5× its low-rate p99"): from its
// figures, or the last clause of an older file's criteria.
func criterionLatency(in *inputs, cmd, side string) string {
	c := in.rs.ceiling(cmd, side)
	if c == nil {
		return ""
	}
	if sp := c.Spec; sp != nil {
		s := fmt.Sprintf("server %s p99 < %s", sp.Latency, ms(sp.P99MS))
		if sp.KneeFactor > 0 && sp.LowP99MS > 0 {
			s += fmt.Sprintf(" and ≤ %s× its low-rate p99", num(sp.KneeFactor))
		}
		return s
	}
	parts := strings.Split(c.Criteria, ", ")
	return parts[len(parts)-1]
}

// maxRate is the highest rate offered by any ceiling step or point of cmd.
func maxRate(in *inputs, cmd string) float64 {
	r := in.rs[cmd]
	if r == nil {
		return 0
	}
	var m float64
	for _, c := range r.Ceilings {
		for _, rd := range c.Rounds {
			for _, s := range rd.Steps {
				m = max(m, s.Rate)
			}
		}
	}
	for _, p := range r.Points {
		if !strings.Contains(p.Name, "ceiling") {
			m = max(m, p.Rate)
		}
	}
	return m
}

// cpuFigure is a side's CPU-seconds per 1,000 items at batch 1 in the
// throughput run.
func cpuFigure(in *inputs, pair, side string) Figure {
	p := in.rs.point("throughput", pair+".throughput", "batch 1")
	if p == nil {
		return noFigure(" CPU-s")
	}
	if st := p.SideStatus(side); !st.OK() {
		return failedFigure(" CPU-s", st)
	}
	v, ok := median(p, scenario.MetricCPUPerThousand("total"), side)
	if !ok {
		return noFigure(" CPU-s")
	}
	return Figure{Value: v, Unit: " CPU-s"}
}

// pointFigure is a side's median of metric at p, or why there is none.
func pointFigure(p *driver.Point, metric, side, unit string) Figure {
	if p == nil {
		return noFigure(unit)
	}
	if st := p.SideStatus(side); !st.OK() {
		return failedFigure(unit, st)
	}
	v, ok := median(p, metric, side)
	if !ok {
		// A valid side without the metric: renamed, or no longer
		// recorded. An error to show, not "not measured".
		return Figure{Unit: unit, Why: fmt.Sprintf("failed: no metric %q in %s %s", metric, p.Scenario, p.Name)}
	}
	return Figure{Value: v, Unit: unit}
}

func queueVerdict(in *inputs) Verdict {
	v := Verdict{Pair: pairs.Queue, Title: "Queue", Specialist: "RabbitMQ", Item: "tasks", SpecConfidence: MeasuredHere,
		PGRate: ceilingFigure(in, pairs.Queue, pairs.NoRabbitMQ), SpecRate: ceilingFigure(in, pairs.Queue, pairs.RabbitMQ),
		RateCriterion: criterionLatency(in, pairs.Queue, pairs.NoRabbitMQ), MaxRate: maxRate(in, pairs.Queue),
		PGCPU: cpuFigure(in, pairs.Queue, pairs.NoRabbitMQ), SpecCPU: cpuFigure(in, pairs.Queue, pairs.RabbitMQ),
		PayloadBytes: []float64{typicalPayload},
		SpecOnly:     []string{"routing by pattern (topic and header exchanges)", "many queues"},
		Doc:          "docs/queue.md", Section: titleOf(pairs.Queue), Chart: "docs/results/queue-card.svg",
		LatencyWhat: "delivery p99",
	}
	if r := in.rs[pairs.Queue]; r != nil {
		v.SpecServer = rabbitVersion(r.Versions)
	}
	v.PGSustained, v.SpecSustained, v.SustainedAt = sustainedFigures(in, pairs.Queue, pairs.NoRabbitMQ, pairs.RabbitMQ)
	v.Claims = claimCount(in.claims, pairs.Queue)
	best, _ := highestKeptUp(in.rs, pairs.Queue, "queue.rate")
	v.PGLatency, v.SpecLatency = pointFigure(best, driver.ServerDeliveryP99, pairs.NoRabbitMQ, " ms"), pointFigure(best, driver.ServerDeliveryP99, pairs.RabbitMQ, " ms")
	if best != nil {
		v.LatencyWhat = "delivery p99 at " + best.Name
	}
	v.Bites = "every `NOTIFY` serializes commits"
	for _, p := range in.rs.points(pairs.Queue, "queue.rate") {
		if tp, ok := median(p, "throughput", pairs.NoRabbitMQ); ok && p.Rate > 0 && tp < keptUpShare*p.Rate {
			v.Bites = fmt.Sprintf("past its ceiling the backlog grows (Postgres fell behind at %s); %s", p.Name, v.Bites)
			break
		}
	}
	return v
}

func logVerdict(in *inputs) Verdict {
	v := Verdict{Pair: pairs.Log, Title: "Log", Specialist: "Kafka", Item: "events", SpecConfidence: MeasuredHere,
		PGRate: ceilingFigure(in, pairs.Log, pairs.NoKafka), SpecRate: ceilingFigure(in, pairs.Log, pairs.Kafka),
		RateCriterion: criterionLatency(in, pairs.Log, pairs.NoKafka), MaxRate: maxRate(in, pairs.Log),
		PGCPU: cpuFigure(in, pairs.Log, pairs.NoKafka), SpecCPU: cpuFigure(in, pairs.Log, pairs.Kafka),
		PayloadBytes: []float64{typicalPayload},
		SpecOnly:     []string{"partitions for parallel consumers of one group", "replay from any offset", "retention"},
		Doc:          "docs/log.md", Section: titleOf(pairs.Log), Chart: "docs/results/log-card.svg",
		LatencyWhat: "delivery p95",
	}
	if r := in.rs[pairs.Log]; r != nil {
		v.SpecServer = "Kafka " + orWhy(r.Versions.Kafka, r.Versions.Errors["kafka"])
	}
	v.Claims = claimCount(in.claims, pairs.Log)
	v.PGSustained, v.SpecSustained, v.SustainedAt = sustainedFigures(in, pairs.Log, pairs.NoKafka, pairs.Kafka)
	ps := in.rs.points(pairs.Log, "log.rate")
	if len(ps) > 0 {
		p := ps[len(ps)-1]
		v.PGLatency, v.SpecLatency = pointFigure(p, driver.ServerDeliveryP95, pairs.NoKafka, " ms"), pointFigure(p, driver.ServerDeliveryP95, pairs.Kafka, " ms")
		v.LatencyWhat = "delivery p95 at " + p.Name
	} else {
		v.PGLatency, v.SpecLatency = noFigure(" ms"), noFigure(" ms")
	}
	v.Bites = "a slot whose consumer is dead keeps WAL without bound (or, with `max_slot_wal_keep_size`, is invalidated and its events lost)"
	return v
}

func documentsVerdict(in *inputs) Verdict {
	v := Verdict{Pair: pairs.Documents, Title: "Documents", Specialist: "MongoDB", Item: "searches", SpecConfidence: MeasuredHere,
		PGRate: noFigure("/s"), SpecRate: noFigure("/s"), MaxRate: 0,
		PGCPU: noFigure(" CPU-s"), SpecCPU: noFigure(" CPU-s"),
		SpecOnly: []string{"frequent whole rewrites of large documents", "queries other than containment (`@>`) served by an index", "sharded writes"},
		Doc:      "docs/documents.md", Section: titleOf(pairs.Documents), Chart: "docs/results/documents-card.svg",
		LatencyWhat: "containment search p95",
	}
	v.Claims = claimCount(in.claims, pairs.Documents)
	r := in.rs[pairs.Documents]
	if r != nil && r.Versions.MongoFlavor == "FerretDB" {
		v.SpecConfidence = StandInFerretDB
	}
	p := in.rs.point(pairs.Documents, "documents.search", "")
	v.PGLatency, v.SpecLatency = pointFigure(p, driver.ServerSearchP95, pairs.NoMongoDB, " ms"), pointFigure(p, driver.ServerSearchP95, pairs.MongoDB, " ms")
	if p != nil {
		v.MaxRate = p.Rate
		v.LatencyWhat += " at " + p.Name
	}
	var sizes []string
	for _, p := range in.rs.points(pairs.Documents, "documents.rewrite") {
		if b := sizeOf(p.Name); b > 0 {
			v.PayloadBytes = append(v.PayloadBytes, b)
		}
		f := pointFigure(p, "cost_ratio.p50", pairs.NoMongoDB, "×")
		sizes = append(sizes, p.Name+" "+f.String())
	}
	v.Bites = "a large profile is rewritten whole (TOAST), even for a neighbour column"
	if len(sizes) > 0 {
		v.Shape = "rewrite ÷ patch p50 on Postgres: " + strings.Join(sizes, "; ")
		v.Bites += ": " + v.Shape
	}
	return v
}

// sizeOf parses a point name such as "512KB" or "2MB" into bytes (0 when
// it is no size).
func sizeOf(name string) float64 {
	b, err := ParseSize(name)
	if err != nil {
		return 0
	}
	return b
}

// ParseSize parses a size such as "2KB", "512KiB", "1.5MB" or "300"
// (bytes); KB and KiB both mean 1024 bytes.
func ParseSize(s string) (float64, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	mult := 1.0
	for _, u := range []struct {
		suffix string
		m      float64
	}{{"KIB", 1 << 10}, {"MIB", 1 << 20}, {"GIB", 1 << 30}, {"KB", 1 << 10}, {"MB", 1 << 20}, {"GB", 1 << 30}, {"K", 1 << 10}, {"M", 1 << 20}, {"B", 1}} {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.m
			break
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("cannot parse size %q (want e.g. 300, 2KB, 1.5MB)", s)
	}
	if v < 0 {
		return 0, fmt.Errorf("size %q is negative", s)
	}
	return v * mult, nil
}

func eventStoreVerdict(in *inputs) Verdict {
	v := Verdict{Pair: pairs.EventStore, Title: "Event store", Specialist: "KurrentDB", Item: "events", SpecConfidence: NotRunKurrentDB,
		PGRate: noFigure("/s"), SpecRate: Figure{Why: "not run"},
		PGCPU: noFigure(" CPU-s"), SpecCPU: Figure{Why: "not run"},
		SpecOnly: []string{"server-side projections", "persistent subscriptions managed by the server"},
		Doc:      "docs/eventstore.md", Section: eventstore.SectionTitle, Chart: "docs/results/eventstore-card.svg",
		LatencyWhat: "live delivery p50 to a caught-up subscriber",
		SpecLatency: Figure{Why: "not run"},
	}
	rta := eventstore.ReadThenAppend
	if pg := appendRows(in.es, rta, pairs.NoKurrentDB, ""); len(pg) > 0 {
		rates := opsPerSec(pg)
		v.PGRate = Figure{Value: slices.Min(rates), Unit: "/s"}
		v.MaxRate = slices.Max(rates)
		v.RateCriterion = fmt.Sprintf("read-then-append, %d workers, lowest of %d loops", in.es.Append.Options.Workers, len(pg))
		if c, ok := conflictShare(pg); ok {
			v.Bites = fmt.Sprintf("concurrent writers to one stream: %s of append attempts refused as version conflicts (409)", percent(c))
		}
	} else if f := appendFailure(in.es, rta, pairs.NoKurrentDB); f != "" {
		v.PGRate = Figure{Unit: "/s", Why: "failed: " + f}
	}
	if f := appendFailure(in.es, rta, pairs.KafkaEventStore); f != "" {
		v.Alt = "Kafka is no substitute here: its read-then-append " + f
	} else if e := engine(in.es, pairs.KafkaEventStore); e != nil && e.Up && !e.Conditional {
		v.Alt = "Kafka is no substitute here: it cannot check an expected version"
	}
	if pg := catchUp(in.es, pairs.NoKurrentDB); pg != nil && len(pg.LiveP50MS) > 0 {
		v.PGLatency = Figure{Value: slices.Max(pg.LiveP50MS), Unit: " ms"}
	} else {
		v.PGLatency = noFigure(" ms")
	}
	if v.Bites == "" {
		v.Bites = "the events table grows by every event: partitioning and archiving are yours"
	}
	if pg := pointRead(in.es, pairs.NoKurrentDB); pg != nil {
		v.Shape = "reading one stream: " + pointReadText(*pg) + " on Postgres"
	}
	return v
}

func cacheVerdict(in *inputs) Verdict {
	v := Verdict{Pair: pairs.Cache, Title: "Cache", Specialist: "Redis", Item: "reads", SpecConfidence: MeasuredHere,
		PGRate: noFigure("/s"), SpecRate: noFigure("/s"),
		PGCPU: noFigure(" CPU-s"), SpecCPU: noFigure(" CPU-s"),
		SpecOnly: []string{"data structures", "eviction policies", "pub/sub", "one cache shared by every instance without a database round trip"},
		Doc:      "docs/cache.md", Section: CacheTitle, Chart: "docs/results/cache-card.svg",
		LatencyWhat: "one lookup by key, p50",
	}
	if r := in.rs[pairs.Cache]; r != nil {
		v.SpecServer = "Redis " + orWhy(r.Versions.Redis, r.Versions.Errors["redis"])
	}
	v.Claims = claimCount(in.claims, pairs.Cache)
	if p := in.rs.point(pairs.Cache, cacheProfile, ""); p != nil {
		v.MaxRate = p.Rate
		v.RateCriterion = "open loop, no ceiling searched"
	}
	raw := in.rs.point(pairs.Cache, cacheRaw, "")
	v.PGLatency, v.SpecLatency = pointFigure(raw, driver.ClientP50, scenario.RawSidePostgres, " ms"), pointFigure(raw, driver.ClientP50, scenario.RawSideRedis, " ms")
	v.Bites = "a mode bound by a TTL serves the old value until the TTL ends"
	if p := in.rs.point(pairs.Cache, cacheStaleness, ""); p != nil {
		v.Shape = "fresh after an out-of-band UPDATE within: " + stalenessModes(p)
		v.Bites += " (" + stalenessModes(p) + ")"
	}
	return v
}

// claimCount tallies a pair's claims by verdict: "holds: 2, does not
// hold: 1"; "" when none was checked.
func claimCount(all []Claim, pair string) string {
	by := map[string]int{}
	for _, c := range all {
		if c.Pair == pair {
			by[c.Verdict]++
		}
	}
	var parts []string
	for _, v := range []string{Holds, DoesNotHold, Inconclusive, FailedRun, NotMeasurable} {
		if by[v] > 0 {
			parts = append(parts, fmt.Sprintf("%s: %d", v, by[v]))
		}
	}
	return strings.Join(parts, ", ")
}

// sustainedFigures are the pair's sustainable rates of pg and spec at
// the batch size where pg's median was highest, and that point's name;
// "" when no sustainable search ran. A side whose search failed is its
// failure in words.
func sustainedFigures(in *inputs, pair, pg, spec string) (Figure, Figure, string) {
	_, p, ok := sustainedRate(in.rs, pair, pg, 0)
	if !ok {
		return Figure{}, Figure{}, ""
	}
	return ranged(p, pointFigure(p, scenario.MetricSustainable, pg, "/s"), pg), ranged(p, pointFigure(p, scenario.MetricSustainable, spec, "/s"), spec), p.Name
}

// ranged adds to a valid figure of the sustainable rate of side in p its
// range across rounds: rounds that disagree are shown, not averaged away.
func ranged(p *driver.Point, f Figure, side string) Figure {
	if !f.OK() {
		return f
	}
	if m := p.Find(scenario.MetricSustainable); m != nil {
		if a, ok := m.Sides[side]; ok && a.N > 1 {
			f.Lo, f.Hi = a.Min, a.Max
		}
	}
	return f
}
