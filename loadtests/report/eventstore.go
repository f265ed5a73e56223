package report

import (
	"fmt"
	"slices"
	"strings"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/eventstore"
)

// esNotMeasured fills the rows of an engine the bench could not reach.
const esNotMeasured = "not run here"

// minMax formats the range of xs with one decimal: "a–b", or "not
// recorded".
func minMax(xs []float64) string {
	if len(xs) == 0 {
		return notRecorded
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return fmt.Sprintf("%.1f–%.1f", s[0], s[len(s)-1])
}

// appendStatus is the validity of one append loop: not run when the
// engine was not reached; failed when it completed no append in its
// window, or failed driver.FailShare or more of its attempts.
func appendStatus(r eventstore.AppendRow) driver.Status {
	attempts := r.Ops + r.Conflicts + r.Errors
	switch {
	case !r.Measured:
		return driver.Status{State: driver.StateNotRun, Reason: esNotMeasured}
	case r.Ops == 0 && !r.Counted:
		return driver.Failed("no append completed within the %s window (%d errors, %d conflicts; this older file dropped the operations still running when the window ended)", num(r.Seconds)+" s", r.Errors, r.Conflicts)
	case r.Ops == 0:
		return driver.Failed("no append completed within the %s window, late ones included (%d errors, %d conflicts, %d in flight)", num(r.Seconds)+" s", r.Errors, r.Conflicts, r.InFlight)
	case float64(r.Errors) >= driver.FailShare*float64(attempts):
		return driver.Failed("%d of %d append attempts failed", r.Errors, attempts)
	}
	return driver.Status{State: driver.StateOK}
}

// pointReadStatus is the validity of one engine's point read: a read of
// a stream that holds nothing on that engine compares nothing.
func pointReadStatus(r eventstore.PointReadRow) driver.Status {
	switch {
	case r.Failed != "":
		return driver.Failed("%s", strings.TrimPrefix(r.Failed, "failed: "))
	case !r.Measured:
		return driver.Status{State: driver.StateNotRun, Reason: esNotMeasured}
	case r.Matched == 0:
		return driver.Failed("stream %q holds no event on this engine: the read compares nothing", r.Stream)
	}
	return driver.Status{State: driver.StateOK}
}

// EventStoreSection renders RESULTS.md's event-store section from the
// event store's runs among runs (eventstore.Commands; the other runs are
// ignored); "" when none of its scenarios has run.
func EventStoreSection(runs []*driver.Run) string {
	return eventStoreSection(eventStoreOf(runs))
}

// eventStoreSection renders the event-store section from its results.
func eventStoreSection(es eventstore.Results) string {
	if es.Append == nil && es.PointRead == nil && es.CatchUp == nil && es.Causal == nil && es.Long == nil && es.Cleanup == nil && es.Ceiling == nil {
		return ""
	}
	var b strings.Builder
	b.WriteString("## " + eventstore.SectionTitle + "\n\n")
	b.WriteString("Measured by `make results` (alone: `go run ./loadtests eventstore <append|point-read|catch-up>`), from the JSON in results/. ")
	b.WriteString("KurrentDB cannot be installed on these machines: its rows say \"" + esNotMeasured + "\" unless the bench ran against a real KurrentDB.\n\n")
	if es.StartState != nil {
		b.WriteString(startState(es.StartState))
	}
	if es.Ceiling != nil {
		// The single-request ceiling of appends (eventstore-ceiling),
		// judged by the rule of every pair's.
		b.WriteString(KneeSection(es.Ceiling))
	}
	if a := es.Append; a != nil {
		appendSection(&b, a)
	}
	if p := es.PointRead; p != nil {
		pointReadSection(&b, p)
	}
	if es.Causal != nil {
		b.WriteString(causalSection(es.Causal))
	}
	if c := es.CatchUp; c != nil {
		catchUpSection(&b, c)
	}
	b.WriteString(esVersionsSection(es))      // eventstore_versions.go
	b.WriteString(eventStoreLongSections(es)) // eventstore_long.go
	return b.String()
}

// appendSection writes the append scenario's subsection.
func appendSection(b *strings.Builder, a *eventstore.AppendResult) {
	o := a.Options
	fmt.Fprintf(b, "### append (%s, run %s)\n\n", a.At.Format("2006-01-02 15:04 UTC"), a.RunID)
	fmt.Fprintf(b, "%d workers, %d streams, %v per engine and round, %d rounds, engine order rotated each round. The growing series appends to the same streams every round; the reset series starts fresh streams before every round, interleaved with it, so that stream length and store size can be told apart. Each mode is its own series, and no figure of one is compared with one of the other:\n\n",
		o.Workers, o.Streams, o.Duration, o.Rounds)
	modes := appendModes(a)
	for _, m := range modes {
		b.WriteString("- **" + m.Label + "**\n")
	}
	b.WriteString("\n" + esStores(a.Stores))
	b.WriteString("ops counts the appends completed, late ones included: an operation still running when a loop's window ends is waited for (up to the grace bound) and counted late; one still running at the bound is counted in flight, and in no other column.\n")
	b.WriteString("\n| engine | mode | series | round | ops | late | in flight | ops/s | conflicts/op | errors | events per stream at end |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range a.Rows {
		m, _ := eventstore.ModeOf(r.Mode)
		if st := appendStatus(r); !st.OK() {
			why := esNotMeasured
			if r.Measured {
				why = statusText(st)
			}
			fmt.Fprintf(b, "| %s | %s | %s | %d | %s | | | | | | |\n", r.Shown(), m.Name, r.Series, r.Round, why)
			continue
		}
		late, inFlight := fmt.Sprint(r.Late), fmt.Sprint(r.InFlight)
		if !r.Counted {
			late, inFlight = "not counted (older file: dropped)", "not counted"
		}
		fmt.Fprintf(b, "| %s | %s | %s | %d | %d | %s | %s | %.1f | %.3f | %d | %.0f |\n", r.Shown(), m.Name, r.Series, r.Round, r.Ops, late, inFlight, r.OpsPerSec, r.ConflictsPerOp, r.Errors, r.EventsPerStream)
	}
	if len(modes) == 1 {
		fmt.Fprintf(b, "\nOnly the %s mode ran in this file.\n", modes[0].Name)
	}
	b.WriteString("\nWhat the data shows:\n\n")
	for _, v := range a.Verdicts {
		b.WriteString("- " + validVerdict(a, v) + "\n")
	}
	b.WriteString("- Kafka's conflicts/op is 0 by construction: it never checks a version, so concurrent writers to one stream all succeed and the stream's invariants are not protected.\n\n")
}

// pointReadSection writes the point-read scenario's subsection.
func pointReadSection(b *strings.Builder, p *eventstore.PointReadResult) {
	fmt.Fprintf(b, "### point-read (%s)\n\nOne stream read in full (%s); time is the median of %d reads through the service.\n\n", p.At.Format("2006-01-02 15:04 UTC"), p.Source, p.Options.Reads)
	b.WriteString(esStores(p.Stores))
	b.WriteString("| engine | matched records | records_scanned | scanned / matched | read time (ms) |\n|---|---|---|---|---|\n")
	for _, r := range p.Rows {
		if r.Failed != "" {
			fmt.Fprintf(b, "| %s | failed: %s | | | |\n", r.Shown(), strings.TrimPrefix(md(r.Failed), "failed: "))
			continue
		}
		if !r.Measured {
			fmt.Fprintf(b, "| %s | %s | | | |\n", r.Shown(), esNotMeasured)
			continue
		}
		if st := pointReadStatus(r); !st.OK() {
			fmt.Fprintf(b, "| %s | %s | | | |\n", r.Shown(), statusText(st))
			continue
		}
		scanned, ratio := "null (not measurable per request)", "no ratio: not measurable per request"
		if r.RecordsScanned != nil {
			scanned = fmt.Sprint(*r.RecordsScanned)
			ratio = fmt.Sprintf("%.1f×", r.ScanRatio)
		}
		fmt.Fprintf(b, "| %s | %d | %s | %s | %.2f |\n", r.Shown(), r.Matched, scanned, ratio, r.MedianMS)
	}
	b.WriteString("\n")
}

// catchUpSection writes the catch-up scenario's subsection.
func catchUpSection(b *strings.Builder, c *eventstore.CatchUpResult) {
	fmt.Fprintf(b, "### catch-up (%s)\n\n%d runs × %d pre-filled events per engine. %s. Ranges are min–max across runs.\n\n", c.At.Format("2006-01-02 15:04 UTC"), c.Options.Runs, c.Options.Events, c.Description)
	b.WriteString(esStores(c.Stores))
	b.WriteString("| engine | catch-up time (ms) | live latency p50 (ms) | live latency max (ms) |\n|---|---|---|---|\n")
	for _, r := range c.Rows {
		if !r.Measured {
			fmt.Fprintf(b, "| %s | %s | | |\n", r.Shown(), esNotMeasured)
			continue
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s |\n", r.Shown(), minMax(r.CatchUpMS), minMax(r.LiveP50MS), minMax(r.LiveMaxMS))
	}
	b.WriteString("\n")
}

// validVerdict is v, one of the bench's trend sentences ("<engine>,
// <mode>: ..."), unless every loop of that engine and mode failed: then
// the trend was computed from nothing, and the line says so instead.
func validVerdict(a *eventstore.AppendResult, v string) string {
	for _, m := range eventstore.Append.Modes {
		for _, e := range a.Engines {
			prefix := e.Name + ", " + m.Name + ":"
			if !strings.HasPrefix(v, prefix) {
				continue
			}
			valid, why := 0, ""
			for _, r := range a.Rows {
				if r.Engine != e.Name || modeOf(r) != m.Name || !r.Measured {
					continue
				}
				if st := appendStatus(r); st.OK() {
					valid++
				} else if why == "" {
					why = st.Reason
				}
			}
			if valid == 0 && why != "" {
				return prefix + " no trend: every loop failed (" + why + ")"
			}
		}
	}
	return v
}

// esStores says what each engine's store held at a scenario's start; ""
// for files that did not record it.
func esStores(stores []eventstore.StoreState) string {
	if len(stores) == 0 {
		return ""
	}
	var parts []string
	for _, st := range stores {
		switch {
		case st.Error != "" && strings.HasPrefix(st.Error, "not measured here"):
			parts = append(parts, st.Engine+": "+esNotMeasured)
		case st.Records == nil:
			parts = append(parts, fmt.Sprintf("%s (%s): failed: %s", st.Engine, st.Store, md(st.Error)))
		case st.Mode == eventstore.StoreFresh:
			parts = append(parts, fmt.Sprintf("%s: %s, created empty for this run, holding %s records", st.Engine, st.Store, count(*st.Records)))
		default:
			parts = append(parts, fmt.Sprintf("%s: %s, as the bench found it (not reset), holding %s records", st.Engine, st.Store, count(*st.Records)))
		}
	}
	return "Stores at the start: " + strings.Join(parts, "; ") + ".\n\n"
}

// appendModes returns the modes of a's rows, in the bench's order.
func appendModes(a *eventstore.AppendResult) []eventstore.Mode {
	var out []eventstore.Mode
	for _, m := range eventstore.Append.Modes {
		if slices.ContainsFunc(a.Rows, func(r eventstore.AppendRow) bool { return modeOf(r) == m.Name }) {
			out = append(out, m)
		}
	}
	return out
}

// modeOf is the name of r's mode (older files: read-then-append).
func modeOf(r eventstore.AppendRow) string {
	m, _ := eventstore.ModeOf(r.Mode)
	return m.Name
}
