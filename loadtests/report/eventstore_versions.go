package report

import (
	"fmt"
	"slices"
	"strings"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/eventstore"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// esVersionsTitle heads the event store's subsection that sets its
// Postgres side on the stack's PostgreSQL beside the same service on
// other versions (eventstore.CompareName).
const esVersionsTitle = "PostgreSQL 18 beside 15"

// esFigure is one Postgres side's figure of one scenario: a value, or why
// there is none (failed: …, not run here).
type esFigure struct {
	v    float64
	ok   bool
	text string
}

// esVersionRow is one figure of the subsection, by engine.
type esVersionRow struct {
	what string
	by   map[string]esFigure
}

// esVersionsSection is the subsection that sets the stack's no-kurrentdb
// beside no-kurrentdb on each other PostgreSQL version the bench ran
// (eventstore.CompareName), one row per figure of its scenarios (each
// append mode and series' ops/s, the point read's and the catch-up's
// times), one column per server and the ratio to the stack's. Without
// such a side it says why in their place ("not measured: …", "failed:
// …"), never zeros; "" when no scenario ran.
func esVersionsSection(es eventstore.Results) string {
	rows := esVersionRows(es)
	if len(rows) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("### " + esVersionsTitle + "\n\n")
	others := esCompareEngines(es)
	if why := esCompareOutcome(es); why != "" {
		b.WriteString(why + "\n\n")
	}
	if len(others) == 0 {
		return b.String()
	}
	b.WriteString("The reference measured its Postgres side on PostgreSQL 18.4. The same no-kurrentdb ran on a private server of each other version (the stack server's settings, a store created empty for the run) in the same interleaved rounds as the stack's; the tables above have every round. Medians across rounds; the ratio is the other version's figure over the stack's (above 1: more ops/s, or a longer time).\n\n")
	engines := append([]string{pairs.NoKurrentDB}, others...)
	b.WriteString("| figure |")
	for _, e := range engines {
		b.WriteString(" " + md(esEngineLabel(es, e)) + " |")
	}
	for _, e := range others {
		b.WriteString(" " + e + " ÷ " + pairs.NoKurrentDB + " |")
	}
	b.WriteString("\n|---|" + strings.Repeat("---:|", len(engines)+len(others)) + "\n")
	for _, r := range rows {
		b.WriteString("| " + r.what + " |")
		for _, e := range engines {
			b.WriteString(" " + r.by[e].cell() + " |")
		}
		base := r.by[pairs.NoKurrentDB]
		for _, e := range others {
			f := r.by[e]
			ratio := "no ratio: a figure is missing"
			if f.ok && base.ok && base.v > 0 {
				ratio = num(f.v/base.v) + "×"
			}
			b.WriteString(" " + ratio + " |")
		}
		b.WriteString("\n")
	}
	return b.String() + "\n"
}

// cell is the figure's table cell.
func (f esFigure) cell() string {
	switch {
	case f.ok:
		return num(f.v)
	case f.text != "":
		return f.text
	}
	return esNotMeasured
}

// esVersionRows are the subsection's figures of every scenario that ran:
// append ops/s per mode and series, the point read's time, the catch-up
// time and its live latency p50, each by engine.
func esVersionRows(es eventstore.Results) []esVersionRow {
	var rows []esVersionRow
	if a := es.Append; a != nil {
		for _, m := range appendModes(a) {
			for _, series := range eventstore.Append.Series {
				if !slices.ContainsFunc(a.Rows, func(r eventstore.AppendRow) bool { return modeOf(r) == m.Name && r.Series == series }) {
					continue
				}
				rows = append(rows, esVersionRow{fmt.Sprintf("append, %s, %s series: ops/s", m.Name, series), appendFigures(a, m.Name, series)})
			}
		}
	}
	if p := es.PointRead; p != nil {
		by := map[string]esFigure{}
		for _, r := range p.Rows {
			if !r.Measured && r.Failed == "" {
				continue // not run here
			}
			if st := pointReadStatus(r); !st.OK() {
				by[r.Engine] = esFigure{text: statusText(st)}
				continue
			}
			by[r.Engine] = esFigure{v: r.MedianMS, ok: true}
		}
		rows = append(rows, esVersionRow{"point read: read time (ms)", by})
	}
	if c := es.CatchUp; c != nil {
		catchUp, live := map[string]esFigure{}, map[string]esFigure{}
		for _, r := range c.Rows {
			catchUp[r.Engine], live[r.Engine] = medianFigure(r.Measured, r.CatchUpMS), medianFigure(r.Measured, r.LiveP50MS)
		}
		rows = append(rows, esVersionRow{"catch-up time (ms)", catchUp}, esVersionRow{"catch-up, live latency p50 (ms)", live})
	}
	return rows
}

// appendFigures are, by engine, the median ops/s of a's valid loops of
// mode and series, or why it has none.
func appendFigures(a *eventstore.AppendResult, mode, series string) map[string]esFigure {
	vs, why := map[string][]float64{}, map[string]string{}
	for _, r := range a.Rows {
		if modeOf(r) != mode || r.Series != series {
			continue
		}
		if st := appendStatus(r); st.OK() {
			vs[r.Engine] = append(vs[r.Engine], r.OpsPerSec)
		} else if why[r.Engine] == "" && r.Measured {
			why[r.Engine] = statusText(st)
		}
	}
	by := map[string]esFigure{}
	for _, e := range a.Engines {
		switch {
		case len(vs[e.Name]) > 0:
			by[e.Name] = esFigure{v: driver.Median(vs[e.Name]), ok: true}
		case why[e.Name] != "":
			by[e.Name] = esFigure{text: why[e.Name]}
		}
	}
	return by
}

// medianFigure is the median of xs, when measured.
func medianFigure(measured bool, xs []float64) esFigure {
	if !measured || len(xs) == 0 {
		return esFigure{}
	}
	return esFigure{v: driver.Median(xs), ok: true}
}

// esCompareEngines are the engines of es's scenarios run on another
// PostgreSQL version than the stack's (eventstore.IsCompareName), in the
// order they first appear.
func esCompareEngines(es eventstore.Results) []string {
	var out []string
	for _, sc := range esScenarios(es) {
		for _, name := range sc.engines {
			if eventstore.IsCompareName(name) && !slices.Contains(out, name) {
				out = append(out, name)
			}
		}
	}
	return out
}

// esEngineLabel is engine's column heading: its rows' label (its server's
// version when two Postgres sides ran), else its name.
func esEngineLabel(es eventstore.Results, engine string) string {
	if a := es.Append; a != nil {
		for _, r := range a.Rows {
			if r.Engine == engine {
				return r.Shown()
			}
		}
	}
	return engine
}

// esCompareOutcome says what became of the other versions a scenario was
// to measure and did not (eventstore.Options.Compare), "failed: …" or
// "not measured: …", with the scenarios each applies to; for files
// without a compared side nor an outcome, that the run did not ask for
// one. "" when every scenario ran one.
func esCompareOutcome(es eventstore.Results) string {
	var texts []string
	names := map[string][]string{}
	for _, sc := range esScenarios(es) {
		o := sc.o.Compare
		var text string
		switch {
		case o != nil && o.Error != "":
			text = "failed: " + md(o.Error)
		case o != nil && o.Why != "":
			text = "not measured: " + md(o.Why)
		case !slices.ContainsFunc(sc.engines, eventstore.IsCompareName):
			text = "not measured: this run measured the stack's PostgreSQL only (`-compare-bindirs`; `make results` adds PostgreSQL 18 when `make deps-cluster` fetched it)"
		default:
			continue
		}
		if names[text] == nil {
			texts = append(texts, text)
		}
		names[text] = append(names[text], sc.name)
	}
	var parts []string
	for _, t := range texts {
		parts = append(parts, strings.Join(names[t], ", ")+": "+t)
	}
	if len(parts) == 0 {
		return ""
	}
	return "Other PostgreSQL versions, " + strings.Join(parts, "; ") + "."
}

// esScenario is one scenario's options and the engines of its rows.
type esScenario struct {
	name    string
	o       eventstore.Options
	engines []string
}

// esScenarios are es's scenarios that ran, in the bench's order.
func esScenarios(es eventstore.Results) []esScenario {
	var out []esScenario
	if a := es.Append; a != nil {
		sc := esScenario{name: "append", o: a.Options}
		for _, r := range a.Rows {
			sc.engines = append(sc.engines, r.Engine)
		}
		out = append(out, sc)
	}
	if p := es.PointRead; p != nil {
		sc := esScenario{name: "point-read", o: p.Options}
		for _, r := range p.Rows {
			sc.engines = append(sc.engines, r.Engine)
		}
		out = append(out, sc)
	}
	if c := es.CatchUp; c != nil {
		sc := esScenario{name: "catch-up", o: c.Options}
		for _, r := range c.Rows {
			sc.engines = append(sc.engines, r.Engine)
		}
		out = append(out, sc)
	}
	return out
}
