package report

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/scenario"
	logc "github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/log"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// The throughput run's claims join the claims table after the pairs'
// own rows; they read the "throughput" results file.
func init() { claimTable = append(claimTable, throughputClaims...) }

// ThroughputTitle is the heading of RESULTS.md's throughput section.
const ThroughputTitle = "Throughput: batch endpoints, accepted (closed loop) and sustainable (open loop), with CPU cost"

// throughputPair is a pair of the throughput run: its name, its
// section's title, what its end-to-end figure is, and its items.
type throughputPair struct{ pair, title, e2e, unit string }

// throughputPairs are the pairs of the throughput run, in order, with
// what their end-to-end figure is.
var throughputPairs = []throughputPair{
	{pairs.Queue, "Queue: rabbitmq vs no-rabbitmq, `POST /tasks/batch`", "send→processed", "tasks"},
	{pairs.Log, "Log: kafka vs no-kafka, `POST /events/batch`", "write→delivered", "events"},
}

// costLabels name scenario.CostGroups for the reader.
var costLabels = map[string]string{"service": "service", "postgres": "Postgres (all)", "rabbitmq": "RabbitMQ (beam.smp)", "kafka": "Kafka (java)", "total": "total"}

// throughputRows are the terminal table's rows of a throughput point.
func throughputRows() []row {
	rows := []row{
		{scenario.MetricAccepted, "accepted items/s"}, {scenario.MetricEndToEnd, "end-to-end items/s"},
		{driver.ClientP50, "request p50 ms"}, {driver.ClientP99, "request p99 ms"}, {driver.ClientErrors, "errors"},
		{scenario.MetricBacklogEnd, "backlog at end"}, {scenario.MetricDrained, "drained (1 = yes)"},
	}
	for _, lat := range []string{"processing", "delivery"} {
		rows = append(rows, row{driver.ServerLatency(lat, driver.SuffixP50), lat + " p50 ms"}, row{driver.ServerLatency(lat, driver.SuffixP99), lat + " p99 ms"})
	}
	for _, g := range append(slices.Clone(scenario.CostGroups), "total") {
		rows = append(rows, row{scenario.MetricCPUPerThousand(g), "CPU-s/1k " + costLabels[g]})
	}
	return rows
}

// ThroughputSection renders the throughput run as RESULTS.md's section:
// how it was measured, which processes were counted, and per pair the
// sustainable search's table (batch size × side → accepted/s, the closed
// loop's drain time, sustainable/s with its SLO and run-to-run range,
// every round, the share kept at twice the sustainable rate; sustain.go)
// with every step of its searches, then the closed-loop table (accepted/s,
// processed over the loop and its drain, end-to-end and request p50/p99,
// CPU-seconds per 1,000 items of every process group). It returns "" for
// a nil run.
func ThroughputSection(r *driver.Run) string {
	if r == nil {
		return ""
	}
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("\n## %s\n\n", ThroughputTitle)
	ss := sustainSettings(r)
	if ss != nil {
		b.WriteString(sustainIntro(ss))
	}
	if closed, ok := r.Settings["closed_loop"].(bool); ok && !closed {
		b.WriteString("This run measured no closed-loop points (`sustainable` command): accepted/s and the drain time are not measured.\n\n")
	} else {
		closedLoopIntro(&b, r)
	}
	b.WriteString(StartStateSection(r))
	for _, tp := range throughputPairs {
		ps := throughputPoints(r, tp.pair)
		sustained := ""
		if ss != nil {
			sustained = sustainTable(r, tp.pair, tp.unit, tp.e2e, ss)
		}
		if len(ps) == 0 && sustained == "" {
			continue
		}
		w("### %s\n\n", tp.title)
		if sustained != "" {
			b.WriteString(sustained + "\n")
			if steps := sustainSteps(r, tp.pair); steps != "" {
				w("Every step of the sustainable searches (the reason is read from the step's figures):\n\n%s\n", steps)
			}
		}
		if len(ps) == 0 {
			continue
		}
		closedLoopTable(&b, r, tp, ps)
	}
	b.WriteString(designSections(r)) // throughput_design.go
	for _, n := range notesOf(r) {
		w("- Note: %s\n", md(n))
	}
	return b.String()
}

