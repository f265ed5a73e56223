package report

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/scenario"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// critStep is the criterion of a step that did not run to a verdict (its
// side could not be measured): not one of scenario.Criteria.
const critStep = "step"

// knee is one side's ceiling search read for the report: its knee per
// search, what stopped each search, and whether the median knee is a
// figure that may be printed as one, compared or drawn.
type knee struct {
	c      *driver.Ceiling
	status driver.Status
	// capped is true when a search climbed its whole ladder without a
	// failing step: the knee was not reached; top is the highest rate
	// any search tried.
	capped bool
	top    float64
	// bottom is the lowest rate any search measured.
	bottom float64
	// binds counts, per criterion, the searches whose first failing step
	// above their knee failed it; searches counts the searches.
	binds    map[string]int
	searches int
	// admission is true when a search was stopped by sheds: the service's
	// admission limit, not the system, set that knee.
	admission bool
}

// kneeOf reads c.
func kneeOf(c *driver.Ceiling) knee {
	k := knee{c: c, status: c.CeilingStatus(), binds: map[string]int{}, searches: len(c.Rounds)}
	for _, r := range c.Rounds {
		for _, st := range r.Steps {
			k.top = math.Max(k.top, st.Rate)
			if st.Invalid == "" && (k.bottom == 0 || st.Rate < k.bottom) {
				k.bottom = st.Rate
			}
		}
		if r.Invalid != "" {
			k.searches--
			continue
		}
		if r.Capped {
			k.capped = true
			continue
		}
		crit := binding(r)
		for _, cr := range crit {
			k.binds[cr]++
		}
		if slices.Contains(crit, scenario.CritShed) {
			k.admission = true
		}
	}
	return k
}

// stepCriteria returns the criteria step st failed: its Failed or, in
// files written before they were recorded, the one its Why names.
func stepCriteria(st driver.CeilingStep) []string {
	if st.Pass {
		return nil
	}
	if len(st.Failed) > 0 {
		return st.Failed
	}
	w := st.Why
	switch {
	case strings.HasPrefix(w, "errors "):
		return []string{scenario.CritErrors}
	case strings.HasPrefix(w, "shed "):
		return []string{scenario.CritShed}
	case strings.HasPrefix(w, "driver sent only"), w == "nothing sent":
		return []string{scenario.CritSent}
	case strings.HasPrefix(w, "backlog "):
		return []string{scenario.CritBacklog}
	case strings.Contains(w, " p99 "):
		return []string{scenario.CritP99}
	}
	return []string{critStep}
}

// binding returns the criteria that stopped search r: those its lowest
// failing step above its knee failed (nil when no step failed).
func binding(r driver.CeilingRound) []string {
	var first *driver.CeilingStep
	for i := range r.Steps {
		st := &r.Steps[i]
		if !st.Pass && st.Rate > r.Rate && (first == nil || st.Rate < first.Rate) {
			first = st
		}
	}
	if first == nil {
		return nil
	}
	return stepCriteria(*first)
}

// value is the side's median knee, or why it is no figure: the search
// failed, the knee was not reached (a lower bound only), or the
// admission limit set it (the system's knee is above it).
func (k knee) value() (float64, string) {
	switch {
	case !k.status.OK():
		return 0, k.status.String()
	case k.capped:
		return 0, fmt.Sprintf("not reached: every step passed up to %s/s", num(k.top))
	case k.admission:
		return 0, fmt.Sprintf("at least %s/s: the services' admission limit (503 sheds) stopped the search, not the system", num(k.c.Rate.Median))
	case k.c.Rate.Max == 0:
		return 0, fmt.Sprintf("no rate passed, down to %s/s", num(k.bottom))
	}
	return k.c.Rate.Median, ""
}

// mark is the chart's word for a knee that is no figure.
func (k knee) mark() string {
	switch {
	case !k.status.OK():
		return failedMark
	case k.capped:
		return "not reached"
	case k.admission:
		return "admission limit"
	}
	return ""
}

// kneeCell is the median knee with its range, or why there is none.
func kneeCell(k knee) string {
	if _, why := k.value(); why != "" {
		return md(why)
	}
	return cell(k.c.Rate, len(k.c.Rounds) > 0)
}

