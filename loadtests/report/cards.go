package report

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/eventstore"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/experiments"
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
	// a figure without one. N is how many rounds or searches they span
	// (0 when not recorded).
	Lo, Hi float64
	N      int
	// AtLeast marks a lower bound: the search passed its ladder's top,
	// so the system's ceiling is Value or more.
	AtLeast bool
}

// OK reports whether the figure holds a valid value.
func (f Figure) OK() bool { return f.Why == "" }

// String is the value with its unit, or why there is none; a failed
// figure is never printed as a number.
func (f Figure) String() string {
	if !f.OK() {
		return f.Why
	}
	v := num(f.Value)
	if f.AtLeast {
		v = "≥ " + v
	}
	if f.Hi > f.Lo {
		return fmt.Sprintf("%s%s (%s–%s across rounds)", v, f.Unit, num(f.Lo), num(f.Hi))
	}
	return v + f.Unit
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
	// PGRate and SpecRate are the single-request ceilings (items/s): the
	// highest rate a majority of searches passed with every absolute
	// check of a step holding, with the searches' range; RateOp says how
	// the items came ("sent one per request").
	PGRate, SpecRate Figure
	RateOp           string
	// PGSLO and SpecSLO are the same searches read at each of
	// scenario.CeilingSLOs, in its order (empty when no search ran).
	PGSLO, SpecSLO []Figure
	// SpecOverload is what the specialist served at 5× its own ceiling
	// ("" when not measured).
	SpecOverload string
	// Guarantee says under which durability the ceilings were measured
	// ("" when the pair has nothing to say); Designs are the pair's other
	// ceiling searches, one sentence each (the same guarantee at a higher
	// price, the specialist alone, the tuning's before).
	Guarantee string
	Designs   []string
	// RateCriterion is the rule those rates held ("server processing
	// p99 < 100 ms, errors and sheds < 1%, backlog flat"), "" when no
	// search ran.
	RateCriterion string
	// PGSustained and SpecSustained are the sustainable rates (open
	// loop, batched: backlog flat, end-to-end p99 under the SLO, median
	// of the rounds) at SustainedAt ("batch 100"), the batch size where
	// Postgres' was highest; SustainedAt is "" when none was searched.
	PGSustained, SpecSustained Figure
	SustainedAt                string
	// MaxRate is the highest rate any measurement of the pair offered,
	// batches included: the top of the measured range (0 when none);
	// MaxRateHow says how it was offered (" in batches of 100", "").
	MaxRate    float64
	MaxRateHow string
	// PGCPU and SpecCPU are each design's CPU-seconds per 1,000 requests
	// (one item each) at CPUAt items/s, the highest rate both ceilings
	// passed, by process: the specialist's process apart from the
	// service and Postgres (when they passed no rate in common, each at
	// its own highest passing rate, CPUCost.Own).
	PGCPU, SpecCPU CPUCost
	CPUAt          float64
	// Roles are the cache card's sentences on the roles beyond the cache
	// (locks, pub/sub, rate limits), one each; nil for the other pairs.
	Roles []string
	// Beyond are the documents card's clauses on what the pair does
	// beyond CRUD (experiments.CardClauses of the newest beyond-CRUD
	// file), nil for the other pairs and when none ran.
	Beyond []string
	// RoleLimits are the same roles' figures, for advise: one per pub/sub
	// subscriber count, one for locks and one for rate limits, each only
	// when measured; nil for the other pairs.
	RoleLimits []RoleLimit
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
	// AltSide, when set, is an alternative to the specialist measured
	// in the same ceiling search (AltName, doing AltWhat): the event
	// store measures Kafka where KurrentDB did not run. Where the
	// specialist's CPU is not measured, rates compares Postgres' CPU
	// with the alternative's, AltCPU, at CPUAt, and the card's cost
	// names both.
	AltSide, AltName, AltWhat string
	AltCPU                    *CPUCost
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
// store's among them) and the raw results, in card order (the report's
// order of pairs, pairReports).
func Verdicts(all []*driver.Run, src ...Sources) []Verdict {
	all, bench := splitBench(all)
	validate(all)
	in := newInputs(all, eventStoreOf(bench), src...)
	return verdictsOf(in)
}

// verdictsOf returns the verdicts of the pairs with a card (a pair
// entry's verdict), in the report's order, with what their entries say
// (section, write-up, card chart) and their failover and durability
// lines read from the inputs' sources.
func verdictsOf(in *inputs) []Verdict {
	var vs []Verdict
	for _, p := range pairReports() {
		if p.verdict == nil {
			continue
		}
		v := p.verdict(in)
		v.Section = p.Title
		v.Doc, v.Chart = "docs/"+p.Name+".md", "docs/results/"+CardFile(p.Name)
		v.Failover = failoverText(v.Pair, in.src.FailoverParts)
		v.LoseNothing = loseNothingText(v.Pair, in.src.Durability)
		vs = append(vs, v)
	}
	return vs
}

// newInputs indexes the runs for the findings and the verdicts.
func newInputs(all []*driver.Run, es eventstore.Results, src ...Sources) *inputs {
	in := &inputs{rs: runs{}, es: es, claims: ClaimsFrom(all, first1(src)), src: first1(src)}
	for _, r := range all {
		in.rs[r.Command] = r
	}
	if es.Ceiling != nil {
		// A bench's run, read like a pair's for its ceiling.
		es.Ceiling.Validate()
		in.rs[es.Ceiling.Command] = es.Ceiling
	}
	for _, c := range pairCommands() {
		if r := in.rs[c]; r != nil {
			in.order = append(in.order, r)
		}
	}
	return in
}

// SpecName is the name the specialist's figures are printed under: the
// stand-in's own name when one answered in its place.
func (v Verdict) SpecName() string {
	if v.SpecConfidence == StandInFerretDB {
		return "FerretDB (standing in for MongoDB)"
	}
	return v.Specialist
}

// rateSource is where a pair's single-request ceiling is read: the
// results command and ceiling scenario, and what one request is.
type rateSource struct {
	cmd      string
	scenario driver.ScenarioName
	op       string
}

// ceilingSource is where the named pair's single-request ceiling is read
// (its entry's ceiling).
func ceilingSource(pair string) rateSource {
	p, _ := reportOf(pair)
	return p.ceiling
}

// EventStoreCeilingCommand is the results command (and file suffix) of
// the event store's single-request ceiling search.
const EventStoreCeilingCommand = eventstore.CeilingCommand

// rates fills v's single-request figures from its pair's ceiling
// searches of pg and spec: the ceilings with their ranges, the same
// searches at every SLO, the rule, and each design's CPU by process at
// the highest rate both passed (Postgres' and AltSide's, when the
// specialist's CPU is not measured and the card names an alternative).
func (v *Verdict) rates(in *inputs, pg, spec string) {
	src := ceilingSource(v.Pair)
	v.RateOp = src.op
	pc, sc := in.rs.ceilingOf(src.cmd, src.scenario, pg), in.rs.ceilingOf(src.cmd, src.scenario, spec)
	v.PGRate, v.SpecRate = ceilingFig(pc), ceilingFig(sc)
	if pc != nil && pc.Spec != nil {
		v.RateCriterion = ruleText(pc.Spec)
	}
	if pc != nil || sc != nil {
		for _, slo := range scenario.CeilingSLOs {
			ms := float64(slo.Milliseconds())
			v.PGSLO, v.SpecSLO = append(v.PGSLO, sloFig(pc, ms)), append(v.SpecSLO, sloFig(sc, ms))
		}
	}
	v.CPUAt = commonRate(pc, sc)
	v.PGCPU, v.SpecCPU = cpuCostAt(pc, pg, v.CPUAt), cpuCostAt(sc, spec, v.CPUAt)
	if v.AltSide != "" && !v.SpecCPU.Design.OK() {
		if ac := in.rs.ceilingOf(src.cmd, src.scenario, v.AltSide); ac != nil {
			v.CPUAt = commonRate(pc, ac)
			v.PGCPU = cpuCostAt(pc, pg, v.CPUAt)
			alt := cpuCostAt(ac, v.AltSide, v.CPUAt)
			v.AltCPU = &alt
		}
	}
	v.MaxRate, v.MaxRateHow = maxOffered(in, v.Pair)
	v.Designs = designLines(in, src, pg, spec, v.SpecName())
}

// designLines words every other ceiling scenario of the pair's run: its
// title and each side's ceiling.
func designLines(in *inputs, src rateSource, pg, spec, specName string) []string {
	r := in.rs[src.cmd]
	if r == nil {
		return nil
	}
	var out []string
	seen := map[driver.ScenarioName]bool{src.scenario: true}
	for i := range r.Ceilings {
		sc := r.Ceilings[i].Scenario
		if seen[sc] {
			continue
		}
		seen[sc] = true
		var parts []string
		for _, side := range []string{pg, spec} {
			if c := in.rs.ceilingOf(src.cmd, sc, side); c != nil {
				name := specName
				if side == pg {
					name = "Postgres"
				}
				parts = append(parts, passedText(name, ceilingFig(c)))
			}
		}
		title := strings.TrimSuffix(strings.TrimPrefix(ceilingTitle(r, sc), "Ceilings ("), "): latency against offered rate")
		out = append(out, fmt.Sprintf("%s: %s", title, strings.Join(parts, ", ")))
	}
	return out
}

// ruleText is a ceiling's rule in a card: the latency bound and the
// checks beside it, the same for both sides.
func ruleText(sp *driver.CeilingSpec) string {
	s := fmt.Sprintf("the rule for both sides: server %s p99 < %s, errors and sheds < %s, backlog flat over %s steps",
		scenario.JudgedLatencies(*sp), ms(sp.P99MS), percent(sp.ErrorShare), driver.Human(time.Duration(sp.StepS*float64(time.Second))))
	if sp.KneeFactor > 0 {
		s += fmt.Sprintf(", and ≤ %s× the side's own low-rate p99 (the relative rule of files before 5 December 2026)", num(sp.KneeFactor))
	}
	return s
}

// ceilingFig is a ceiling search as a card figure: the rate a majority of
// its searches passed with their range, a lower bound when the ladder's
// top passed, or why there is no figure.
func ceilingFig(c *driver.Ceiling) Figure {
	if c == nil {
		return noFigure("/s")
	}
	if st := c.CeilingStatus(); !st.OK() {
		return failedFigure("/s", st)
	}
	k := kneeOf(c)
	if k.capped {
		return Figure{Value: k.top, Unit: "/s", AtLeast: true, N: len(validRounds(c))}
	}
	v, why := k.value()
	if why != "" {
		return Figure{Unit: "/s", Why: why}
	}
	return Figure{Value: v, Unit: "/s", Lo: c.Rate.Min, Hi: c.Rate.Max, N: c.Rate.N}
}

// sloFig is c read at sloMS as a card figure.
func sloFig(c *driver.Ceiling, sloMS float64) Figure {
	if c == nil {
		return noFigure("/s")
	}
	if st := c.CeilingStatus(); !st.OK() {
		return failedFigure("/s", st)
	}
	a, ok := sloCeiling(c, sloMS)
	switch {
	case !ok:
		return noFigure("/s")
	case a.Max == 0:
		return Figure{Unit: "/s", Why: "no rate passed"}
	case a.Median == 0:
		return Figure{Unit: "/s", Why: fmt.Sprintf("no rate passed in a majority of ceiling searches (the best: %s/s)", count(int64(a.Max)))}
	}
	return Figure{Value: a.Median, Unit: "/s", Lo: a.Min, Hi: a.Max, N: a.N}
}

// maxOffered is the highest rate any measurement of pair offered, single
// requests or batches, and how ("" or " in batches of N").
func maxOffered(in *inputs, pair string) (float64, string) {
	best, how := 0.0, ""
	see := func(rate float64, h string) {
		if rate > best {
			best, how = rate, h
		}
	}
	for _, cmd := range []string{pair, ceilingSource(pair).cmd} {
		r := in.rs[cmd]
		if r == nil {
			continue
		}
		for _, c := range r.Ceilings {
			if !offersItem(pair, c.Scenario) {
				continue
			}
			for _, rd := range c.Rounds {
				for _, st := range rd.Steps {
					see(st.Rate, "")
				}
			}
		}
		for _, p := range r.Points {
			if !strings.Contains(p.Name, "ceiling") {
				see(p.Rate, "")
			}
			if v, ok := pointMax(p, scenario.MetricOfferedRate); ok {
				see(v, "")
			}
		}
	}
	for _, p := range in.rs.points(scenario.ThroughputCommand, scenario.SustainScenarioName(pair)) {
		for _, rd := range p.Rounds {
			for _, sr := range rd.Sides {
				for k, v := range sr.Metrics {
					if strings.HasSuffix(string(k), "."+scenario.MetricOffered) {
						see(v, fmt.Sprintf(" in batches of %d", batchOf(p)))
					}
				}
			}
		}
	}
	return best, how
}

// offersItem reports whether the ceiling search sc of pair offers the
// pair's item (its verdict's Item): the documents pair's searches do,
// its profile writes (documents.write.*) do not.
func offersItem(pair string, sc driver.ScenarioName) bool {
	return pair != pairs.Documents || strings.HasPrefix(string(sc), pairs.Documents+".search.")
}

// pointMax is the largest of metric over p's sides (any round).
func pointMax(p driver.Point, metric driver.Metric) (float64, bool) {
	m := p.Find(metric)
	if m == nil {
		return 0, false
	}
	best, ok := 0.0, false
	for _, a := range m.Sides {
		best, ok = max(best, a.Max), true
	}
	return best, ok
}

// overloadText is what side served at 5× its own ceiling, from the
// pair's overload point ("" when not measured or not valid).
func overloadText(in *inputs, pair, side, name, verb string) string {
	p := in.rs.point(pair, scenario.PairScenarioName(pair, scenario.KindOverload), "5× ceiling")
	if p == nil || !p.SideStatus(side).OK() {
		return ""
	}
	offered, ok1 := median(p, scenario.MetricOfferedRate, side)
	acc, ok2 := median(p, scenario.MetricAcceptedRate, side)
	tp, ok3 := median(p, scenario.MetricThroughput, side)
	pct, ok4 := median(p, scenario.MetricPctOfCeiling, side)
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return ""
	}
	return fmt.Sprintf("offered 5× its own ceiling (%s/s), %s accepted %s/s and %s %s/s during the attack (%s%% of its ceiling)",
		count(int64(offered)), name, count(int64(acc)), verb, count(int64(tp)), num(pct))
}