// closedLoopIntro says how the closed-loop points are measured.
func closedLoopIntro(b *strings.Builder, r *driver.Run) {
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	w("%v closed-loop senders per side post batches to the batch endpoints for %v s per point (%v round(s), sides interleaved); the next batch leaves as soon as the last one is answered. ",
		r.Settings["senders"], r.Settings["duration_s"], r.Settings["rounds"])
	w("**accepted/s** counts the items of 2xx answers over the loop; **end-to-end/s** is what the service processed or delivered (its /stats counters), the higher of two lower bounds: over the loop alone, and from the loop's start until the backlog drained. "+
		"Where its p50 exceeds %s ms the figure is marked as a backlog draining: the senders outran the workers and the rate is how fast the backlog emptied, not a rate the side sustains; a round under %s%% of the median is flagged as starved. ", count(comfortableP50MS), num(100*starvedShare))
	w("Rates show the median across rounds with the min–max; latencies and costs the median. End-to-end p50/p99 are the services' own HdrHistograms (send→processed, write→delivered); request p50/p99 is each batch request's round trip. ")
	w("**CPU-s per 1,000 items** is utime+stime from /proc/<pid>/stat of each process tree (a root, its children, and the children it reaped), sampled before the loop and after the backlog drained, divided by the items the service accepted; on a row marked \"backlog left\" (the backlog did not drain within the settle bound), by the items that went through, an upper bound since the intake of the others counts too. The driver runs on the same machine; the Postgres figure counts every process of the server, so anything else using it at the time counts too.\n\n")
	if procs := costProcesses(r); procs != "" {
		w("Processes counted: %s.\n\n", procs)
	}
}

// closedLoopTable is one pair's closed-loop table.
func closedLoopTable(b *strings.Builder, r *driver.Run, tp throughputPair, ps []*driver.Point) {
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	w("Closed loop:\n\n")
	w("| batch | side | accepted %s/s | %s %s/s over the loop and its drain (not a sustained rate) | %s p50 / p99 ms | request p50 / p99 ms |", tp.unit, tp.e2e, tp.unit, tp.e2e)
	groups := append(slices.Clone(scenario.CostGroups), "total")
	for _, g := range groups {
		w(" CPU-s/1k: %s |", costLabels[g])
	}
	w("\n|---|---|---:|---:|---:|---:|%s\n", strings.Repeat("---:|", len(groups)))
	lat := map[string]string{pairs.Queue: queue.LatencyProcessing, pairs.Log: logc.StatDelivery}[tp.pair]
	for _, p := range ps {
		for _, side := range p.Sides {
			get := func(metric driver.Metric) (driver.Agg, bool) {
				m := p.Find(metric)
				if m == nil {
					return driver.Agg{}, false
				}
				a, ok := m.Sides[side]
				return a, ok
			}
			// Rates with their range across rounds; latencies and
			// costs as medians, to keep the table readable (the JSON
			// has every round).
			c := func(metric driver.Metric) string { return cell(get(metric)) }
			med := func(metric driver.Metric) string {
				a, ok := get(metric)
				if !ok {
					return notRecorded
				}
				return num(a.Median)
			}
			pair := func(m1, m2 driver.Metric) string { return med(m1) + " / " + med(m2) }
			if st := p.SideStatus(side); !st.OK() {
				w("| %s | %s | %s |%s\n", strings.TrimPrefix(p.Name, "batch "), SideLabel(r, side), statusText(st), strings.Repeat(" |", 3+len(groups)))
				continue
			}
			e2e := c(scenario.MetricEndToEnd)
			if d, ok := get(scenario.MetricDrained); ok && d.Min < 1 {
				e2e += " (backlog left)"
			}
			if l, ok := get(driver.ServerLatency(lat, driver.SuffixP50)); ok && l.Median > comfortableP50MS {
				e2e += fmt.Sprintf(" (a backlog draining: %s p50 %s s, not a sustained rate)", tp.e2e, num(l.Median/1000))
			}
			e2e += starvedRounds(p, side)
			w("| %s | %s | %s | %s | %s | %s |", strings.TrimPrefix(p.Name, "batch "), SideLabel(r, side), c(scenario.MetricAccepted), e2e,
				pair(driver.ServerLatency(lat, driver.SuffixP50), driver.ServerLatency(lat, driver.SuffixP99)), pair(driver.ClientP50, driver.ClientP99))
			for _, g := range groups {
				w(" %s |", med(scenario.MetricCPUPerThousand(g)))
			}
			w("\n")
		}
	}
	for _, p := range ps {
		for _, e := range sideErrors(p) {
			w("\nError, %s %s: %s\n", p.Scenario, p.Name, md(e))
		}
	}
	w("\n")
}

