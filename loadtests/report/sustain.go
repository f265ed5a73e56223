package report

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/scenario"
)

// The terminal table's rows of the sustainable points.
func init() {
	search := []row{{scenario.MetricSustainable, "sustainable items/s"}, {scenario.MetricFirstFail, "first failing items/s"},
		{scenario.MetricCapped, "capped at the ladder's top (1 = yes)"}, {scenario.MetricStarved, "a step starved (1 = yes)"},
		{scenario.MetricStarvedAt, "starved at items/s offered"}, {scenario.MetricSteps, "steps"},
		{scenario.MetricAt(scenario.MetricEndToEndP99), "end-to-end p99 ms at the sustainable rate"}, {scenario.MetricAt(scenario.MetricIntake), "processed/s at the sustainable rate"},
		{scenario.MetricStartRows, "rows at the start"}, {scenario.MetricStartSlotLagFound, "slot lag found at the start, bytes"}}
	over := []row{{scenario.MetricOffered, "items/s offered (batches, open loop)"}, {scenario.MetricSustainable, "sustainable items/s"},
		{scenario.MetricIntake, "processed/s during the intake"}, {scenario.MetricShare, "share of the sustainable rate"},
		{scenario.MetricStarved, "starved (1 = yes)"}, {scenario.MetricAccepted, "accepted items/s"}, {driver.ClientShed, "batches shed (503)"},
		{driver.ClientErrors, "errors"}, {scenario.MetricEndToEndP99, "end-to-end p99 ms"}, {scenario.MetricDrain, "drain after the intake, s"}}
	for _, tp := range throughputPairs {
		extraMetrics[scenario.SustainScenarioName(tp.pair)] = search
		extraMetrics[scenario.OverScenarioName(tp.pair)] = over
	}
}

// sustainSettings returns the sustainable search's settings the run
// recorded (nil when it has none).
func sustainSettings(r *driver.Run) *scenario.SustainSettings {
	return sustainSettingsAt(r, scenario.SustainSetting)
}

// sustainSettingsAt returns the search settings the run recorded as key
// (nil when it has none).
func sustainSettingsAt(r *driver.Run, key string) *scenario.SustainSettings {
	v, ok := r.Settings[key]
	if !ok {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var s scenario.SustainSettings
	if json.Unmarshal(b, &s) != nil {
		return nil
	}
	return &s
}

// pointNamed returns r's point of scenario named name, or nil.
func pointNamed(r *driver.Run, scenarioName driver.ScenarioName, name string) *driver.Point {
	for i := range r.Points {
		if r.Points[i].Scenario == scenarioName && r.Points[i].Name == name {
			return &r.Points[i]
		}
	}
	return nil
}

// sustainIntro says how the sustainable rate is measured, from the
// criteria the run recorded.
func sustainIntro(s *scenario.SustainSettings) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("**sustainable/s** is measured open loop: batches are posted at a fixed rate for %s s per step whatever the answers, and the backlog (enqueued − processed, written − delivered: the services' /stats counters) is read every %s s. ",
		num(s.StepS), num(s.SampleS))
	w("A step passes when, over its window after the first %s s, the backlog grew by at most max(%s batches, %s s of arrivals) items (flat), the end-to-end p99 (send→processed, write→delivered) stayed under the SLO of %s ms, fewer than %s of its batches failed or were shed, and the driver sent at least %s of the rate. ",
		num(s.WarmupS), num(s.FlatMinBatches), num(s.FlatArrivalsS), count(int64(s.SLOMS)), pct(driver.FailShare), pct(scenario.SendShare))
	w("The SLO is %s s because it sits far above this machine's latency floors (about 50 ms for a queue p99, 15 ms for a delivery p99) and far below the 10–15 s p50 of a draining backlog: the floor decides no step and no backlog passes; a reader who needs a tighter p99 gets a lower rate than the one printed. ", num(s.SLOMS/1000))
	if win := s.StepS - s.WarmupS; win > 0 {
		w("Over a full step's window the flat bound lets processing fall about %s behind the offered rate, the noise of an instantaneous read of the counters. ", num(math.Round(1000*s.FlatArrivalsS/win)/10)+"%")
	}
	w("Each search starts on a freshly started service with its tables truncated (no-kafka's slot moved to the current WAL position; the lag it was found with is recorded) when the driver runs the service; one running outside the driver keeps its process and tables, and its steps below say so. Each search climbs its ladder")
	var ls []string
	for _, tp := range throughputPairs {
		if l, ok := s.Ladders[tp.pair]; ok {
			ls = append(ls, fmt.Sprintf("%s from %s/s ×%s up to %s/s, %d bisection(s)", tp.pair, count(int64(l.Start)), num(l.Factor), count(int64(l.Max)), l.Bisect))
		}
	}
	if len(ls) > 0 {
		w(" (%s)", strings.Join(ls, "; "))
	}
	w(" until a step fails, then bisects between the last pass and the first failure; each of the %d round(s) per side after the first checks the previous bracket's two ends and searches again only if they moved. "+
		"A step whose backlog has grown %s× the flat bound %s s into its window ends there. ", s.Rounds, num(s.EarlyFailBy), num(s.EarlyFailAfter))
	w("A step **starved** when its backlog grew while it processed under %s of the lower of the offered rate and the highest rate the side passed before it: its round is flagged in the table, not averaged away. ", pct(s.StarvedShare))
	if s.OverRounds > 0 {
		w("**At %s× sustainable** offers each queue side %s times its median sustainable rate, in the same batches, for one step on a fresh process, and reports what it processed during the intake (after the warm-up) as a share of its sustainable rate: the goal is at least %s, with admission shedding or slowing batches before the workers starve. ",
			num(s.Over), num(s.Over), pct(s.OverGoal))
	}
	w("**accepted/s** and the drain time come from the closed-loop points below; the closed loop's processed rate is a backlog draining and is not a throughput.\n\n")
	return b.String()
}

