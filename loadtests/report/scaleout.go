package report

import (
	_ "embed"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/scenario"
)

// ScaleOutTitle is the heading of the scale-out section.
const ScaleOutTitle = "Scale-out: competing consumers, fan-out and consumer groups"

// ScaleOutSection renders the scale-out run (go run ./loadtests scaleout;
// nil or another command: "") as a Markdown section: per number of
// instances and side, the fixed rates, the batch point and the kill -9
// point, then per number of subscribers the fan-out points. A side whose
// point is not valid shows its status in words instead of figures.
func ScaleOutSection(r *driver.Run) string {
	if r == nil || r.Command != scenario.ScaleOutCommand || len(r.Points) == 0 {
		return ""
	}
	r.Validate()
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("\n## %s\n\n", ScaleOutTitle)
	w("N instances of each queue service, each a process of its own on its own port: no-rabbitmq's on one schema "+
		"(claims with FOR UPDATE SKIP LOCKED under a lease), rabbitmq's consuming one queue (each with its prefetch). "+
		"Every instance runs %v workers of %v ms simulated work, so one instance processes at most %s tasks/s "+
		"and N instances are what the work needs. One round per point (`results/%s.json`); docs/queue.md, "+
		"\"Several instances\", says what each side needs.\n\n",
		r.Settings["workers"], r.Settings["work_ms"], capacityText(r), r.ID)

	b.WriteString("**Fixed rates**, offered round-robin to the instances. processed/s is during the attack; " +
		"the p99 is send→processed, the highest of the instances'; shares are each instance's part of the tasks processed; " +
		"\"twice\" counts tasks delivered more than once (0 without faults).\n\n")
	scaleOutTable(&b, r, scenario.ScaleOutRate, []scaleCol{
		{"processed/s", scenario.MetricScaleProcessed, "", "", ""},
		{"p99 ms", scenario.MetricScaleP99, "", "", ""},
		{title: "shares", unit: "shares"},
		{"twice", scenario.MetricScaleRedelivered, "", "", ""},
	})
	w("\n**Batch**: %v tasks posted in batches of %v by %v senders, timed until the last is processed.\n\n",
		r.Settings["batch_tasks"], r.Settings["batch_size"], r.Settings["senders"])
	scaleOutTable(&b, r, scenario.ScaleOutBatch, []scaleCol{
		{"processed/s", scenario.MetricScaleProcessed, "", "", ""},
		{title: "shares", unit: "shares"},
		{"twice", scenario.MetricScaleRedelivered, "", "", ""},
	})
	w("\n**kill -9** of one of two instances a third of the way into %v s at %s posted to the other "+
		"(no-rabbitmq's LEASE %v s). \"held\" counts the tasks the victim had recorded as delivered, "+
		"each processed again by the survivor (at-least-once: each may have run twice); "+
		"\"open\" counts accepted tasks not done at the bound (lost, if not 0).\n\n",
		r.Settings["kill_duration_s"], pointRate(r, scenario.ScaleOutKill), r.Settings["lease_s"])
	scaleOutTable(&b, r, scenario.ScaleOutKill, []scaleCol{
		{"held", scenario.MetricKillHeld, "", "", ""},
		{"processed again after (median)", scenario.MetricKillP50, "s", "", ""},
		{"(slowest)", scenario.MetricKillMax, "s", "", ""},
		{"open", scenario.MetricKillOpen, "", "", ""},
	})
	for _, p := range scaleOutParts {
		p.write(&b, r)
	}
	return b.String()
}

// scaleOutPart is a part of the scale-out section that a run older than
// its points lacks: the points' scenario, the title and points its
// notInRun names with the doc that explains them, the values its intro
// (scaleOutIntros) takes and the table's columns.
type scaleOutPart struct {
	scenario           driver.ScenarioName
	title, points, doc string
	// args are the intro's values, in its order.
	args []partArg
	// cols come before the CPU columns of the service, Postgres and the
	// specialist cpu names (as titles write it; none when cpu is ""),
	// after after them, and the missing metric's column last (none when
	// missing is "").
	cols, after []scaleCol
	cpu         string
	missing     driver.Metric
	// against, when set, writes a summary before the table (the
	// fan-out search's rate against N: againstN).
	against func(b *strings.Builder, r *driver.Run, sc driver.ScenarioName)
}