// critWords words criterion c of spec sp (nil: an older file's).
func critWords(c string, sp *driver.CeilingSpec) string {
	switch c {
	case scenario.CritErrors:
		return "errors"
	case scenario.CritShed:
		return "503 sheds (admission limit)"
	case scenario.CritSent:
		return "the driver fell short of the rate"
	case scenario.CritLatency:
		return "no latency recorded"
	case scenario.CritBacklog:
		return "backlog grew"
	case scenario.CritP99:
		if sp != nil {
			return "p99 over " + ms(sp.P99MS)
		}
		return "p99 over the bound"
	case scenario.CritKnee:
		if sp != nil {
			return fmt.Sprintf("p99 over %s× its low-rate p99", num(sp.KneeFactor))
		}
		return "p99 over its knee bound"
	case critStep:
		return "the step did not run"
	}
	return c
}

// bindText says which criteria stopped the searches, most often first:
// "backlog grew (3 of 3 searches), p99 over 100 ms (2 of 3)".
func (k knee) bindText() string {
	if len(k.binds) == 0 {
		if k.capped {
			return "none: the ceiling was not reached"
		}
		return notRecorded
	}
	var cs []string
	for c := range k.binds {
		cs = append(cs, c)
	}
	order := append(slices.Clone(scenario.Criteria), scenario.CritKnee, critStep)
	sort.Slice(cs, func(i, j int) bool {
		if k.binds[cs[i]] != k.binds[cs[j]] {
			return k.binds[cs[i]] > k.binds[cs[j]]
		}
		return slices.Index(order, cs[i]) < slices.Index(order, cs[j])
	})
	var parts []string
	for i, c := range cs {
		of := fmt.Sprintf("%d of %d", k.binds[c], k.searches)
		if i == 0 {
			of += " ceiling searches"
		}
		parts = append(parts, fmt.Sprintf("%s (%s)", critWords(c, k.c.Spec), of))
	}
	return strings.Join(parts, ", ")
}

// bindShort is the criterion that stopped most searches, for a chart
// label.
func (k knee) bindShort() string {
	best, n := "", 0
	for _, c := range append(slices.Clone(scenario.Criteria), scenario.CritKnee, critStep) {
		if k.binds[c] > n {
			best, n = c, k.binds[c]
		}
	}
	if best == "" {
		return ""
	}
	return critWords(best, k.c.Spec)
}

// inFlightText says which in-flight bound a search ran with.
func inFlightText(sp *driver.CeilingSpec) string {
	switch {
	case sp == nil:
		return "not recorded (the services' own bound: MAX_IN_FLIGHT, 128 by default)"
	case sp.MaxInFlight == nil:
		return "the services' own (MAX_IN_FLIGHT, 128 by default): a failing step may be the admission limit's 503s, not the system"
	case *sp.MaxInFlight == 0:
		return "MAX_IN_FLIGHT=0 (no bound): the services were restarted without one for the search"
	}
	return fmt.Sprintf("MAX_IN_FLIGHT=%d", *sp.MaxInFlight)
}

// criteriaDiff says how two sides' search criteria differ ("" when they
// agree): their knees are then no ratio of each other.
func criteriaDiff(r *driver.Run, a, b *driver.Ceiling) string {
	na, nb := SideLabel(r, a.Service), SideLabel(r, b.Service)
	switch {
	case a.Spec == nil && b.Spec == nil:
		if a.Criteria != b.Criteria {
			return fmt.Sprintf("%s's steps passed when %s; %s's when %s", na, a.Criteria, nb, b.Criteria)
		}
		return ""
	case a.Spec == nil || b.Spec == nil:
		return "the criteria were recorded for one side only"
	}
	x, y := *a.Spec, *b.Spec
	var d []string
	diff := func(what string, u, v any) {
		if fmt.Sprint(u) != fmt.Sprint(v) {
			d = append(d, fmt.Sprintf("%s %v for %s, %v for %s", what, u, na, v, nb))
		}
	}
	diff("latency judged:", x.Latency, y.Latency)
	diff("acknowledgement judged:", x.AckLatency, y.AckLatency)
	diff("step of", time.Duration(x.StepS*float64(time.Second)), time.Duration(y.StepS*float64(time.Second)))
	diff("error share", x.ErrorShare, y.ErrorShare)
	diff("shed share", x.ShedShare, y.ShedShare)
	diff("least share sent", x.SentShare, y.SentShare)
	diff("backlog bound (s of arrivals)", x.BacklogS, y.BacklogS)
	diff("backlog floor", x.BacklogMin, y.BacklogMin)
	diff("p99 bound (ms)", x.P99MS, y.P99MS)
	diff("knee factor", x.KneeFactor, y.KneeFactor)
	if x.KneeFactor > 0 && (x.LowP99MS > 0) != (y.LowP99MS > 0) {
		d = append(d, "the knee bound applied to one side only (the other had no low-rate p99)")
	}
	if ia, ib := inFlightText(&x), inFlightText(&y); ia != ib {
		d = append(d, fmt.Sprintf("in-flight bound %s for %s, %s for %s", ia, na, ib, nb))
	}
	return strings.Join(d, "; ")
}