// sustainTable is one pair's summary: per batch size and side, accepted/s
// (closed loop), the closed loop's drain time, sustainable/s with its
// run-to-run range and every round, and the share kept at twice the
// sustainable rate.
func sustainTable(r *driver.Run, pair, unit, e2e string, s *scenario.SustainSettings) string {
	sizes := map[int]bool{}
	var sides []string
	for i := range r.Points {
		p := &r.Points[i]
		switch p.Scenario {
		case scenario.ThroughputScenarioName(pair), scenario.SustainScenarioName(pair), scenario.OverScenarioName(pair):
			sizes[batchOf(p)] = true
			if sides == nil {
				sides = p.Sides
			}
		}
	}
	if len(sizes) == 0 || pointOf(r, scenario.SustainScenarioName(pair)) == nil {
		return ""
	}
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("| batch | side | accepted %s/s (closed loop) | drain after the closed loop | sustainable %s/s (%s p99 < %s ms, backlog flat): median (min–max) | per round | at %s× sustainable: %s/s processed during the intake |\n",
		unit, unit, e2e, count(int64(s.SLOMS)), num(s.Over), unit)
	w("|---:|---|---:|---:|---:|---|---|\n")
	for _, size := range slices.Sorted(maps.Keys(sizes)) {
		label := scenario.BatchLabel(size)
		closed := pointNamed(r, scenario.ThroughputScenarioName(pair), label)
		search := pointNamed(r, scenario.SustainScenarioName(pair), label)
		over := pointNamed(r, scenario.OverScenarioName(pair), label)
		for _, side := range sides {
			sus, rounds, ov := sustainableCell(search, side), sustainRounds(search, side), overCell(over, side, s)
			if search == nil {
				sus, rounds = "not searched at this batch size (-sustainable-sizes)", ""
			}
			if over == nil {
				ov = notSearchedOver(search, pointOf(r, scenario.OverScenarioName(pair)) != nil, s)
			}
			w("| %d | %s | %s | %s | %s | %s | %s |\n", size, SideLabel(r, side),
				acceptedCell(closed, side), drainCell(r, closed, side), sus, rounds, ov)
		}
	}
	return b.String()
}

// pointOf returns r's first point of scenario, or nil.
func pointOf(r *driver.Run, scenarioName driver.ScenarioName) *driver.Point {
	for i := range r.Points {
		if r.Points[i].Scenario == scenarioName {
			return &r.Points[i]
		}
	}
	return nil
}

// sideAgg returns side's aggregate of metric in p.
func sideAgg(p *driver.Point, metric driver.Metric, side string) (driver.Agg, bool) {
	m := p.Find(metric)
	if m == nil {
		return driver.Agg{}, false
	}
	a, ok := m.Sides[side]
	return a, ok
}

// validCell is "" when side of p holds valid figures, else what its cell
// says instead: the status in words, or not measured.
func validCell(p *driver.Point, side string) (string, bool) {
	if p == nil {
		return notMeasuredHere, false
	}
	if st := p.SideStatus(side); !st.OK() {
		return statusText(st), false
	}
	return "", true
}