// write writes the part's intro and table, or notInRun's line when r has
// none of its points.
func (p scaleOutPart) write(b *strings.Builder, r *driver.Run) {
	if p.notInRun(b, r) {
		return
	}
	values := make([]any, len(p.args))
	for i, a := range p.args {
		values[i] = a(r, p.scenario)
	}
	intro := scaleOutIntros[string(p.scenario)]
	if extra, ok := scaleOutIntros[string(p.scenario)+" cursors"]; ok && hasSecondDesign(r, p.scenario) {
		intro += " " + extra
	}
	fmt.Fprintf(b, "\n"+intro+"\n\n", values...)
	if p.against != nil {
		p.against(b, r, p.scenario)
	}
	var cpu []scaleCol
	if p.cpu != "" {
		cpu = []scaleCol{
			{"CPU-s/1k service", scenario.MetricCPUPerThousand("service"), "", "", ""},
			{"CPU-s/1k Postgres", scenario.MetricCPUPerThousand("postgres"), "", "", ""},
			{"CPU-s/1k " + p.cpu, scenario.MetricCPUPerThousand(strings.ToLower(p.cpu)), "", "", ""},
		}
	}
	var missing []scaleCol
	if len(p.missing) > 0 {
		missing = []scaleCol{{"missing", p.missing, "", "", ""}}
	}
	scaleOutTable(b, r, p.scenario, slices.Concat(p.cols, cpu, p.after, missing))
}

// scaleOutIntros are the parts' intros by scenario, from
// scaleout_intros.txt: the sentences apart from the code, each a format
// its part's args fill.
var scaleOutIntros = parseIntros(scaleOutIntroText)

//go:embed scaleout_intros.txt
var scaleOutIntroText string

// parseIntros reads text's "== <scenario>" sections: each one paragraph,
// its lines joined by spaces ("#" lines are comments).
func parseIntros(text string) map[string]string {
	out := map[string]string{}
	var name string
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "== "):
			name = strings.TrimPrefix(line, "== ")
		case out[name] == "":
			out[name] = line
		default:
			out[name] += " " + line
		}
	}
	return out
}

// hasSecondDesign reports whether r has a point of scenario sc measured
// on a Postgres side's second design (a point whose Env sets it).
func hasSecondDesign(r *driver.Run, sc driver.ScenarioName) bool {
	return slices.ContainsFunc(r.Points, func(p driver.Point) bool { return p.Scenario == sc && len(p.Env) > 0 })
}

// partArg is a value of a part's intro, from the run r and the part's
// scenario sc.
type partArg func(r *driver.Run, sc driver.ScenarioName) any

// partRate is the rate of the part's first point (pointRate).
func partRate(r *driver.Run, sc driver.ScenarioName) any { return pointRate(r, sc) }

// setting is the run's setting key, as recorded.
func setting(key string) partArg {
	return func(r *driver.Run, _ driver.ScenarioName) any { return r.Settings[key] }
}