// kneeRatio is a's knee ÷ b's ("2.8×"), or why there is none: a ratio
// compares two figures measured to the same criteria, each a knee the
// system reached.
func kneeRatio(r *driver.Run, a, b *driver.Ceiling) string {
	va, wa := kneeOf(a).value()
	vb, wb := kneeOf(b).value()
	switch {
	case wa != "":
		return fmt.Sprintf("no ratio: the %s side's ceiling is %s", who(r, a.Service), wa)
	case wb != "":
		return fmt.Sprintf("no ratio: the %s side's ceiling is %s", who(r, b.Service), wb)
	}
	if d := criteriaDiff(r, a, b); d != "" {
		return "no ratio: the two sides were not measured to the same criteria (" + d + ")"
	}
	if x := ratioOf(va, vb); x != "" {
		return x
	}
	return noRatioZero
}

// kneeLatency is the latency c's steps are judged by (fallback for files
// written before the spec was recorded).
func kneeLatency(c *driver.Ceiling, fallback string) string {
	if c.Spec != nil && c.Spec.Latency != "" {
		return c.Spec.Latency
	}
	return fallback
}

// stepInvalid says why a step's measurement is no figure ("" when it
// is): it did not run, sent or got accepted nothing, failed
// driver.FailShare of its requests or more, recorded no latency, or left
// a backlog that did not drain (its latencies miss the requests still
// queued). A valid step that failed the criteria is a point past the
// knee, and is drawn.
func stepInvalid(st driver.CeilingStep, latency string, stepS float64) string {
	m := st.Metrics
	sent := m[driver.ClientSentRate]
	crit := stepCriteria(st)
	switch {
	case st.Invalid != "":
		return "precondition: " + firstLine(st.Invalid)
	case slices.Contains(crit, critStep) || len(m) == 0:
		return "the step did not run: " + firstLine(st.Why)
	case sent <= 0:
		return "nothing sent"
	case stepS > 0 && m[driver.ClientErrors] > 0 && m[driver.ClientErrors] >= driver.FailShare*sent*stepS:
		return fmt.Sprintf("%.0f%% of the requests failed", 100*m[driver.ClientErrors]/(sent*stepS))
	case slices.Contains(crit, scenario.CritErrors):
		return fmt.Sprintf("%s%% or more of the requests failed (%s)", num(100*driver.FailShare), firstLine(st.Why))
	case m[driver.ClientOKRate] <= 0:
		return "no request was accepted"
	}
	if _, ok := m[driver.ServerLatency(latency, driver.SuffixP99)]; !ok {
		return "no " + latency + " latency recorded"
	}
	if d, ok := m[scenario.MetricDrained]; ok && d == 0 {
		return "the backlog did not drain: the latency of what was still queued is missing"
	}
	return ""
}

// curvePoint is one offered rate of a side's curve, over every search.
type curvePoint struct {
	rate float64
	// steps counts the steps at this rate, passed those that passed.
	steps, passed int
	// p50, p99 and tput (processed/s) are the median of the steps with
	// min–max; invalid says why they are no figure (any step at this
	// rate was not a valid measurement).
	p50, p99, tput xy
	invalid        string
	// crit counts the criteria the steps at this rate failed.
	crit map[string]int
}

