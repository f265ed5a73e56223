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

// ceilingOf is the ceiling search of service under scenario in the run of
// cmd ("" scenario: the service's first search), or nil (a search with
// neither rounds nor a status saying why is none).
func (rs runs) ceilingOf(cmd string, sc driver.ScenarioName, service string) *driver.Ceiling {
	r := rs[cmd]
	if r == nil {
		return nil
	}
	for i := range r.Ceilings {
		c := &r.Ceilings[i]
		// A search without rounds counts when its status says why
		// (notSearched): its figure is that reason.
		if c.Service == service && (len(sc) == 0 || c.Scenario == sc) && (len(c.Rounds) > 0 || notSearched(c)) {
			return c
		}
	}
	return nil
}

// notSearched reports whether c has no rounds and a status that says
// why: left out by design (skipped) or failed before its first step.
func notSearched(c *driver.Ceiling) bool {
	return len(c.Rounds) == 0 && c.Status != nil && !c.Status.OK()
}

// validRounds are c's searches that started from a proven state.
func validRounds(c *driver.Ceiling) []driver.CeilingRound {
	var out []driver.CeilingRound
	for _, r := range c.Rounds {
		if r.Invalid == "" {
			out = append(out, r)
		}
	}
	return out
}

// roundAtSLO is the highest rate of search r whose step passed with the
// p99 of each of latencies under sloMS, every step of r at a lower rate
// passing with its p99s under sloMS too (the same steps judged at a
// tighter SLO); 0 when none did. An empty latency is not judged.
func roundAtSLO(r driver.CeilingRound, sloMS float64, latencies ...string) float64 {
	steps := slices.Clone(r.Steps)
	sort.SliceStable(steps, func(i, j int) bool { return steps[i].Rate < steps[j].Rate })
	best := 0.0
	under := func(st driver.CeilingStep) bool {
		for _, l := range latencies {
			if l == "" {
				continue
			}
			p99, ok := st.Metrics[driver.ServerLatency(l, driver.SuffixP99)]
			if !ok || p99 >= sloMS {
				return false
			}
		}
		return true
	}
	for _, st := range steps {
		if !st.Pass || !under(st) {
			break
		}
		best = st.Rate
	}
	return best
}

// sloCeiling is c read at sloMS: each valid search's highest rate with
// its p99 under sloMS (roundAtSLO), aggregated as the published rate (the
// one a majority passed, driver.RateAgg); ok false without valid
// searches or without a spec naming the latency.
func sloCeiling(c *driver.Ceiling, sloMS float64) (driver.Agg, bool) {
	if c == nil || c.Spec == nil || c.Spec.Latency == "" {
		return driver.Agg{}, false
	}
	var rates []float64
	for _, r := range validRounds(c) {
		if c.Spec.P99MS > 0 && sloMS >= c.Spec.P99MS {
			rates = append(rates, r.Rate)
			continue
		}
		rates = append(rates, roundAtSLO(r, sloMS, c.Spec.Latency, c.Spec.AckLatency))
	}
	if len(rates) == 0 {
		return driver.Agg{}, false
	}
	return driver.RateAgg(rates), true
}

// sloCell is c's ceiling at sloMS for a table: the published rate with
// its range, "none passed" when no search passed a step under it, or why
// there is no figure.
func sloCell(c *driver.Ceiling, sloMS float64) string {
	if st := c.CeilingStatus(); !st.OK() {
		return md(st.String())
	}
	a, ok := sloCeiling(c, sloMS)
	switch {
	case !ok:
		return notRecorded
	case a.Max == 0:
		return "no rate passed"
	case a.Median == 0:
		return fmt.Sprintf("no rate passed in a majority of ceiling searches (the best: %s)", num(a.Max))
	}
	return cell(a, true)
}

// specialistGroup is the process group of the specialist a side runs on
// ("" for a Postgres side): what its CPU is counted under in a step.
var specialistGroup = map[string]string{
	pairs.RabbitMQ: "rabbitmq", pairs.Kafka: "kafka", pairs.KafkaEventStore: "kafka",
	pairs.MongoDB: "ferretdb", pairs.Redis: "redis",
}

// cpuGroups are the process groups of a side's design, in the order a
// card names them: its specialist (if any), its service, Postgres.
func cpuGroups(side string) []string {
	gs := []string{"service", "postgres"}
	if g := specialistGroup[side]; g != "" {
		gs = append([]string{g}, gs...)
	}
	return gs
}

// commonRate is the highest rate at which every ceiling of cs has a
// passing valid step: the rate their CPU per 1,000 items is compared at
// (0 when there is none).
func commonRate(cs ...*driver.Ceiling) float64 {
	var common map[float64]bool
	for _, c := range cs {
		if c == nil {
			return 0
		}
		mine := passedRates(c)
		if common == nil {
			common = mine
			continue
		}
		for r := range common {
			if !mine[r] {
				delete(common, r)
			}
		}
	}
	best := 0.0
	for r := range common {
		best = math.Max(best, r)
	}
	return best
}

