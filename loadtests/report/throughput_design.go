package report

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/scenario"
)

// throughputDesign is how the report shows one of
// scenario.ThroughputDesigns: its subsection's title, the name of the
// pair's own design it is set beside, and the pair of the throughput
// section it belongs to.
type throughputDesign struct {
	design      scenario.ThroughputScenario
	title, base string
	tp          throughputPair
}

// throughputDesigns are the designs the throughput section shows.
var throughputDesigns = []throughputDesign{
	{scenario.LogPgoutputThroughput, "Log: no-kafka's decoding plugin, wal2json vs pgoutput (`SLOT_PLUGIN`)", "wal2json", throughputPairs[1]},
}

// designSections renders every design of throughputDesigns for a
// throughput run that measured its pair.
func designSections(r *driver.Run) string {
	var b strings.Builder
	for _, d := range throughputDesigns {
		b.WriteString(designSection(r, d))
	}
	return b.String()
}

// designSection sets a design's points (scenario.DesignScenarioName)
// beside its side's points of the pair, at every batch size: the
// sustainable rate with write→delivered p50/p99 at it, then the closed
// loop with CPU-seconds per 1,000 items of each process group. A design
// that failed or was not measured says so in place of its figures; ""
// when the run did not measure the pair.
func designSection(r *driver.Run, d throughputDesign) string {
	pair := d.tp.pair
	if pointOf(r, scenario.ThroughputScenarioName(pair)) == nil && pointOf(r, scenario.SustainScenarioName(pair)) == nil {
		return ""
	}
	s := d.design
	side := s.Pair.A.Name
	var b strings.Builder
	fmt.Fprintf(&b, "### %s\n\n", d.title)
	fmt.Fprintf(&b, "The same load on %s with each design, on the stack's PostgreSQL: **%s** is %s's row in the tables above (its default); **%s** is %s restarted with %s, measured after the pair's points, with the other side stopped. Its slot and publication are its own, and dropped after its points. CPU-s per 1,000 %s counts the service and every Postgres process, the walsender that decodes the slot among them. The two were not interleaved: the machine may have changed between them.\n\n",
		side, d.base, side, s.Design.Name, side, envText(s.Design.Env), d.tp.unit)
	var all map[string]scenario.DesignOutcome
	recorded := r.Setting(scenario.DesignsSetting, &all) == nil && all != nil
	outcome, ran := all[s.Design.Name]
	switch {
	case !recorded || !ran:
		b.WriteString("**" + s.Design.Name + "**: not measured: this throughput run did not measure it (a run before the design points, or `-throughput-designs=false`).\n\n")
	case outcome.Error != "":
		b.WriteString("**" + s.Design.Name + "**: failed: " + md(outcome.Error) + "\n\n")
	}
	closed := scenario.DesignScenarioName(scenario.ThroughputScenarioName(pair), s.Design.Name)
	if pointOf(r, closed) == nil && pointOf(r, scenario.DesignScenarioName(scenario.SustainScenarioName(pair), s.Design.Name)) == nil {
		return b.String() // nothing to set beside the pair's rows above
	}
	b.WriteString(designSustainTable(r, d))
	if ps := designClosedLoop(r, d); len(ps) > 0 {
		closedLoopTable(&b, r, d.tp, ps)
	}
	return b.String()
}

// envText is env as `K=V` settings, sorted.
func envText(env map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(env)) {
		parts = append(parts, "`"+k+"="+env[k]+"`")
	}
	return strings.Join(parts, " ")
}

// designPair is, at one batch size, the pair's point and the design's
// (nil when absent), both named by the batch.
type designPair struct {
	batch          string
	pair, designed *driver.Point
}

// designPoints pairs the pair's points of pairScenario with the
// design's of the same batch, in batch order.
func designPoints(r *driver.Run, d throughputDesign, pairScenario driver.ScenarioName) []designPair {
	designed := scenario.DesignScenarioName(pairScenario, d.design.Design.Name)
	sizes := map[int]string{}
	for i := range r.Points {
		if p := &r.Points[i]; p.Scenario == pairScenario || p.Scenario == designed {
			sizes[batchOf(p)] = p.Name
		}
	}
	var out []designPair
	for _, n := range slices.Sorted(maps.Keys(sizes)) {
		name := sizes[n]
		out = append(out, designPair{name, pointNamed(r, pairScenario, name), pointNamed(r, designed, name)})
	}
	return out
}

// designClosedLoop are the closed-loop points of the design's side,
// each batch size's pair point (that side alone) then the design's,
// named "batch <n>, <design>" for closedLoopTable.
func designClosedLoop(r *driver.Run, d throughputDesign) []*driver.Point {
	side := d.design.Pair.A.Name
	var out []*driver.Point
	for _, dp := range designPoints(r, d, scenario.ThroughputScenarioName(d.tp.pair)) {
		for _, x := range []struct {
			p    *driver.Point
			name string
		}{{dp.pair, d.base}, {dp.designed, d.design.Design.Name}} {
			if x.p == nil {
				continue
			}
			q := *x.p
			q.Name, q.Sides = dp.batch+", "+x.name, []string{side}
			out = append(out, &q)
		}
	}
	return out
}

// designSustainTable is the sustainable search's rows of the design's
// side, the pair's design then the design, at each batch size; "" when
// neither was searched.
func designSustainTable(r *driver.Run, d throughputDesign) string {
	ps := designPoints(r, d, scenario.SustainScenarioName(d.tp.pair))
	if len(ps) == 0 {
		return ""
	}
	side := d.design.Pair.A.Name
	var b strings.Builder
	fmt.Fprintf(&b, "Sustainable (open loop, the throughput section's criteria):\n\n| batch | design | sustainable %s/s: median (min–max) | per round | %s p50 / p99 ms at the sustainable rate |\n|---:|---|---:|---|---:|\n", d.tp.unit, d.tp.e2e)
	for _, dp := range ps {
		for _, x := range []struct {
			p    *driver.Point
			name string
		}{{dp.pair, d.base}, {dp.designed, d.design.Design.Name}} {
			sus, rounds, at := notMeasuredHere, "", ""
			if x.p != nil {
				sus, rounds = sustainableCell(x.p, side), sustainRounds(x.p, side)
				at = medianOr(x.p, scenario.MetricAt(scenario.MetricEndToEndP50), side) + " / " + medianOr(x.p, scenario.MetricAt(scenario.MetricEndToEndP99), side)
			}
			fmt.Fprintf(&b, "| %d | %s | %s | %s | %s |\n", batchOf(dp.pairOr()), x.name, sus, rounds, at)
		}
	}
	return b.String() + "\n"
}

// pairOr is the pair's point, else the design's.
func (dp designPair) pairOr() *driver.Point {
	if dp.pair != nil {
		return dp.pair
	}
	return dp.designed
}

// medianOr is side's median of metric in p, or not recorded.
func medianOr(p *driver.Point, metric driver.Metric, side string) string {
	if why, ok := validCell(p, side); !ok {
		return why
	}
	a, ok := sideAgg(p, metric, side)
	if !ok {
		return notRecorded
	}
	return num(a.Median)
}