// kneeCurve is c's latency against offered rate: every step of every
// search, by rate, ascending.
func kneeCurve(c *driver.Ceiling, latency string) []curvePoint {
	stepS := 0.0
	if c.Spec != nil {
		stepS = c.Spec.StepS
	}
	byRate := map[float64]*curvePoint{}
	vals := map[float64][3][]float64{}
	for _, r := range c.Rounds {
		for _, st := range r.Steps {
			cp := byRate[st.Rate]
			if cp == nil {
				cp = &curvePoint{rate: st.Rate, crit: map[string]int{}}
				byRate[st.Rate] = cp
			}
			cp.steps++
			if st.Pass {
				cp.passed++
			}
			for _, cr := range stepCriteria(st) {
				cp.crit[cr]++
			}
			if why := stepInvalid(st, latency, stepS); why != "" {
				if cp.invalid == "" {
					cp.invalid = why
				}
				continue
			}
			v := vals[st.Rate]
			v[0] = append(v[0], st.Metrics[driver.ServerLatency(latency, driver.SuffixP50)])
			v[1] = append(v[1], st.Metrics[driver.ServerLatency(latency, driver.SuffixP99)])
			v[2] = append(v[2], st.Metrics[scenario.MetricThroughput])
			vals[st.Rate] = v
		}
	}
	var out []curvePoint
	for rate, cp := range byRate {
		if cp.invalid != "" {
			cp.p50, cp.p99, cp.tput = xy{x: rate, failed: failedMark}, xy{x: rate, failed: failedMark}, xy{x: rate, failed: failedMark}
		} else {
			v := vals[rate]
			cp.p50, _ = agg(v[0])
			cp.p99, _ = agg(v[1])
			cp.tput, _ = agg(v[2])
			cp.p50.x, cp.p99.x, cp.tput.x = rate, rate, rate
		}
		out = append(out, *cp)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].rate < out[j].rate })
	return out
}

// curveCell is one figure of a curve point, or why there is none.
func curveCell(cp curvePoint, v xy) string {
	if cp.invalid != "" {
		return failedMark
	}
	if cp.steps <= 1 || num(v.lo) == num(v.hi) {
		return num(v.y)
	}
	return fmt.Sprintf("%s (%s–%s)", num(v.y), num(v.lo), num(v.hi))
}