// starvedShare is the share of a point's median end-to-end rate under
// which a round is flagged as starved rather than hidden in the range.
const starvedShare = 0.5

// starvedRounds flags the rounds of side in p whose end-to-end rate fell
// under starvedShare of the median: " (round 2: 1602/s, starved)".
func starvedRounds(p *driver.Point, side string) string {
	m := p.Find(scenario.MetricEndToEnd)
	if m == nil {
		return ""
	}
	med, ok := m.Sides[side]
	if !ok || med.Median <= 0 {
		return ""
	}
	var out []string
	for _, r := range p.Rounds {
		if sr := r.Sides[side]; sr != nil {
			if v, ok := sr.Metrics[scenario.MetricEndToEnd]; ok && v < starvedShare*med.Median {
				out = append(out, fmt.Sprintf("round %d: %s/s, under %s%% of the median: starved", r.Index, num(v), num(100*starvedShare)))
			}
		}
	}
	if len(out) == 0 {
		return ""
	}
	return " (" + strings.Join(out, "; ") + ")"
}

// throughputPoints returns the run's throughput points of pair.
func throughputPoints(r *driver.Run, pair string) []*driver.Point {
	var out []*driver.Point
	for i := range r.Points {
		if r.Points[i].Scenario == scenario.ThroughputScenarioName(pair) {
			out = append(out, &r.Points[i])
		}
	}
	return out
}

// costProcesses lists the process groups counted and how each was
// found, from the run's cost_processes setting: the servers once (every
// side counts the same ones), then each side's service.
func costProcesses(r *driver.Run) string {
	raw, err := json.Marshal(r.Settings[scenario.CostProcessesSetting])
	if err != nil {
		return ""
	}
	var by map[string][]struct {
		Name   string `json:"name"`
		PIDs   []int  `json:"pids"`
		Source string `json:"source"`
	}
	if json.Unmarshal(raw, &by) != nil || len(by) == 0 {
		return ""
	}
	describe := func(label string, pids []int, source string) string {
		if len(pids) == 0 {
			return label + " " + source
		}
		return fmt.Sprintf("%s pid %s (%s)", label, joinInts(pids), source)
	}
	var servers, services []string
	seen := map[string]bool{}
	for _, tp := range throughputPairs {
		ps := throughputPoints(r, tp.pair)
		if len(ps) == 0 {
			continue
		}
		for _, side := range ps[0].Sides {
			for _, g := range by[side] {
				switch {
				case g.Name == "service":
					services = append(services, describe(side, g.PIDs, g.Source))
				case !seen[g.Name]:
					seen[g.Name] = true
					servers = append(servers, describe(costLabels[g.Name], g.PIDs, g.Source))
				}
			}
		}
	}
	return md(strings.Join(append(servers, services...), "; "))
}

func joinInts(v []int) string {
	var s []string
	for _, n := range v {
		s = append(s, fmt.Sprint(n))
	}
	return strings.Join(s, ",")
}

// bestE2E returns side's highest median end-to-end rate over pair's
// throughput points with a batch of at least minBatch, and that point.
func bestE2E(rs runs, pair, side string, minBatch int) (float64, *driver.Point) {
	return bestOfBatches(rs, scenario.ThroughputScenarioName(pair), scenario.MetricEndToEnd, side, minBatch)
}

// bestOfBatches returns side's highest median of metric over the
// throughput command's points of scenario with a batch of at least
// minBatch, and that point (nil, with -Inf, when none has it).
func bestOfBatches(rs runs, sc driver.ScenarioName, metric driver.Metric, side string, minBatch int) (float64, *driver.Point) {
	best, at := math.Inf(-1), (*driver.Point)(nil)
	for _, p := range rs.points(scenario.ThroughputCommand, sc) {
		if batchOf(p) < minBatch {
			continue
		}
		if v, ok := median(p, metric, side); ok && v > best {
			best, at = v, p
		}
	}
	return best, at
}

// batchOf is a throughput point's batch size (from its name, "batch 100").
func batchOf(p *driver.Point) int {
	var n int
	_, _ = fmt.Sscanf(p.Name, "batch %d", &n)
	return n
}