// pointFigure is a side's median of metric at p, or why there is none.
func pointFigure(p *driver.Point, metric driver.Metric, side, unit string) Figure {
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
		PayloadBytes: []float64{typicalPayload},
		SpecOnly:     []string{"routing by pattern (topic and header exchanges)", "many queues"},
		LatencyWhat:  "delivery p99",
	}
	if r := in.rs[pairs.Queue]; r != nil {
		v.SpecServer = rabbitVersion(r.Versions)
	}
	v.rates(in, pairs.NoRabbitMQ, pairs.RabbitMQ)
	v.Guarantee = unequalQueueTitle
	if equalDurability(in.rs[pairs.Queue]) {
		v.Guarantee = ceilingTitles["queue.ceiling"]
	}
	v.SpecOverload = overloadText(in, pairs.Queue, pairs.RabbitMQ, "RabbitMQ", "processed")
	v.PGSustained, v.SpecSustained, v.SustainedAt = sustainedFigures(in, pairs.Queue, pairs.NoRabbitMQ, pairs.RabbitMQ)
	v.Claims = claimCount(in.claims, pairs.Queue)
	best, _ := highestKeptUp(in.rs, pairs.Queue, scenario.RateScenarioName(pairs.Queue))
	v.PGLatency, v.SpecLatency = pointFigure(best, driver.ServerDeliveryP99, pairs.NoRabbitMQ, " ms"), pointFigure(best, driver.ServerDeliveryP99, pairs.RabbitMQ, " ms")
	if best != nil {
		v.LatencyWhat = "delivery p99 at " + best.Name
	}
	v.Bites = "every `NOTIFY` serializes commits"
	if past := pastCeiling(in.rs.points(pairs.Queue, scenario.RateScenarioName(pairs.Queue)), pairs.NoRabbitMQ, "tasks"); past != "" {
		v.Bites = past + "; " + v.Bites
	}
	return v
}