// critCounts words the criteria a curve point's steps failed.
func critCounts(cp curvePoint, sp *driver.CeilingSpec) string {
	var parts []string
	for _, c := range append(slices.Clone(scenario.Criteria), scenario.CritKnee, critStep) {
		if n := cp.crit[c]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s (%d)", critWords(c, sp), n))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// KneeSection renders a run's ceiling searches, one subsection per
// operation searched (its scenario): the criteria and in-flight bound,
// each side's ceiling at the SLO with its range, the same steps read at
// the tighter SLOs, what bound the searches, each side's CPU per 1,000
// requests at the highest rate both passed, the comparison of the sides
// (a ratio only between ceilings reached under the same criteria), and
// each side's latency against offered rate, step by step.
func KneeSection(r *driver.Run) string {
	if len(r.Ceilings) == 0 {
		return ""
	}
	var b strings.Builder
	var order []driver.ScenarioName
	by := map[driver.ScenarioName][]*driver.Ceiling{}
	for i := range r.Ceilings {
		c := &r.Ceilings[i]
		if by[c.Scenario] == nil {
			order = append(order, c.Scenario)
		}
		by[c.Scenario] = append(by[c.Scenario], c)
	}
	for _, sc := range order {
		kneeScenario(&b, r, sc, by[sc])
	}
	return b.String() + "\n"
}

// ceilingTitles say what each ceiling scenario searched, for its
// heading: the operation, or the design (its environment) it ran with.
var ceilingTitles = map[string]string{
	"queue.ceiling":             "equal durability: RabbitMQ's transient messages, which the reconciler republishes after a broker restart, against the UNLOGGED queue table, rebuilt from the task records",
	"queue.logged.ceiling":      "both durable: RabbitMQ's persistent, confirmed messages against a logged queue table (QUEUE_TABLE=logged)",
	"queue.broker-only.ceiling": "RabbitMQ alone: the broker carries each task and the consumer records it (PUBLISH_MODE=broker-only), no task row per request",
	"queue.classic-v1.ceiling":  "RabbitMQ's classic queues v1 (RABBITMQ_QUEUE_VERSION=1), the tuning table's before",
	"log.kafka-go.ceiling":      "kafka-go's Writer (KAFKA_PRODUCER=kafka-go), the tuning table's before",
	"log.sync-commit.ceiling":   "an offset commit after every batch (KAFKA_COMMIT_INTERVAL=0), the tuning table's before",
	"log.partitions-6.ceiling":  "6 partitions instead of 3 (KAFKA_PARTITIONS=6)",
	"documents.search.ceiling":  "containment searches",
	"documents.write.ceiling":   "profile writes",
	"cache.read.ceiling":        "reads",
	"eventstore.append.ceiling": "appends with an expected version",
}

// unequalQueueTitle is the queue's main search in files before it ran
// at equal durability.
const unequalQueueTitle = "the services' defaults: RabbitMQ's persistent messages against the UNLOGGED queue table, not the same durability"

// ceilingTitle is the heading of run's ceiling subsection of scenario sc.
func ceilingTitle(run *driver.Run, sc driver.ScenarioName) string {
	if sc == scenario.CeilingScenarioName(pairs.Queue, "") && !equalDurability(run) {
		return "Ceilings (" + unequalQueueTitle + "): latency against offered rate"
	}
	if t, ok := ceilingTitles[string(sc)]; ok {
		return "Ceilings (" + t + "): latency against offered rate"
	}
	if op, n, ok := scenario.ParseDocumentsScaleCeiling(string(sc)); ok {
		return fmt.Sprintf("Ceilings (%s at %s users, loaded straight into the databases): latency against offered rate", ceilingTitles[string(scenario.CeilingScenarioName("documents."+op, ""))], count(int64(n)))
	}
	op := strings.TrimSuffix(strings.TrimSuffix(string(sc), ".ceiling"), "ceiling")
	if _, rest, ok := strings.Cut(op, "."); ok && rest != "" {
		return "Ceilings (" + rest + "): latency against offered rate"
	}
	return "Ceilings: latency against offered rate"
}

// kneeScenario writes one operation's ceiling searches (cs, the sides).
func kneeScenario(b *strings.Builder, r *driver.Run, sc driver.ScenarioName, cs []*driver.Ceiling) {
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	// A side left out by design, or failed before its first step (its
	// status says why), has no bound and no steps: the criteria, the
	// bound and the rate the CPU is read at are the searched sides'.
	searched := slices.DeleteFunc(slices.Clone(cs), notSearched)
	if len(searched) == 0 {
		searched = cs
	}
	c0 := searched[0]
	w("### %s\n\n", ceilingTitle(r, sc))
	w("A step passes when: %s. A side's ceiling is the highest offered rate whose step passed in a search (every rate under it passed there too); the figure is the rate a majority of its searches passed (2 of 3), with their range. The same steps read with their p99 under %s give the ceilings at the tighter SLOs. ", md(criteriaOf(c0)), sloText())
	var bounds []string
	for _, c := range searched {
		bounds = append(bounds, SideLabel(r, c.Service)+": "+inFlightText(c.Spec))
	}
	if t := inFlightText(c0.Spec); slices.ContainsFunc(searched, func(c *driver.Ceiling) bool { return inFlightText(c.Spec) != t }) {
		w("In-flight bound during the searches, per side: %s.\n\n", md(strings.Join(bounds, "; ")))
	} else {
		w("In-flight bound during the searches: %s.\n\n", md(t))
	}
	at := commonRate(searched...)
	slos := scenario.CeilingSLOs
	head := fmt.Sprintf("| service | ceiling/s at p99 < %s (range) | per search (+: the ladder's top passed) |", ms(float64(slos[len(slos)-1])/float64(time.Millisecond)))
	for i := len(slos) - 2; i >= 0; i-- {
		head += fmt.Sprintf(" at p99 < %s |", ms(float64(slos[i])/float64(time.Millisecond)))
	}
	head += " binds (searches whose first step past the ceiling failed it) | CPU-s per 1,000 requests at " + rateOrNone(at, len(searched) < len(cs)) + " |"
	w("%s\n|%s\n", head, strings.Repeat("---|", strings.Count(head, "|")-1))
	for _, c := range cs {
		k := kneeOf(c)
		row := []string{SideLabel(r, c.Service), kneeCell(k), ceilingRounds(*c)}
		for i := len(slos) - 2; i >= 0; i-- {
			row = append(row, sloCell(c, float64(slos[i])/float64(time.Millisecond)))
		}
		binds := k.bindText()
		if !slices.Contains(searched, c) {
			binds = c.CeilingStatus().String()
		}
		row = append(row, binds, cpuCostAt(c, c.Service, at).String())
		w("| %s |\n", strings.Join(mdAll(row), " | "))
	}
	if len(cs) == 2 {
		w("\n%s ÷ %s ceiling: %s.\n", SideLabel(r, cs[0].Service), SideLabel(r, cs[1].Service), md(kneeRatio(r, cs[0], cs[1])))
	}
	lat := ""
	if ps, ok := pairSides[r.Command]; ok {
		lat = ps.latency
	}
	for _, c := range cs {
		kneeCurveTable(b, r, c, kneeLatency(c, lat))
	}
}

// rateOrNone is a common rate for a heading, or why there is none.
// skipped says some side was left out by design: the rate is the
// searched sides'.
func rateOrNone(rate float64, skipped bool) string {
	switch {
	case rate <= 0:
		return "a rate both passed (none: each side at its own highest passing rate)"
	case skipped:
		return num(rate) + "/s, the highest rate every searched side passed"
	}
	return num(rate) + "/s, the highest rate every side passed"
}

// kneeCurveTable writes one side's latency against offered rate.
func kneeCurveTable(b *strings.Builder, r *driver.Run, c *driver.Ceiling, l string) {
	curve := kneeCurve(c, l)
	if len(curve) == 0 {
		return
	}
	fmt.Fprintf(b, "\n#### %s: %s latency against offered rate\n\n", SideLabel(r, c.Service), l)
	b.WriteString("| offered/s | steps | p50 ms | p99 ms | processed/s | passed | criteria failed (steps) |\n|---|---|---|---|---|---|---|\n")
	for _, cp := range curve {
		row := []string{num(cp.rate), fmt.Sprint(cp.steps), curveCell(cp, cp.p50), curveCell(cp, cp.p99), curveCell(cp, cp.tput),
			fmt.Sprintf("%d of %d", cp.passed, cp.steps), critCounts(cp, c.Spec)}
		if cp.invalid != "" {
			row[2] = "failed: " + cp.invalid
		}
		fmt.Fprintf(b, "| %s |\n", strings.Join(mdAll(row), " | "))
	}
}

// mdAll escapes every cell.
func mdAll(cells []string) []string {
	out := make([]string, len(cells))
	for i, c := range cells {
		out[i] = md(c)
	}
	return out
}

// keptUpBound is the latency and p99 bound (ms) a fixed-rate point of
// scenario sc must hold to count as kept up: its pair's ceiling bound,
// as declared (ok false for a pair without one).
func keptUpBound(sc driver.ScenarioName) (latency string, p99MS float64, ok bool) {
	pair, _, _ := strings.Cut(string(sc), ".")
	var o scenario.CeilingOptions
	switch pair {
	case pairs.Queue:
		o = scenario.QueueScenario.Defaults.CeilingOpts
	case pairs.Log:
		o = scenario.LogScenario.Defaults.CeilingOpts
	default:
		return "", 0, false
	}
	return pairSides[pair].latency, float64(o.P99) / float64(time.Millisecond), true
}

// keptUpMiss says which of the ceilings' criteria side of fixed-rate
// point p missed besides its throughput ("" when none): sheds of
// driver.FailShare or more of the requests sent in any round, or a
// median p99 at or over the ceilings' bound.
func keptUpMiss(p *driver.Point, side string) string {
	for _, rd := range p.Rounds {
		sr := rd.Sides[side]
		if sr == nil || p.DurationS <= 0 {
			continue
		}
		sent, shed := sr.Metrics[driver.ClientSentRate], sr.Metrics[driver.ClientShed]
		if sent > 0 && shed > 0 && shed >= driver.FailShare*sent*p.DurationS {
			return fmt.Sprintf("shed %s of the requests sent in round %d", percentOf(shed, sent*p.DurationS), rd.Index)
		}
	}
	if lat, bound, ok := keptUpBound(p.Scenario); ok {
		if v, has := median(p, driver.ServerLatency(lat, driver.SuffixP99), side); has && v >= bound {
			return fmt.Sprintf("%s p99 %s, over the ceilings' %s bound", lat, ms(v), ms(bound))
		}
	}
	return ""
}

// keptUpRule words what kept up means at p.
func keptUpRule(p *driver.Point) string {
	s := fmt.Sprintf("%s%% of the rate processed, under %s%% shed in every round", num(100*keptUpShare), num(100*driver.FailShare))
	if lat, bound, ok := keptUpBound(p.Scenario); ok {
		s += fmt.Sprintf(", %s p99 under %s", lat, ms(bound))
	}
	return s
}

// equalDurability reports whether run's main queue search ran RabbitMQ
// with transient messages (its recorded ceiling environment), the
// durability of the UNLOGGED queue table.
func equalDurability(run *driver.Run) bool {
	var env map[string]map[string]string
	if run == nil || run.Setting("ceiling_env", &env) != nil {
		return false
	}
	return env[pairs.RabbitMQ]["DELIVERY_MODE"] == "transient"
}