// The throughput claims' thresholds.
const (
	// comfortableRate is the queue rate the reference says Postgres
	// holds "comfortably".
	comfortableRate = 5000
	// comfortHeadroom is how far above comfortableRate the sustainable
	// rate must be for the rate to be held comfortably: a side at its
	// limit holds nothing comfortably.
	comfortHeadroom = 1.25
	// comfortableP50MS is the closed loop's send→processed p50 above
	// which its processed rate is flagged as a backlog draining.
	comfortableP50MS = 1000
	// slotLo and slotHi are the claimed events/s of one slot.
	slotLo, slotHi = 5000, 15000
	// slotMinBatch is the smallest batch the slot claim reads.
	slotMinBatch = 100
	// batchGoal is issue 15's send→processed goal at batch ≥
	// batchGoalMin.
	batchGoal    = 10000
	batchGoalMin = 100
)

// throughputClaims are the claims the throughput run settles.
var throughputClaims = []claimSpec{
	{pair: pairs.Queue, short: "~5K msg/s without tuning",
		claimText: texts("queue 5K untuned", figures),
		evaluate: func(in claimInputs) outcome {
			if len(in.rs.points(scenario.ThroughputCommand, scenario.SustainScenarioName(pairs.Queue))) == 0 {
				return notRun("sustainable throughput")
			}
			v, p, ok := sustainedRate(in.rs, pairs.Queue, pairs.NoRabbitMQ, 0)
			if !ok {
				return outcome{missing: "no sustainable rate was recorded for no-rabbitmq"}
			}
			o := outcome{measured: fmt.Sprintf("%s tasks/s sustainable at %s", sustainedText(p, pairs.NoRabbitMQ, v), p.Name), holds: v >= comfortableRate*comfortHeadroom}
			// The other side is context: read only when valid, so that
			// its failure does not fail a claim about no-rabbitmq.
			if b, ok := otherSide(p, pairs.RabbitMQ); ok {
				o.measured += fmt.Sprintf(" (rabbitmq %s tasks/s)", sustainedText(p, pairs.RabbitMQ, b))
			}
			switch {
			case v >= comfortableRate && v < comfortableRate*comfortHeadroom:
				o.note = fmt.Sprintf("sustains the claim's %s tasks/s, but with less than %s× headroom", count(comfortableRate), num(comfortHeadroom))
			case v >= comfortableRate*comfortHeadroom:
				o.note = fmt.Sprintf("%s× the claim's rate", num(v/comfortableRate))
			}
			return o
		}},
	{pair: pairs.Log, short: "5–15K events/s per slot",
		claimText: texts("log slot rate", figures),
		evaluate: func(in claimInputs) outcome {
			if len(in.rs.points(scenario.ThroughputCommand, scenario.SustainScenarioName(pairs.Log))) == 0 {
				return notRun("sustainable throughput")
			}
			v, p, ok := sustainedRate(in.rs, pairs.Log, pairs.NoKafka, slotMinBatch)
			if !ok {
				return outcome{missing: fmt.Sprintf("no batch ≥ %d point with a sustainable rate for no-kafka", slotMinBatch)}
			}
			o := outcome{measured: fmt.Sprintf("%s events/s sustainable at %s", sustainedText(p, pairs.NoKafka, v), p.Name), holds: v >= slotLo/tolerance}
			if k, ok := otherSide(p, pairs.Kafka); ok {
				o.measured += fmt.Sprintf(" (kafka %s events/s)", sustainedText(p, pairs.Kafka, k))
			}
			if v > slotHi {
				o.note = fmt.Sprintf("beats the claim's upper figure (%s events/s) by %s×", count(slotHi), num(v/slotHi))
			}
			return o
		}},
	{pair: pairs.Queue, short: "batch ≥ 100 at 10,000 tasks/s on both sides",
		claimText: texts("queue batch goal", figures),
		evaluate: func(in claimInputs) outcome {
			var parts []string
			holds, seen := true, false
			for _, p := range in.rs.points(scenario.ThroughputCommand, scenario.ThroughputScenarioName(pairs.Queue)) {
				if batchOf(p) < batchGoalMin {
					continue
				}
				seen = true
				a, okA := median(p, scenario.MetricEndToEnd, pairs.NoRabbitMQ)
				b, okB := median(p, scenario.MetricEndToEnd, pairs.RabbitMQ)
				if !okA || !okB {
					holds = false
					parts = append(parts, p.Name+": "+notRecorded)
					continue
				}
				holds = holds && a >= batchGoal && b >= batchGoal
				parts = append(parts, fmt.Sprintf("%s: no-rabbitmq %s, rabbitmq %s tasks/s", p.Name, num(a), num(b)))
			}
			if !seen {
				return notRun("throughput (batch ≥ 100)")
			}
			return outcome{measured: strings.Join(parts, "; "), holds: holds}
		}},
}