// cpuAt is the median CPU-seconds per 1,000 requests of group over c's
// passing valid steps at rate, and the design's total (the sum over
// groups, step by step); ok false when no such step recorded every group.
func cpuAt(c *driver.Ceiling, rate float64, groups []string) (parts map[string]float64, total float64, ok bool) {
	per := map[string][]float64{}
	var totals []float64
	for _, r := range validRounds(c) {
		for _, st := range r.Steps {
			if !st.Pass || st.Rate != rate {
				continue
			}
			sum, all := 0.0, true
			for _, g := range groups {
				v, has := st.Metrics[scenario.MetricCPUPerThousand(g)]
				if !has {
					all = false
					break
				}
				sum += v
			}
			if !all {
				continue
			}
			for _, g := range groups {
				per[g] = append(per[g], st.Metrics[scenario.MetricCPUPerThousand(g)])
			}
			totals = append(totals, sum)
		}
	}
	if len(totals) == 0 {
		return nil, 0, false
	}
	parts = map[string]float64{}
	for g, vs := range per {
		parts[g] = driver.Median(vs)
	}
	return parts, driver.Median(totals), true
}

// CPUCost is one side's CPU per 1,000 requests at a rate, by process
// group and for its whole design.
type CPUCost struct {
	// Rate is the offered rate the steps ran at (0: not measured).
	Rate float64
	// Design is the sum over the side's groups; Parts each group's, in
	// Groups' order.
	Design Figure
	Groups []string
	Parts  map[string]float64
	// Own says Rate is the side's own highest passing rate, not one both
	// sides passed (they passed none in common).
	Own bool
}

// ownRate is the highest rate a valid search of c passed a step at, at
// or under c's ceiling (the rate a majority of its searches passed): one
// search can pass a step above the ceiling, and a cost read there would
// be at a rate the side does not sustain. 0 when none.
func ownRate(c *driver.Ceiling) float64 {
	top := c.Rate.Median
	if k := kneeOf(c); k.capped {
		top = k.top
	}
	best := 0.0
	for r := range passedRates(c) {
		if r <= top {
			best = math.Max(best, r)
		}
	}
	return best
}

// passedRates are the rates a valid search of c passed a step at.
func passedRates(c *driver.Ceiling) map[float64]bool {
	out := map[float64]bool{}
	for _, r := range validRounds(c) {
		for _, st := range r.Steps {
			if st.Pass {
				out[st.Rate] = true
			}
		}
	}
	return out
}

// cpuCostAt is side's CPU cost from c at common, the highest rate both
// sides passed; when they passed none in common (common 0), it is the
// cost at c's own highest passing rate (ownRate), marked Own, so a side whose
// rival passed nothing still shows what its requests cost.
func cpuCostAt(c *driver.Ceiling, side string, common float64) CPUCost {
	if common > 0 || c == nil || !c.CeilingStatus().OK() {
		return cpuCost(c, side, common)
	}
	own := ownRate(c)
	if own <= 0 {
		return CPUCost{Groups: cpuGroups(side), Design: Figure{Unit: " CPU-s", Why: "not measured: no step of its searches passed"}}
	}
	out := cpuCost(c, side, own)
	out.Own = true
	return out
}

// cpuCost is side's CPU cost from its ceiling c at rate, or why there is
// none.
func cpuCost(c *driver.Ceiling, side string, rate float64) CPUCost {
	out := CPUCost{Rate: rate, Groups: cpuGroups(side)}
	switch {
	case c == nil:
		out.Design = noFigure(" CPU-s")
	case !c.CeilingStatus().OK():
		out.Design = failedFigure(" CPU-s", c.CeilingStatus())
	case rate <= 0:
		out.Design = Figure{Unit: " CPU-s", Why: "not measured: the two sides' searches passed no rate in common"}
	default:
		parts, total, ok := cpuAt(c, rate, out.Groups)
		if !ok {
			out.Design = Figure{Unit: " CPU-s", Why: fmt.Sprintf("not measured: no passing step at %s/s recorded the CPU of %s", num(rate), strings.Join(out.Groups, ", "))}
			break
		}
		out.Parts, out.Design = parts, Figure{Value: total, Unit: " CPU-s"}
	}
	return out
}

// String words the cost: "0.58 CPU-s (service 0.20, Postgres 0.38)", or
// why there is none.
func (c CPUCost) String() string {
	if !c.Design.OK() {
		return c.Design.Why
	}
	var ps []string
	for _, g := range c.Groups {
		ps = append(ps, groupName(g)+" "+num(c.Parts[g]))
	}
	out := fmt.Sprintf("%s (%s)", c.Design, strings.Join(ps, " + "))
	if c.Own {
		out += fmt.Sprintf(" at %s/s, its own highest passing rate", count(int64(c.Rate)))
	}
	return out
}

// groupName is a process group as a reader names it.
func groupName(g string) string {
	switch g {
	case "postgres":
		return "Postgres"
	case "rabbitmq":
		return "RabbitMQ"
	case "kafka":
		return "Kafka"
	case "ferretdb":
		return "FerretDB"
	case "redis":
		return "Redis"
	}
	return g
}

// sloText is the ceilings' SLOs in words: "25 ms, 50 ms and 100 ms".
func sloText() string {
	var out []string
	for _, d := range scenario.CeilingSLOs {
		out = append(out, ms(float64(d)/float64(time.Millisecond)))
	}
	if len(out) < 2 {
		return strings.Join(out, "")
	}
	return strings.Join(out[:len(out)-1], ", ") + " and " + out[len(out)-1]
}
