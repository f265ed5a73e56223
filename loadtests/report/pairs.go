package report

import (
	"slices"
	"strings"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/eventstore"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// pairReport is how the report shows one pair of services/kit/pairs: its
// RESULTS.md section, the charts under it and its claims. A pair's claims
// file registers its entry (registerReport) beside its claims: adding a
// pair to the report means that one file.
type pairReport struct {
	// name is the pair's name and its runs' command.
	name string
	// title is the heading of its RESULTS.md section, which the README's
	// findings and the verdict cards link to.
	title string
	// section, when set, writes the pair's whole section from its run
	// (the cache). Otherwise the pair gets the tables every pair's
	// scenarios share, then after's subsection (when set), its knee, the
	// chart keyed by its name (Charts' rate-latency charts), its own
	// chart and the run's notes.
	section func(r *driver.Run, charts map[string]string, chartsRel string) string
	after   func(r *driver.Run) string
	// overview, when set, draws the chart keyed by the pair's name,
	// shown under its tables with caption: the rate pairs' latency per
	// rate, the documents' cost ratios. It returns the chart's file name
	// and whether it was drawn.
	overview func(run *driver.Run, dir string) (string, bool, error)
	caption  string
	// chart, when set, is the pair's own chart, drawn from its run and
	// shown under its section (unless section draws it).
	chart *pairChart
	// card is the key of the chart copied as the pair's headline chart,
	// CardFile(name) ("" when another chart draws it: the log's, from
	// the throughput run).
	card string
	// runs, when set, are the commands of the results files a pair
	// measured by a bench of its own writes (the event store's,
	// eventstore.Commands()): the report reads them in the same list of
	// runs as every other pair's, and benchSection writes the pair's
	// section from them, under the other pairs' sections.
	runs         []string
	benchSection func(runs []*driver.Run) string
	// claims are the short names of the pair's claims outside
	// claimTable (the event store's causal claim, decided by its
	// experiment); the rows of claimTable name their pair themselves.
	claims []string
	// ceiling is where the pair's single-request ceiling is read: its
	// card's rates and CPU.
	ceiling rateSource
	// verdict, when set, reads the pair's card from the inputs: its
	// figures and the specialist's name, under Pair (the entry's name).
	// verdictsOf fills what the entry already says (Section, Doc,
	// Chart).
	verdict func(in *inputs) Verdict
	// text is the card's sentences (its question, "Use Postgres when").
	text cardText
	// findings, when set, is the pair's row of the README's findings and
	// its answers to the decision questions; findingSpecs fills its
	// section and verdict from the entry.
	findings *pairSpec
}

// pairReportsByName is the report's pair table: each pair's claims file
// registers its entry (registerReport), beside its claims.
var pairReportsByName = map[string]pairReport{}

// registerReport adds a pair's entry to the report's pair table; a pair
// registered twice is a programming error.
func registerReport(p pairReport) {
	if _, dup := pairReportsByName[p.name]; dup {
		panic("report: pair " + p.name + " registered twice")
	}
	pairReportsByName[p.name] = p
}

// pairReports are the registered pairs in the report's one order: that
// of services/kit/pairs, the pairs measured by a bench of their own
// (runs) after the others, as their sections are, and a pair the kit's
// table lacks (a test's) last. RESULTS.md's sections, the cards, the
// README's findings and advise all follow it.
func pairReports() []pairReport {
	rank := map[string]int{}
	for i, name := range pairs.Names() {
		rank[name] = i + 1
	}
	out := make([]pairReport, 0, len(pairReportsByName))
	for _, p := range pairReportsByName {
		out = append(out, p)
	}
	key := func(p pairReport) (bool, int) {
		r, known := rank[p.name]
		if !known {
			r = len(rank) + 1
		}
		return p.runs != nil, r
	}
	slices.SortFunc(out, func(a, b pairReport) int {
		ab, ar := key(a)
		bb, br := key(b)
		switch {
		case ab != bb:
			if ab {
				return 1
			}
			return -1
		case ar != br:
			return ar - br
		}
		return strings.Compare(a.name, b.name)
	})
	return out
}

// CardPairs are the pairs with a verdict card, in card order (the
// report's one order, pairReports): the pairs advise knows.
func CardPairs() []string {
	var out []string
	for _, p := range pairReports() {
		if p.verdict != nil {
			out = append(out, p.name)
		}
	}
	return out
}

// pairChart is a chart drawn from one pair's run.
type pairChart struct {
	// key names the chart in Charts' map, file is its file name.
	key, file string
	draw      func(r *driver.Run, path string) (bool, error)
}

// splitBench separates the runs of the pairs measured by a bench of their
// own (a pairReport's runs) from all and returns both, each in all's
// order: the other runs go through the pairs' sections, claims and
// charts; the bench runs through eventStoreOf and benchSection.
func splitBench(all []*driver.Run) (rest, bench []*driver.Run) {
	for _, r := range all {
		if r != nil && benchCommand(r.Command) {
			bench = append(bench, r)
		} else {
			rest = append(rest, r)
		}
	}
	return rest, bench
}

// benchCommand reports whether cmd is one of a pairReport's runs.
func benchCommand(cmd string) bool {
	for _, p := range pairReportsByName {
		if slices.Contains(p.runs, cmd) {
			return true
		}
	}
	return false
}

// eventStoreOf is the event store's results read from its runs among
// runs (eventstore.FromRuns). A run whose settings do not decode leaves
// its scenario out: eventstore.LoadRuns, which the commands read the
// runs with, refuses such a file before anything is written.
func eventStoreOf(runs []*driver.Run) eventstore.Results {
	es, _ := eventstore.FromRuns(runs)
	return es
}

// reportOf returns the named pair's entry.
func reportOf(name string) (pairReport, bool) {
	p, ok := pairReportsByName[name]
	return p, ok
}

// titleOf is the heading of the named pair's section ("" for none).
func titleOf(name string) string {
	p, _ := reportOf(name)
	return p.title
}

// pairCommands are the pairs' commands in the report's order.
func pairCommands() []string {
	var out []string
	for _, p := range pairReports() {
		out = append(out, p.name)
	}
	return out
}

// PairCoverage says what the report has for the named pair: a section
// (its title and a way to render it) and claims. It is "" when the pair
// has both, and names what is missing otherwise.
func PairCoverage(name string) string {
	p, ok := reportOf(name)
	switch {
	case !ok:
		return "no entry in the report's pair table (registerReport)"
	case p.title == "":
		return "no section title"
	}
	n := len(p.claims)
	for _, s := range claimTable {
		if s.pair == name {
			n++
		}
	}
	if n == 0 {
		return "no claims"
	}
	return ""
}