func acceptedCell(p *driver.Point, side string) string {
	if why, ok := validCell(p, side); !ok {
		return why
	}
	return cell(sideAgg(p, scenario.MetricAccepted, side))
}

// drainCell is how long the closed loop's backlog took to drain, median
// (min–max) in seconds; a round that did not drain within the bound
// makes it "> bound".
func drainCell(r *driver.Run, p *driver.Point, side string) string {
	if why, ok := validCell(p, side); !ok {
		return why
	}
	a, ok := sideAgg(p, scenario.MetricSettle, side)
	if !ok {
		return notRecorded
	}
	out := cell(a, true) + " s"
	if d, ok := sideAgg(p, scenario.MetricDrained, side); ok && d.Min < 1 {
		if bound, ok := r.Settings["drain_s"].(float64); ok && bound > 0 {
			out += fmt.Sprintf(" (a round had not drained after %s s: backlog left)", num(bound))
		} else {
			out += " (a round had not drained within its drain bound: backlog left)"
		}
	}
	return out
}

// sustainableCell is the median sustainable rate with its range, "≥"
// when a round stopped at its ladder's top, or the side's status.
func sustainableCell(p *driver.Point, side string) string {
	if why, ok := validCell(p, side); !ok {
		return why
	}
	a, ok := sideAgg(p, scenario.MetricSustainable, side)
	if !ok {
		return notRecorded
	}
	out := cell(a, true)
	if c, ok := sideAgg(p, scenario.MetricCapped, side); ok && c.Max >= 1 {
		out = "≥ " + out + " (the ladder's top passed)"
	}
	return out
}