// pastCeiling says what the first fixed rate whose point side did not
// keep up shows: a backlog that grew (the only case called falling
// behind), or sheds of its admission limit, or a p99 over the ceilings'
// bound; "" when it kept up at every fixed rate.
func pastCeiling(ps []*driver.Point, side, item string) string {
	for _, p := range ps {
		if p.Rate <= 0 || !p.SideStatus(side).OK() {
			continue
		}
		if b, ok := median(p, scenario.MetricBacklogEnd, side); ok && b > flatBacklog(p.Rate) {
			return fmt.Sprintf("past its ceiling the backlog grows (at %s: %s %s left at the end of the step)", p.Name, count(int64(b)), item)
		}
		if sideKeptUp(p, side) {
			continue
		}
		if miss := keptUpMiss(p, side); miss != "" {
			return fmt.Sprintf("past its ceiling it stops keeping up (at %s: %s)", p.Name, miss)
		}
		tp, _ := median(p, scenario.MetricThroughput, side)
		return fmt.Sprintf("past its ceiling it processes less than it is sent (at %s: %s/s)", p.Name, num(tp))
	}
	return ""
}

// flatBacklog is the most backlog a step at rate may end with and still
// be flat, by the ceiling steps' own bound (scenario.FlatBacklog).
func flatBacklog(rate float64) float64 { return scenario.FlatBacklog(rate) }

