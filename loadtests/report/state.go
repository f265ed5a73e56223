package report

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/scenario"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// LongLivedTitle is the heading of RESULTS.md's long-lived section; the
// docs link to it.
const LongLivedTitle = "Long-lived tables: how each side ages"

// StartStateSection renders what the run's tables held when it began:
// the declared mode, then one row per table (rows, total size, dead
// tuples). Runs written before the driver declared it say so.
func StartStateSection(r *driver.Run) string {
	if r.StartState == nil {
		return "Starting state: not recorded (a results file from before runs declared it).\n\n"
	}
	return startState(r.StartState)
}

// startState renders st.
func startState(st *driver.StartState) string {
	var b bytes.Buffer
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	switch st.Mode {
	case driver.StateFresh:
		w("Starting state: **fresh**: the pair's tables were truncated before the run (`-state fresh`, the default); the schemas are as the services' migrations made them.")
	case driver.StateKeep:
		w("Starting state: **kept**: the run began on the history the tables held (`-state keep`; the event store always keeps its history).")
	case driver.StateLongLived:
		w("Starting state: **long-lived**: the tables were truncated, then given %s rows of history per table (finished tasks, delivered events, inside the 24-hour retention) and churn (a tenth more rows past retention, deleted as the cleaner deletes them; one task in twenty updated), then vacuumed once before the churn.", count(st.HistoryRows))
	default:
		w("Starting state: %s.", md(st.Mode))
	}
	if st.Error != "" {
		w(" Not fully prepared: %s.", md(st.Error))
	}
	w(" At the start:\n\n")
	if len(st.Tables) == 0 {
		w("No table was read.\n\n")
		return b.String()
	}
	w("| table | rows | total size | dead tuples |\n|---|---|---|---|\n")
	for _, t := range st.Tables {
		w("| %s.%s | %s | %s | %s |\n", t.Schema, t.Table, count(t.Rows), bytesIEC(t.TotalBytes), count(t.DeadTuples))
	}
	w("\n")
	return b.String()
}

// agingRows are the metrics of the long-lived table, per scenario.
var agingRows = map[string][]row{
	"queue.rate": {{driver.ServerDeliveryP99, "delivery p99 ms"}, {driver.ServerProcessingP99, "send→processed p99 ms"}, {scenario.MetricThroughput, "processed/s"}},
	"log.rate":   {{driver.ServerWriteP99, "write p99 ms"}, {driver.ServerDeliveryP99, "delivery p99 ms"}, {scenario.MetricThroughput, "delivered/s"}},
}

// LongLivedSection renders the long-lived run beside the fresh runs of
// the same pairs: for every fixed rate both measured, each side's fresh
// median and its long-lived figure, then the long-lived tables' starting
// state. It returns "" when there is no long-lived run.
func LongLivedSection(all []*driver.Run) string {
	byCmd := map[string]*driver.Run{}
	for _, r := range all {
		byCmd[r.Command] = r
	}
	ll := byCmd[scenario.LongLivedCommand]
	if ll == nil {
		return ""
	}
	var b bytes.Buffer
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("\n## %s\n\n", LongLivedTitle)
	w("The same fixed rates as the fresh runs above, one round each, after each side's tables were given a history (`results/%s.json`). Retention is on with the services' defaults (TASK_RETENTION and EVENT_RETENTION 24h): the history is inside it, its churn past it. \"fresh\" is the median of the fresh run's rounds, \"long-lived\" the one round on the history; the ratio is long-lived ÷ fresh, per side.\n\n", ll.ID)
	for _, pair := range []string{pairs.Queue, pairs.Log} {
		sc := scenario.RateScenarioName(pair)
		fresh := byCmd[pair]
		var rows []string
		var sides []string
		for i := range ll.Points {
			p := &ll.Points[i]
			if p.Scenario != sc {
				continue
			}
			sides = p.Sides
			var fp *driver.Point
			if fresh != nil {
				fp = runs{pair: fresh}.point(pair, sc, p.Name)
			}
			for _, km := range agingRows[string(sc)] {
				cells := []string{p.Name, km.label}
				for _, side := range p.Sides {
					f, okF := median(fp, km.metric, side)
					l, okL := median(p, km.metric, side)
					cells = append(cells, valueOr(f, okF), valueOr(l, okL), agingRatio(f, okF, l, okL))
				}
				rows = append(rows, "| "+strings.Join(cells, " | ")+" |")
			}
		}
		if len(rows) == 0 {
			continue
		}
		w("### %s\n\n", titleOf(pair))
		if fresh == nil {
			w("No fresh %s run in these results: the fresh columns are empty.\n\n", pair)
		}
		w("| point | metric | %s fresh | %s long-lived | ratio | %s fresh | %s long-lived | ratio |\n|---|---|---|---|---|---|---|---|\n",
			sides[0], sides[0], sides[1], sides[1])
		w("%s\n\n", strings.Join(rows, "\n"))
	}
	w("### Long-lived starting state\n\n%s", StartStateSection(ll))
	for _, n := range notesOf(ll) {
		w("- Note: %s\n", md(n))
	}
	return b.String()
}

func valueOr(v float64, ok bool) string {
	if !ok {
		return notRecorded
	}
	return num(v)
}

func agingRatio(fresh float64, okF bool, ll float64, okL bool) string {
	switch {
	case !okF || !okL:
		return noRatioMissing
	case fresh == 0 || ll == 0:
		return noRatioZero
	}
	return num(ll/fresh) + "×"
}

// count formats a row count with thousands separators.
func count(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var parts []string
	for len(s) > 3 {
		parts = append([]string{s[len(s)-3:]}, parts...)
		s = s[:len(s)-3]
	}
	parts = append([]string{s}, parts...)
	out := strings.Join(parts, ",")
	if neg {
		out = "-" + out
	}
	return out
}

// bytesIEC formats a size in bytes as pg_size_pretty does (kB, MB, GB of
// 1024).
func bytesIEC(n int64) string {
	const unit = 1024
	if n < 10*unit {
		return fmt.Sprintf("%d bytes", n)
	}
	v := float64(n)
	for _, u := range []string{"kB", "MB", "GB"} {
		v /= unit
		if v < 10*unit || u == "GB" {
			return fmt.Sprintf("%.0f %s", v, u)
		}
	}
	return ""
}