// sustainRounds lists every round of side: its sustainable rate and the
// first failing rate with why it failed, a starved step flagged, or the
// round's failure.
func sustainRounds(p *driver.Point, side string) string {
	if p == nil {
		return notMeasuredHere
	}
	var out []string
	for _, rd := range p.Rounds {
		sr := rd.Sides[side]
		if sr == nil {
			continue
		}
		if st := driver.RoundStatus(sr); !st.OK() {
			out = append(out, fmt.Sprintf("round %d: %s", rd.Index, st))
			continue
		}
		m := sr.Metrics
		s := fmt.Sprintf("round %d: %s", rd.Index, num(m[scenario.MetricSustainable]))
		if hi, ok := m[scenario.MetricFirstFail]; ok {
			s += fmt.Sprintf(", %s failed", num(hi))
			if st := stepAt(m, hi); st != nil {
				_, why := scenario.StepJudge(st)
				s += " (" + why + ")"
			}
		} else if m[scenario.MetricCapped] == 1 {
			s += "+"
		}
		if m[scenario.MetricStarved] == 1 {
			s += fmt.Sprintf("; **starved** at %s/s offered: processed %s/s while the backlog grew", num(m[scenario.MetricStarvedAt]), num(m[scenario.MetricStarvedProcessed]))
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return notMeasuredHere
	}
	return md(strings.Join(out, "; "))
}

// stepAt returns the figures of the last step of a search that offered
// rate (the "step<i>." metrics without their prefix), or nil.
func stepAt(m map[driver.Metric]float64, rate float64) map[driver.Metric]float64 {
	var found map[driver.Metric]float64
	for i := range int(m[scenario.MetricSteps]) {
		if m[scenario.StepMetric(i, scenario.MetricOffered)] != rate {
			continue
		}
		prefix := scenario.StepPrefix(i)
		found = map[driver.Metric]float64{}
		for k, v := range m {
			if rest, ok := prefix.Name(k); ok {
				found[driver.Metric(rest)] = v
			}
		}
	}
	return found
}

// notSearchedOver is the overload cell of a batch size without an
// overload point: not run for the pair (anyOver false), run at another
// size, or nothing when the size had no search either.
func notSearchedOver(search *driver.Point, anyOver bool, s *scenario.SustainSettings) string {
	switch {
	case !anyOver:
		return "not run for this pair"
	case search == nil:
		return ""
	}
	return fmt.Sprintf("run at batch %d only (-sustainable-over-size)", s.OverSize)
}

// overCell is what side processed during the intake at the overload
// point, as a share of its sustainable rate, against the goal; a starved
// round is flagged.
func overCell(p *driver.Point, side string, s *scenario.SustainSettings) string {
	if why, ok := validCell(p, side); !ok {
		return why
	}
	share, ok := sideAgg(p, scenario.MetricShare, side)
	proc, ok2 := sideAgg(p, scenario.MetricIntake, side)
	if !ok || !ok2 {
		return notRecorded
	}
	out := fmt.Sprintf("%s (%s× of sustainable", cell(proc, true), cell(share, true))
	if off, ok := sideAgg(p, scenario.MetricOffered, side); ok {
		out += fmt.Sprintf(", %s/s offered", num(off.Median))
	}
	if shed, ok := sideAgg(p, driver.ClientShed, side); ok && shed.Median > 0 {
		out += fmt.Sprintf(", %s batches shed", num(shed.Median))
	}
	out += ")"
	switch {
	case share.Min < s.OverGoal:
		out += fmt.Sprintf(": **below the %s goal**", pct(s.OverGoal))
	default:
		out += fmt.Sprintf(": meets the %s goal", pct(s.OverGoal))
	}
	for _, rd := range p.Rounds {
		if sr := rd.Sides[side]; sr != nil && sr.Metrics[scenario.MetricStarved] == 1 {
			out += fmt.Sprintf("; round %d **starved**", rd.Index)
		}
	}
	return out
}

// sustainSteps lists every step of every search of pair, for a reader
// who wants to see the ladder: "no-rabbitmq batch 100, round 0: 5,000 ✓
// (flat ...), 10,000 ✗ (...)".
func sustainSteps(r *driver.Run, pair string) string {
	var b strings.Builder
	for i := range r.Points {
		p := &r.Points[i]
		if p.Scenario != scenario.SustainScenarioName(pair) {
			continue
		}
		for _, rd := range p.Rounds {
			for _, side := range rd.Order {
				sr := rd.Sides[side]
				if sr == nil {
					continue
				}
				var steps []string
				for k := range int(sr.Metrics[scenario.MetricSteps]) {
					one := map[driver.Metric]float64{}
					prefix := scenario.StepPrefix(k)
					for name, v := range sr.Metrics {
						if rest, ok := prefix.Name(name); ok {
							one[driver.Metric(rest)] = v
						}
					}
					if _, ok := one[scenario.MetricOffered]; !ok {
						continue // not recorded: nothing to say about it
					}
					if _, ok := one[driver.ClientRequests]; !ok {
						steps = append(steps, fmt.Sprintf("%s/s not measured (the round's failure says why)", num(one[scenario.MetricOffered])))
						continue
					}
					_, why := scenario.StepJudge(one)
					mark := "fail"
					if one[scenario.MetricStepPass] == 1 {
						mark = "pass"
					}
					steps = append(steps, fmt.Sprintf("%s/s %s (%s)", num(one[scenario.MetricOffered]), mark, why))
				}
				if len(steps) == 0 {
					continue
				}
				start := ""
				if sr.Metrics[scenario.MetricStartRestarted] == 1 {
					start = "fresh process"
					if sr.Metrics[scenario.MetricStartTruncated] == 1 {
						start += ", tables truncated"
					}
				} else {
					start = "the running process, tables kept"
				}
				if v, ok := sr.Metrics[scenario.MetricStartSlotLagFound]; ok {
					start += fmt.Sprintf(", slot found %s bytes behind", count(int64(v)))
				}
				fmt.Fprintf(&b, "- %s %s, round %d (%s): %s\n", side, p.Name, rd.Index, start, md(strings.Join(steps, "; ")))
			}
		}
	}
	return b.String()
}

// sustainedRate returns side's median sustainable rate over pair's
// sustainable points of at least minBatch (the highest over batch sizes)
// and its point, for the claims; ok is false when none was measured (a failed side is
// logged by median).
func sustainedRate(rs runs, pair, side string, minBatch int) (float64, *driver.Point, bool) {
	best, at := bestOfBatches(rs, scenario.SustainScenarioName(pair), scenario.MetricSustainable, side, minBatch)
	return best, at, at != nil
}

// sustainedText is a claim's figure of v, side's sustainable rate in p:
// "≥ v" when a round stopped at its ladder's top.
func sustainedText(p *driver.Point, side string, v float64) string {
	if c, ok := sideAgg(p, scenario.MetricCapped, side); ok && c.Max >= 1 {
		return "≥ " + num(v)
	}
	return num(v)
}

// otherSide is side's median sustainable rate in p when the side is
// valid; an invalid side is not read (median would fail the claim).
func otherSide(p *driver.Point, side string) (float64, bool) {
	if !p.SideStatus(side).OK() {
		return 0, false
	}
	return median(p, scenario.MetricSustainable, side)
}