func logVerdict(in *inputs) Verdict {
	v := Verdict{Pair: pairs.Log, Title: "Log", Specialist: "Kafka", Item: "events", SpecConfidence: MeasuredHere,
		PayloadBytes: []float64{typicalPayload},
		SpecOnly:     []string{"partitions for parallel consumers of one group", "replay from any offset", "retention"},
		LatencyWhat:  "delivery p95",
	}
	if r := in.rs[pairs.Log]; r != nil {
		v.SpecServer = "Kafka " + orWhy(r.Versions.Kafka, r.Versions.Errors["kafka"])
	}
	v.rates(in, pairs.NoKafka, pairs.Kafka)
	v.SpecOverload = overloadText(in, pairs.Log, pairs.Kafka, "Kafka", "delivered")
	v.Claims = claimCount(in.claims, pairs.Log)
	v.PGSustained, v.SpecSustained, v.SustainedAt = sustainedFigures(in, pairs.Log, pairs.NoKafka, pairs.Kafka)
	ps := in.rs.points(pairs.Log, scenario.RateScenarioName(pairs.Log))
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
		SpecOnly:    []string{"frequent whole rewrites of large documents", "queries other than containment (`@>`) served by an index", "sharded writes"},
		LatencyWhat: "containment search p95",
	}
	v.Claims = claimCount(in.claims, pairs.Documents)
	v.Beyond = experiments.CardClauses(in.src.BeyondCRUD)
	r := in.rs[pairs.Documents]
	if r != nil && r.Versions.MongoFlavor == "FerretDB" {
		v.SpecConfidence = StandInFerretDB
	}
	v.rates(in, pairs.NoMongoDB, pairs.MongoDB)
	p := in.rs.point(pairs.Documents, scenario.PairScenarioName(pairs.Documents, scenario.KindSearch), "")
	v.PGLatency, v.SpecLatency = pointFigure(p, driver.ServerSearchP95, pairs.NoMongoDB, " ms"), pointFigure(p, driver.ServerSearchP95, pairs.MongoDB, " ms")
	if p != nil {
		v.LatencyWhat += " at " + p.Name
		if n := searchesPerRound(p, pairs.NoMongoDB); n > 0 {
			// A p95 of a few searches is nearly their slowest: say so.
			v.LatencyWhat += fmt.Sprintf(" (%s/s, %d searches per round)", num(p.Rate), n)
		}
	}
	src := ceilingSource(pairs.Documents)
	if v.CPUAt > 0 {
		pc, sc := in.rs.ceilingOf(src.cmd, src.scenario, pairs.NoMongoDB), in.rs.ceilingOf(src.cmd, src.scenario, pairs.MongoDB)
		key := driver.ServerLatency("search", driver.SuffixP99)
		v.PGLatency, v.SpecLatency = stepFigure(pc, v.CPUAt, key, " ms"), stepFigure(sc, v.CPUAt, key, " ms")
		v.LatencyWhat = fmt.Sprintf("containment search p99 at %s/s (the ceiling steps at the highest rate both passed)", count(int64(v.CPUAt)))
	}
	var sizes []string
	for _, p := range in.rs.points(pairs.Documents, scenario.PairScenarioName(pairs.Documents, scenario.KindRewrite)) {
		if b := sizeOf(p.Name); b > 0 {
			v.PayloadBytes = append(v.PayloadBytes, b)
		}
		f := pointFigure(p, scenario.MetricCostRatioP50, pairs.NoMongoDB, "×")
		sizes = append(sizes, p.Name+" "+f.String())
	}
	v.Bites = "a large profile is rewritten whole (TOAST), even for a neighbour column"
	if len(sizes) > 0 {
		v.Shape = "rewrite ÷ patch p50 on Postgres: " + strings.Join(sizes, "; ")
		v.Bites += ": " + v.Shape
	}
	return v
}

