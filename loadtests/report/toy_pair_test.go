package report

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
)

// toyPair is a pair the project does not have, added to the report the
// way docs/adding-a-pair.md says: one Pair, given to Use as the load
// driver gives every entry of its pair table, and the rows of its
// claims, nothing else. cli's TestToyPairIsDriven registers a toy the
// driver's way, through loadPairs.
const toyPair = "toy"

// registerToy adds the toy pair's entry and its claim, as a pair's
// claims file does in its init, and takes both out after the test.
func registerToy(t testing.TB) {
	t.Helper()
	saved, savedPairs := slices.Clone(claimTable), pairReports()
	Use(append(pairReports(), Pair{
		Name:  toyPair,
		Title: "Toy: toy-specialist vs no-toy",
		section: func(r *driver.Run, _ map[string]string, _ string) string {
			return "\n## Toy: toy-specialist vs no-toy\n\nThe toy section of " + r.ID + ".\n"
		},
		ceiling: rateSource{toyPair, "toy.ceiling", "one toy per request"},
		verdict: func(in *inputs) Verdict {
			none := Figure{Why: "not measured"}
			return Verdict{Pair: toyPair, Title: "Toy", Specialist: "ToySpecialist", Item: "toys", SpecOnly: []string{"toy things"},
				PGRate: none, SpecRate: none, PGLatency: none, SpecLatency: none, PGCPU: CPUCost{Design: none}, SpecCPU: CPUCost{Design: none}}
		},
		text: cardText{question: "a toy table, or ToySpecialist?", pgWhen: "the toy fits in a table"},
		findings: &pairSpec{name: toyPair, doc: "docs/toy.md", claims: toyPair,
			has:      func(in *inputs) bool { return in.rs[toyPair] != nil },
			headline: func(*inputs) string { return "Toys were measured." },
			servers:  func(*inputs) string { return "ToySpecialist 1.0" },
			answers:  map[string]func(*inputs) string{"semantics": func(*inputs) string { return "a toy is a toy on both sides." }}},
	})...)
	claimTable = append(claimTable, claimSpec{pair: toyPair, short: "toys fit", claimText: claimText{claim: "A toy fits in a table", rule: "the toy run exists"},
		evaluate: func(in claimInputs) outcome {
			if in.rs[toyPair] == nil {
				return outcome{missing: "the toy run"}
			}
			return outcome{measured: "one toy run", holds: true}
		}})
	t.Cleanup(func() {
		Use(savedPairs...)
		claimTable = saved
	})
}

// TestToyPair: adding a pair to the report is one registration plus its
// files. A toy pair's entry and claim make it appear in every list the
// report derives from the pair table: the report's inputs, the coverage
// check, RESULTS.md's section, claims and cards, the README's findings
// and the pairs advise knows. Not parallel: it changes the pair table,
// which the parallel tests read only after it is restored.
func TestToyPair(t *testing.T) {
	registerToy(t)
	if !slices.Contains(InputCommands(), toyPair) {
		t.Errorf("InputCommands() = %v: the toy pair's runs are not read", InputCommands())
	}
	if why := PairCoverage(toyPair); why != "" {
		t.Errorf("PairCoverage(toy) = %q", why)
	}
	if !slices.Contains(CardPairs(), toyPair) {
		t.Errorf("CardPairs() = %v: advise does not know the toy pair", CardPairs())
	}
	toy := &driver.Run{ID: "20261207T000000Z-toy", Command: toyPair, StartedAt: time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)}
	toy.FinishedAt = toy.StartedAt.Add(time.Minute)
	rs := append(readRuns(t, "testdata"), toy)

	var b bytes.Buffer
	Markdown(&b, rs, ChartLinks{Files: map[string]string{}, Rel: "results"}, time.Now(), Sources{})
	results := b.String()
	for _, want := range []string{
		"`results/20261207T000000Z-toy.json` (toy,",
		"The toy section of 20261207T000000Z-toy.",
		"| toy | A toy fits in a table | the toy run exists | one toy run | **" + Holds + "** |",
		"### Toy: a toy table, or ToySpecialist?",
		"**Use Postgres when** the toy fits in a table",
	} {
		if !strings.Contains(results, want) {
			t.Errorf("RESULTS.md lacks %q", want)
		}
	}
	readme := findings(findingSpecs(), rs, eventStoreOf(nil))
	for _, want := range []string{"### Toy: a toy table, or ToySpecialist?", "- **toy**: a toy is a toy on both sides."} {
		if !strings.Contains(readme, want) {
			t.Errorf("the README's findings lack %q:\n%s", want, readme)
		}
	}
	i := slices.IndexFunc(Verdicts(rs), func(v Verdict) bool { return v.Pair == toyPair })
	if i < 0 {
		t.Fatal("Verdicts has no toy card")
	}
	if v := Verdicts(rs)[i]; v.Doc != "docs/toy.md" || v.Section != "Toy: toy-specialist vs no-toy" || v.Chart != "docs/results/toy-card.svg" {
		t.Errorf("the toy card is %+v, want its doc, section and chart from its entry", v)
	}
}