// againstN writes the sustainable rate of r's points of sc (searches)
// as a table of one row per point name before its ", <design>" (the
// number of subscribers) and one column per side and design
// ("no-rabbitmq, cursors"), the cell sustainableCell's: the rate, or
// the side's status in words.
func againstN(b *strings.Builder, r *driver.Run, sc driver.ScenarioName) {
	var rows, cols []string
	cells := map[[2]string]string{}
	for i := range r.Points {
		p := &r.Points[i]
		if p.Scenario != sc {
			continue
		}
		row, design, _ := strings.Cut(p.Name, ", ")
		if !slices.Contains(rows, row) {
			rows = append(rows, row)
		}
		for _, side := range p.Sides {
			col := SideLabel(r, side)
			if design != "" {
				col += ", " + design
			}
			if !slices.Contains(cols, col) {
				cols = append(cols, col)
			}
			cells[[2]string{row, col}] = sustainableCell(p, side)
		}
	}
	b.WriteString("Sustainable published tasks/s against the number of subscribers:\n\n| subscribers |")
	for _, c := range cols {
		fmt.Fprintf(b, " %s |", md(c))
	}
	b.WriteString("\n|---|" + strings.Repeat("---:|", len(cols)) + "\n")
	for _, row := range rows {
		fmt.Fprintf(b, "| %s |", md(row))
		for _, c := range cols {
			v, ok := cells[[2]string{row, c}]
			if !ok {
				v = driver.StateNotRun
			}
			fmt.Fprintf(b, " %s |", v)
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
}

// fanoutSearchArg is a value of the fan-out search's settings the run
// recorded (scenario.FanoutSustainSetting; notRecorded when it has none).
func fanoutSearchArg(f func(s *scenario.SustainSettings) any) partArg {
	return func(r *driver.Run, _ driver.ScenarioName) any {
		s := sustainSettingsAt(r, scenario.FanoutSustainSetting)
		if s == nil || len(s.Sizes) == 0 {
			return notRecorded
		}
		return f(s)
	}
}

// countSetting is the run's setting key, a number, with thousands
// separators (notRecorded when it has none).
func countSetting(key string) partArg {
	return func(r *driver.Run, _ driver.ScenarioName) any {
		if v, ok := r.Settings[key].(float64); ok {
			return count(int64(v))
		}
		return notRecorded
	}
}

// scaleOutParts are the parts a run older than their points lacks, in
// the section's order.
var scaleOutParts = []scaleOutPart{
	// The fan-out points' table: per number of subscribers and
	// side, the enqueue p99, the copies processed, what each published task
	// cost in CPU and WAL, and the copies missing.
	{
		cpu: "RabbitMQ", scenario: scenario.ScaleOutFanout, title: "**Fan-out**", points: "fan-out", doc: `docs/queue.md, "Fan-out"`,
		args: []partArg{setting("fanout_kind"), partRate, setting("duration_s"), setting("workers"), setting("fanout_work_ms")},
		cols: []scaleCol{
			{"copies/s", scenario.MetricFanoutCopies, "", "", ""},
			{"enqueue p99 ms", driver.ClientP99, "", "", ""},
			{"processed p99 ms", scenario.MetricScaleP99, "", "", ""},
		},
		after: []scaleCol{
			{"WAL B / task", scenario.MetricFanoutWAL, "", "", ""},
		},
		missing: scenario.MetricFanoutMissing,
	},
	// The fan-out searches' table, after the rate against N (againstN):
	// per number of subscribers, side and design, the sustainable
	// published rate, the copies processed and their p99 at it, and each
	// search's steps.
	{
		scenario: scenario.ScaleOutFanoutSustain, title: "**Fan-out: sustainable published rate**", points: "fan-out search", doc: `docs/queue.md, "Fan-out"`,
		args: []partArg{setting("fanout_kind"),
			fanoutSearchArg(func(s *scenario.SustainSettings) any { return count(int64(s.SLOMS)) }),
			setting("workers"), setting(scenario.FanoutSustainWorkSetting),
			fanoutSearchArg(func(s *scenario.SustainSettings) any { return s.Sizes[0] }),
			fanoutSearchArg(func(s *scenario.SustainSettings) any { return num(s.StepS) }),
			fanoutSearchArg(func(s *scenario.SustainSettings) any { return num(s.WarmupS) }),
			fanoutSearchArg(func(s *scenario.SustainSettings) any { return num(s.FlatMinBatches) }),
			fanoutSearchArg(func(s *scenario.SustainSettings) any { return num(s.FlatArrivalsS) }),
			func(*driver.Run, driver.ScenarioName) any { return pct(driver.FailShare) },
			func(*driver.Run, driver.ScenarioName) any { return pct(scenario.SendShare) },
			fanoutSearchArg(func(s *scenario.SustainSettings) any { return count(int64(s.Ladders["copies"].Start)) }),
			fanoutSearchArg(func(s *scenario.SustainSettings) any { return num(s.Ladders["copies"].Factor) }),
			fanoutSearchArg(func(s *scenario.SustainSettings) any { return count(int64(s.Ladders["copies"].Max)) }),
			fanoutSearchArg(func(s *scenario.SustainSettings) any { return s.Ladders["copies"].Bisect }),
			fanoutSearchArg(func(s *scenario.SustainSettings) any { return num(s.EarlyFailBy) }),
			fanoutSearchArg(func(s *scenario.SustainSettings) any { return num(s.EarlyFailAfter) }),
			fanoutSearchArg(func(s *scenario.SustainSettings) any {
				return num(math.Round(100*s.FlatArrivalsS/max(s.StepS-s.WarmupS, 1e-9))) + "%"
			}),
		},
		cols: []scaleCol{
			{title: "sustainable published/s", unit: "sustainable"},
			{"copies/s at it", scenario.MetricAt(scenario.MetricIntake), "", "", ""},
			{"p99 ms at it", scenario.MetricAt(scenario.MetricEndToEndP99), "", "", ""},
			{title: "search", unit: "search"},
		},
		against: againstN,
	},
	// The groups points' table: per number of consumer groups
	// and log side, the rate each group received, the default group's
	// delivery p99, the CPU per 1,000 written events, the WAL the slots held
	// and the deliveries missing.
	{
		cpu: "Kafka", scenario: scenario.ScaleOutGroups, title: "**Consumer groups** (log pair)", points: "groups", doc: `docs/log.md, "Consumer groups"`,
		args: []partArg{partRate, setting("duration_s")},
		cols: []scaleCol{
			{"events/s per group", scenario.MetricGroupDelivered, "", "", ""},
			{"write p99 ms", driver.ClientP99, "", "", ""},
			{"delivery p99 ms", driver.ServerDeliveryP99, "", "", ""},
		},
		after: []scaleCol{
			{"slot WAL bytes", scenario.MetricGroupsSlotBytes, "", scenario.LogPair.A.Name, "no slots"},
		},
		missing: scenario.MetricGroupMissing,
	},
	// The takeover point's table: per log side, the longest an event
	// waited for its delivery when one of the group's two instances was
	// killed, the events that waited over a second, the deliveries made
	// again and the events missing.
	{
		scenario: scenario.ScaleOutTakeover, title: "**Takeover** (log pair)", points: "takeover", doc: `docs/log.md, "Consumer groups"`,
		args: []partArg{partRate, setting("kill_duration_s")},
		cols: []scaleCol{
			{"longest wait", scenario.MetricTakeoverMaxWait, " s", "", ""},
			{"waited > 1 s", scenario.MetricTakeoverSlow, "", "", ""},
			{"again", scenario.MetricTakeoverAgain, "", "", ""},
			{"g1: longest wait", scenario.MetricTakeoverGroupMaxWait, " s", "", ""},
			{"g1: waited > 1 s", scenario.MetricTakeoverGroupSlow, "", "", ""},
			{"g1: again", scenario.MetricTakeoverGroupAgain, "", "", ""},
			{"g1: missing", scenario.MetricTakeoverGroupMissing, "", "", ""},
			{"writes shed (503)", driver.ClientShed, "", "", ""},
		},
		missing: scenario.MetricTakeoverMissing,
	},
	// The replay point's table: per log side, the time a new group from
	// earliest took to receive its first event and to catch up with a
	// filled log under live writes, and what it received twice or missed.
	{
		scenario: scenario.ScaleOutReplay, title: "**Replay** (log pair)", points: "replay", doc: `docs/log.md, "From earliest"`,
		args: []partArg{countSetting("replay_events"), partRate},
		cols: []scaleCol{
			{"first event", scenario.MetricReplayFirst, " s", "", ""},
			{"catch-up", scenario.MetricReplayCatchUp, " s", "", ""},
			{"events/s", scenario.MetricReplayRate, "", "", ""},
			{"live events", scenario.MetricReplayLive, "", "", ""},
			{"live write p99 ms", driver.ClientP99, "", "", ""},
			{"again", scenario.MetricReplayAgain, "", "", ""},
		},
		missing: scenario.MetricReplayMissing,
	},
	// The stopped point's table: per log side, what the group that was
	// not consumed held at the stop's end, what the running groups
	// received meanwhile, and its catch-up once consumed.
	{
		scenario: scenario.ScaleOutStopped, title: "**A stopped group** (log pair)", points: "stopped-group", doc: `docs/log.md, "Consumer groups"`,
		args: []partArg{setting("stopped_for_s"), partRate},
		cols: []scaleCol{
			{"stopped group's lag, events", scenario.MetricStoppedLagEvents, "", "", ""},
			{"lag, bytes", scenario.MetricStoppedLagBytes, "", "", ""},
			{"slot WAL bytes", scenario.MetricGroupsSlotBytes, "", scenario.LogPair.A.Name, "no slots"},
			{"others: events/s per group", scenario.MetricGroupDelivered, "", "", ""},
			{"default group's delivery p99 ms", driver.ServerDeliveryP99, "", "", ""},
			{"catch-up", scenario.MetricStoppedCatchUp, " s", "", ""},
			{"slot WAL bytes after", scenario.MetricStoppedAfterBytes, "", scenario.LogPair.A.Name, "no slots"},
		},
		missing: scenario.MetricStoppedMissing,
	},
}

// notInRun writes, when r has no point of the part's scenario (a run
// older than those points), that its title is not in this run and what
// measures it (doc names where it is explained), and reports whether it
// did.
func (p scaleOutPart) notInRun(b *strings.Builder, r *driver.Run) bool {
	title, points, doc := p.title, p.points, p.doc
	if pointOf(r, p.scenario) != nil {
		return false
	}
	fmt.Fprintf(b, "\n%s: not in this run (`results/%s.json` has no %s points); `go run ./loadtests scaleout` and the next `make results` measure them (%s).\n", title, r.ID, points, doc)
	return true
}

// scaleCol is a column of a scale-out table: a metric (with a unit
// suffix), or "shares" for the instances' shares, "sustainable" for a
// search's sustainable rate (sustainableCell) and "search" for its
// rounds' steps (sustainRounds).
type scaleCol struct {
	title  string
	metric driver.Metric
	unit   string
	// only, when set, is the one side the metric exists on; the other
	// sides' cells say otherwise instead.
	only, otherwise string
}

// scaleOutTable writes one table of the points of scenario: one row per
// point and side.
func scaleOutTable(b *strings.Builder, r *driver.Run, scenarioName driver.ScenarioName, cols []scaleCol) {
	b.WriteString("| point | side |")
	for _, c := range cols {
		fmt.Fprintf(b, " %s |", c.title)
	}
	b.WriteString("\n|---|---|" + strings.Repeat("---:|", len(cols)) + "\n")
	rows := 0
	for i := range r.Points {
		p := &r.Points[i]
		if p.Scenario != scenarioName {
			continue
		}
		for _, side := range p.Sides {
			rows++
			fmt.Fprintf(b, "| %s | %s |", md(p.Name), SideLabel(r, side))
			st := p.SideStatus(side)
			if !st.OK() {
				fmt.Fprintf(b, " %s |%s\n", statusText(st), strings.Repeat(" |", len(cols)-1))
				continue
			}
			for _, c := range cols {
				fmt.Fprintf(b, " %s |", scaleCell(p, side, c))
			}
			b.WriteString("\n")
		}
	}
	if rows == 0 {
		fmt.Fprintf(b, "| %s | both | not run |%s\n", scenarioName, strings.Repeat(" |", len(cols)-1))
	}
}

// scaleCell is one figure of a valid side, "not recorded" when the side
// did not report it.
func scaleCell(p *driver.Point, side string, c scaleCol) string {
	if c.only != "" && side != c.only {
		return c.otherwise
	}
	switch c.unit {
	case "shares":
		return sharesText(p, side)
	case "sustainable":
		return sustainableCell(p, side)
	case "search":
		return sustainRounds(p, side)
	}
	m := p.Find(c.metric)
	if m == nil {
		return notRecorded
	}
	a, ok := m.Sides[side]
	if !ok {
		if c.metric == scenario.MetricScaleRedelivered {
			return "not drained"
		}
		return notRecorded
	}
	return num(a.Median) + c.unit
}

// sharesText is each instance's share of the processed tasks, "62% / 38%".
func sharesText(p *driver.Point, side string) string {
	var parts []string
	for i := 0; ; i++ {
		m := p.Find(scenario.MetricScaleShare(i))
		if m == nil {
			break
		}
		a, ok := m.Sides[side]
		if !ok {
			break
		}
		parts = append(parts, num(a.Median)+"%")
	}
	if len(parts) == 0 {
		return notRecorded
	}
	return strings.Join(parts, " / ")
}

// capacityText is one instance's capacity from the run's settings.
func capacityText(r *driver.Run) string {
	workers, ok1 := r.Settings["workers"].(float64)
	work, ok2 := r.Settings["work_ms"].(float64)
	if !ok1 || !ok2 || work <= 0 {
		if wi, ok := r.Settings["workers"].(int); ok {
			if mi, ok := r.Settings["work_ms"].(int); ok && mi > 0 {
				return num(float64(wi) * 1000 / float64(mi))
			}
		}
		return notRecorded
	}
	return num(workers * 1000 / work)
}

// pointRate is the rate of r's first point of scenario name (pointOf;
// "not recorded" when r has none).
func pointRate(r *driver.Run, name driver.ScenarioName) string {
	if p := pointOf(r, name); p != nil {
		return driver.Label(p.Rate)
	}
	return notRecorded
}
