package report

import (
	_ "embed"
	"fmt"
	"strings"
	"text/template"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/scenario"
)

// cardText holds a pair's sentences; the figures come from its Verdict.
type cardText struct {
	// question is the card's heading after the pair's title.
	question string
	// pgWhen opens the "Use Postgres when" sentence.
	pgWhen string
}

// textOf is the named pair's card sentences (its entry's text).
func textOf(pair string) cardText {
	p, _ := reportOf(pair)
	return p.text
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
// rate with its range, under which rule (cards.tmpl's "pg").
func PGBullet(v Verdict) string { return renderCard("pg", v) }

// SpecBullet is the card's "Use <specialist> when" sentence: what only the
// specialist does, and what its own measured ceiling says about rate
// (cards.tmpl's "spec").
func SpecBullet(v Verdict) string { return renderCard("spec", v) }

// ShortCard is a pair's answer on the README's first screen: its
// question, the two bullets, and a link to the whole card (cards.tmpl's
// "short").
func ShortCard(v Verdict) string { return renderCard("short", v) }

// cardHeading is the heading of a pair's whole card in RESULTS.md.
func cardHeading(v Verdict) string {
	return fmt.Sprintf("%s: %s", v.Title, textOf(v.Pair).question)
}

// cpuText is the CPU cost of both sides at one rate, by process, or why it
// is missing.
func cpuText(v Verdict) string {
	what := "CPU per 1,000 " + v.Item
	switch {
	case !v.PGCPU.Design.OK() && !v.SpecCPU.Design.OK() && v.PGCPU.Design.Why == v.SpecCPU.Design.Why:
		return what + ": " + v.PGCPU.Design.Why
	case v.CPUAt > 0:
		both := "both"
		if v.AltCPU != nil {
			both = "Postgres and " + v.AltName + " both"
		}
		what += fmt.Sprintf(" at %s/s %s (the highest rate %s passed), each design's processes", count(int64(v.CPUAt)), v.RateOp, both)
	}
	out := fmt.Sprintf("%s: Postgres %s; %s %s", what, v.PGCPU, v.SpecName(), v.SpecCPU)
	if v.AltCPU != nil {
		out += fmt.Sprintf("; %s (%s) %s", v.AltName, v.AltWhat, v.AltCPU)
	}
	return out
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
// the two answers, then the figures behind them (cards.tmpl's "card").
func Card(v Verdict) string { return renderCard("card", v) }

//go:embed cards.tmpl
var cardsText string

// cardTemplates are the cards' sentences, cards.tmpl: each template takes
// a cardView.
var cardTemplates = template.Must(template.New("cards.tmpl").Option("missingkey=error").Funcs(template.FuncMap{
	"join":      strings.Join,
	"anchor":    anchor,
	"rate":      rateFigure,
	"hasPrefix": strings.HasPrefix,
}).Parse(cardsText))

// renderCard executes the named template of cards.tmpl on v. The
// templates are parsed at start and read only cardView's fields and
// methods, so an error is a programming error.
func renderCard(name string, v Verdict) string {
	return execute(cardTemplates, name, cardView{v})
}

// cardView is what cards.tmpl reads: a Verdict and the phrases its
// figures make.
type cardView struct{ Verdict }

// Heading is the card's heading.
func (c cardView) Heading() string { return cardHeading(c.Verdict) }

// PGBullet and SpecBullet are the card's two answers.
func (c cardView) PGBullet() string   { return PGBullet(c.Verdict) }
func (c cardView) SpecBullet() string { return SpecBullet(c.Verdict) }

// PGWhen opens the "Use Postgres when" sentence (the pair entry's text).
func (c cardView) PGWhen() string { return textOf(c.Pair).pgWhen }

// RateText says up to which rate Postgres passed, or why there is none.
func (c cardView) RateText() string { return rateText(c.Verdict) }

// SpecRateClause is what the specialist's own ceiling says about rate.
func (c cardView) SpecRateClause() string { return specRateClause(c.Verdict) }

// NotRun is true when the specialist did not run here.
func (c cardView) NotRun() bool { return c.SpecConfidence == NotRunKurrentDB }

// SLOLine is both sides' ceilings at every SLO read ("" for none).
func (c cardView) SLOLine() string { return sloLine(c.Verdict) }

// SingleOp is what one request is, with the guarantee the ceiling held.
func (c cardView) SingleOp() string {
	if c.Guarantee != "" {
		return c.RateOp + "; " + c.Guarantee
	}
	return c.RateOp
}

// SustainSLO is the batches' end-to-end p99 bound in milliseconds.
func (c cardView) SustainSLO() string { return count(scenario.SustainSLO.Milliseconds()) }

// Cost is the CPU cost of both sides, capitalized.
func (c cardView) Cost() string { return capitalize(cpuText(c.Verdict)) }

// BeyondClauses are the documents' features beyond CRUD, each capitalized.
func (c cardView) BeyondClauses() []string {
	var cs []string
	for _, s := range c.Beyond {
		cs = append(cs, capitalize(s))
	}
	return cs
}

// MaxRateText is the highest rate offered to either side.
func (c cardView) MaxRateText() string { return count(int64(c.MaxRate)) }

// FailoverLine is the card's failover sentence.
func (c cardView) FailoverLine() string { return failoverLine(c.Verdict) }

// The headings the card links to, and the confidence every Postgres side
// has.
func (cardView) RolesTitle() string      { return RolesTitle }
func (cardView) BeyondCRUDTitle() string { return BeyondCRUDTitle }
func (cardView) FailoverTitle() string   { return FailoverTitle }
func (cardView) MeasuredHere() string    { return MeasuredHere }

// Confidence is the specialist's confidence with its server and the
// reference's claims scored on the pair.
func (c cardView) Confidence() string {
	conf := c.SpecConfidence
	if conf == MeasuredHere {
		server := c.Specialist
		if c.SpecServer != "" {
			server = c.SpecServer
		}
		conf = server + " " + conf
	}
	if c.Claims != "" {
		conf += "; [claims of the reference](#claims): " + c.Claims
	}
	return conf
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
