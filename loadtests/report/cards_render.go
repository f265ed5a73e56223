package report

import (
	"fmt"
	"strings"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/scenario"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// cardText holds a pair's sentences; the figures come from its Verdict.
type cardText struct {
	// question is the card's heading after the pair's title.
	question string
	// pgWhen opens the "Use Postgres when" sentence.
	pgWhen string
}

// cardTexts are the cards' sentences by pair.
var cardTexts = map[string]cardText{
	pairs.Queue: {question: "a table with `FOR UPDATE SKIP LOCKED`, or RabbitMQ?",
		pgWhen: "each task goes to one worker and must commit with its business row in one transaction"},
	pairs.Log: {question: "logical replication with wal2json, or Kafka?",
		pgWhen: "one consumer reads the stream (one replication slot) and the event must commit with the row"},
	pairs.Documents: {question: "`jsonb` with a GIN index, or MongoDB?",
		pgWhen: "search is containment (`@>`) and large documents are rarely rewritten whole"},
	pairs.EventStore: {question: "an append-only table, or KurrentDB (or Kafka)?",
		pgWhen: "appends must check an expected version and events commit with state"},
	pairs.Cache: {question: "Postgres behind an in-process cache, or Redis?",
		pgWhen: "reads dominate and a stale value must vanish on an out-of-band `UPDATE` (NOTIFY invalidation)"},
}

// MaxBulletChars bounds a card bullet of the README's first screen: a
// sentence a reader takes in at once.
const MaxBulletChars = 400

// rateText says up to which rate Postgres passed, with its range and the
// rule, or why there is no such rate.
func rateText(v Verdict) string {
	if v.PGRate.OK() {
		s := fmt.Sprintf("up to %s %s/s %s", count(int64(v.PGRate.Value)), v.Item, v.RateOp)
		if r := rangeText(v.PGRate); r != "" {
			s += " (" + r + ")"
		}
		return s
	}
	return fmt.Sprintf("though its single-request ceiling (%s) is %s", v.RateOp, v.PGRate.Why)
}

// rangeText is a ceiling's range across its searches ("2,000–2,800 over
// 3 ceiling searches": never bare "searches", which a documents card
// also uses for containment searches), "" for a figure without one.
func rangeText(f Figure) string {
	if !f.OK() || f.N < 2 {
		return ""
	}
	if f.Lo == f.Hi {
		return fmt.Sprintf("every one of %d ceiling searches", f.N)
	}
	return fmt.Sprintf("%s–%s over %d ceiling searches", count(int64(f.Lo)), count(int64(f.Hi)), f.N)
}

// rateFigure is a ceiling figure in a sentence: "2,000/s (1,400–2,000 over
// 3 searches)", "≥ 16,000/s (…)", or why there is none.
func rateFigure(f Figure) string {
	if !f.OK() {
		return f.Why
	}
	s := count(int64(f.Value)) + "/s"
	if f.AtLeast {
		s = "≥ " + s
	}
	if r := rangeText(f); r != "" {
		s += " (" + r + ")"
	}
	return s
}

// specRateClause is what the specialist's own ceiling, under the same
// rule, says about rate as a reason to choose it: a reason only when it
// passed more than Postgres in every search; no reason when Postgres
// passed more in every search; undecided when their ranges overlap. It
// never names a threshold the specialist itself did not pass.
func specRateClause(v Verdict) string {
	spec := v.SpecName()
	switch {
	case !v.PGRate.OK():
		return ""
	case !v.SpecRate.OK():
		return fmt.Sprintf("%s's single-request ceiling (%s): %s", spec, v.RateOp, v.SpecRate.Why)
	case v.SpecRate.Lo > v.PGRate.Hi || (v.SpecRate.AtLeast && v.SpecRate.Value > v.PGRate.Hi):
		return fmt.Sprintf("or more than %s %s/s %s: %s passed %s under the same rule", count(int64(v.PGRate.Hi)), v.Item, v.RateOp, spec, rateFigure(v.SpecRate))
	case v.SpecRate.Hi < v.PGRate.Lo || (v.PGRate.AtLeast && v.PGRate.Value > v.SpecRate.Hi):
		return fmt.Sprintf("not for its rate: under the same rule %s passed %s, Postgres more (%s)", spec, rateFigure(v.SpecRate), v.RateOp)
	}
	return fmt.Sprintf("not for its rate: under the same rule their ceilings overlap (%s %s, Postgres %s, %s)", spec, rateFigure(v.SpecRate), rateFigure(v.PGRate), v.RateOp)
}

// PGBullet is the card's "Use Postgres when" sentence: when, up to which
// rate with its range, under which rule.
func PGBullet(v Verdict) string {
	t := cardTexts[v.Pair]
	s := fmt.Sprintf("**Use Postgres when** %s, %s", t.pgWhen, rateText(v))
	if v.RateCriterion != "" && v.PGRate.OK() {
		s += "; " + v.RateCriterion
	}
	return s + "."
}

// SpecBullet is the card's "Use <specialist> when" sentence: what only the
// specialist does, and what its own measured ceiling says about rate.
func SpecBullet(v Verdict) string {
	s := fmt.Sprintf("**Use %s when** you need %s", v.Specialist, strings.Join(v.SpecOnly, ", or "))
	if c := specRateClause(v); c != "" {
		if strings.HasPrefix(c, "or ") {
			s += ", " + c
		} else {
			s += "; " + c
		}
	}
	if v.SpecConfidence == NotRunKurrentDB {
		s += "; " + v.Specialist + " did not run here, so none of its figures is known"
	}
	if v.Alt != "" {
		s += ". " + v.Alt
	}
	return s + "."
}

// ShortCard is a pair's answer on the README's first screen: its
// question, the two bullets, and a link to the whole card.
func ShortCard(v Verdict) string {
	t := cardTexts[v.Pair]
	return fmt.Sprintf("### %s: %s\n\n- %s\n- %s\n\n[The whole card](RESULTS.md#%s): single-request ceilings at three SLOs, batches, CPU per process, failover, confidence.\n",
		v.Title, t.question, PGBullet(v), SpecBullet(v), anchor(cardHeading(v)))
}

// cardHeading is the heading of a pair's whole card in RESULTS.md.
func cardHeading(v Verdict) string {
	return fmt.Sprintf("%s: %s", v.Title, cardTexts[v.Pair].question)
}

// cpuText is the CPU cost of both sides at one rate, by process, or why it
// is missing.
func cpuText(v Verdict) string {
	what := "CPU per 1,000 " + v.Item
	switch {
	case !v.PGCPU.Design.OK() && !v.SpecCPU.Design.OK() && v.PGCPU.Design.Why == v.SpecCPU.Design.Why:
		return what + ": " + v.PGCPU.Design.Why
	case v.CPUAt > 0:
		what += fmt.Sprintf(" at %s/s %s (the highest rate both passed), each design's processes", count(int64(v.CPUAt)), v.RateOp)
	}
	return fmt.Sprintf("%s: Postgres %s; %s %s", what, v.PGCPU, v.SpecName(), v.SpecCPU)
}

// sloText words the ceilings of both sides at every SLO read.
func sloLine(v Verdict) string {
	if len(v.PGSLO) == 0 {
		return ""
	}
	var parts []string
	for i, slo := range scenario.CeilingSLOs {
		if i >= len(v.PGSLO) || i >= len(v.SpecSLO) {
			break
		}
		parts = append(parts, fmt.Sprintf("p99 < %s: Postgres %s, %s %s", ms(float64(slo.Milliseconds())), rateFigure(v.PGSLO[i]), v.SpecName(), rateFigure(v.SpecSLO[i])))
	}
	return strings.Join(parts, "; ")
}

// Card renders one pair's whole verdict card (RESULTS.md's Verdicts):
// the two answers, then the figures behind them.
func Card(v Verdict) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("### %s\n\n", cardHeading(v))
	if v.Chart != "" {
		w("![%s: measured thresholds](%s)\n\n", v.Title, v.Chart)
	}
	w("- %s\n- %s\n", PGBullet(v), SpecBullet(v))
	if l := sloLine(v); l != "" {
		op := v.RateOp
		if v.Guarantee != "" {
			op += "; " + v.Guarantee
		}
		w("- **Single requests** (%s), the highest rate a majority of ceiling searches passed at each p99 bound: %s.", op, l)
		if v.SpecOverload != "" {
			w(" Under overload: %s.", v.SpecOverload)
		}
		w("\n")
	}
	if len(v.Designs) > 0 {
		w("- **Other designs, one per request, the same rule:** %s.\n", strings.Join(v.Designs, "; "))
	}
	if v.SustainedAt != "" {
		w("- **In batches** (%s, open loop; backlog flat, end-to-end p99 < %s ms; the rate 2 of 3 rounds passed): Postgres %s, %s %s.\n",
			v.SustainedAt, count(scenario.SustainSLO.Milliseconds()), rateFigure(v.PGSustained), v.SpecName(), rateFigure(v.SpecSustained))
	}
	w("- **Cost:** %s.\n", capitalize(cpuText(v)))
	if len(v.Roles) > 0 {
		w("- **Beyond the cache** ([%s](#%s)): %s.\n", RolesTitle, anchor(RolesTitle), strings.Join(v.Roles, ". "))
	}
	if len(v.Beyond) > 0 {
		var cs []string
		for _, c := range v.Beyond {
			cs = append(cs, capitalize(c))
		}
		w("- **Beyond CRUD** ([%s](#%s)): %s.\n", BeyondCRUDTitle, anchor(BeyondCRUDTitle), strings.Join(cs, ". "))
	}
	w("- **Latency:** %s: Postgres %s, %s %s.\n", v.LatencyWhat, v.PGLatency, v.SpecName(), v.SpecLatency)
	w("- **Bites Postgres first:** %s.", v.Bites)
	if v.MaxRate > 0 {
		w(" The highest rate offered to either side: %s %s/s%s; above it nothing was measured.", count(int64(v.MaxRate)), v.Item, v.MaxRateHow)
	}
	w("\n")
	w("- **On failover** (3 nodes each, [Replicated and failover](#%s)): %s.", anchor(FailoverTitle), failoverLine(v))
	if v.LoseNothing != "" {
		w(" **To lose nothing:** %s.", v.LoseNothing)
	}
	w("\n")
	conf := v.SpecConfidence
	if conf == MeasuredHere {
		server := v.Specialist
		if v.SpecServer != "" {
			server = v.SpecServer
		}
		conf = server + " " + conf
	}
	if v.Claims != "" {
		conf += fmt.Sprintf("; [claims of the reference](#claims): %s", v.Claims)
	}
	w("- **Confidence:** Postgres %s; %s. **Details:** [%s](%s), [the pair's section](#%s)\n", MeasuredHere, conf, v.Doc, v.Doc, anchor(v.Section))
	return b.String()
}

// capitalize upper-cases the first letter of s.
func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// failoverLine is the card's failover sentence: the verdict's, or why the
// pair has none.
func failoverLine(v Verdict) string {
	if v.Failover == "" {
		return "not measured for this pair (the cluster profile's experiments cover the queue and the log)"
	}
	return v.Failover
}