// searchesPerRound is the requests side's first round of p sent.
func searchesPerRound(p *driver.Point, side string) int {
	for _, r := range p.Rounds {
		if sr := r.Sides[side]; sr != nil {
			for _, ph := range sr.Phases {
				return int(ph.Client.Requests)
			}
		}
	}
	return 0
}

// stepFigure is the median of metric over c's passing valid steps at
// rate, or why there is none.
func stepFigure(c *driver.Ceiling, rate float64, metric driver.Metric, unit string) Figure {
	if c == nil {
		return noFigure(unit)
	}
	var vs []float64
	for _, r := range validRounds(c) {
		for _, st := range r.Steps {
			if v, ok := st.Metrics[metric]; ok && st.Pass && st.Rate == rate {
				vs = append(vs, v)
			}
		}
	}
	if len(vs) == 0 {
		return Figure{Unit: unit, Why: fmt.Sprintf("not measured: no passing step at %s/s recorded it", num(rate))}
	}
	return Figure{Value: driver.Median(vs), Unit: unit}
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
		SpecOnly:    []string{"server-side projections", "persistent subscriptions managed by the server"},
		LatencyWhat: "live delivery p50 to a caught-up subscriber",
		SpecLatency: Figure{Why: "not run"},
		AltSide:     pairs.KafkaEventStore, AltName: "Kafka", AltWhat: "unconditional appends",
	}
	v.rates(in, pairs.NoKurrentDB, pairs.KurrentDB)
	if !v.SpecRate.OK() && v.SpecRate.Why == "not measured" {
		v.SpecRate.Why = "not run"
	}
	rta := eventstore.ReadThenAppend
	if pg := appendRows(in.es, rta, pairs.NoKurrentDB, ""); len(pg) > 0 {
		if c, ok := conflictShare(pg); ok {
			v.Bites = fmt.Sprintf("concurrent writers to one stream: %s of read-then-append attempts (%d workers) refused as version conflicts (409)", percent(c), in.es.Append.Options.Workers)
		}
	}
	if f := appendFailure(in.es, rta, pairs.KafkaEventStore); f != "" {
		v.Alt = "Kafka is no substitute here: its read-then-append " + f
	} else if e := engine(in.es, pairs.KafkaEventStore); e != nil && e.Up && !e.Conditional {
		v.Alt = "Kafka is no substitute here: it cannot check an expected version"
		if k := in.rs.ceilingOf(EventStoreCeilingCommand, ceilingSource(pairs.EventStore).scenario, pairs.KafkaEventStore); k != nil {
			v.Alt += fmt.Sprintf(" (its unconditional appends: %s)", rateFigure(ceilingFig(k)))
		}
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
		// Pub/sub is measured on both sides (Roles), not assumed Redis'.
		SpecOnly:    []string{"data structures", "eviction policies", "one cache shared by every instance without a database round trip"},
		LatencyWhat: "one lookup by key, p50",
	}
	if r := in.rs[pairs.Cache]; r != nil {
		v.SpecServer = "Redis " + orWhy(r.Versions.Redis, r.Versions.Errors["redis"])
	}
	v.Claims = claimCount(in.claims, pairs.Cache)
	v.rates(in, pairs.NoRedis, pairs.Redis)
	raw := in.rs.point(pairs.Cache, scenario.CacheRawScenario, "")
	v.PGLatency, v.SpecLatency = pointFigure(raw, driver.ClientP50, scenario.RawSidePostgres, " ms"), pointFigure(raw, driver.ClientP50, scenario.RawSideRedis, " ms")
	v.Roles = rolesLines(in.rs)
	v.RoleLimits = roleLimits(in.rs)
	v.Bites = "a mode bound by a TTL serves the old value until the TTL ends"
	if p := in.rs.point(pairs.Cache, scenario.CacheStalenessScenario, ""); p != nil {
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
