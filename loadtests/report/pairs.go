package report

import (
	"slices"
	"strconv"
	"strings"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/eventstore"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// Pair is how the report shows one pair of services/kit/pairs: its
// RESULTS.md section, the charts under it, its verdict card, its row of
// the README's findings and the questions it answers. The load driver
// registers it once, in the pair's one entry of its pair table (cli's
// loadPairs), which hands every entry's Pair to Use; the values of the
// project's pairs come from this package (Queue, Log, Documents, Cache,
// EventStore), each built in the pair's own file beside its claims. Only
// Name and Title are exported: a pair is otherwise built here.
type Pair struct {
	// Name is the pair's name and its runs' command.
	Name string
	// Title is the heading of its RESULTS.md section, which the README's
	// findings and the verdict cards link to.
	Title string
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

// pairTable is the report's pair table, by name: what Use was last given.
// It is written only by Use (at start-up, or by a test that is not
// parallel) and read by everything else.
var pairTable = map[string]Pair{}

// Use makes ps the report's pair table, replacing what it held: the load
// driver calls it once at start-up with every entry of its pair table. A
// pair without a name, or two of one name, is a programming error. Not
// safe to call while a report is being made.
func Use(ps ...Pair) {
	t := make(map[string]Pair, len(ps))
	for _, p := range ps {
		if _, dup := t[p.Name]; dup || p.Name == "" {
			panic("report: pair " + strconv.Quote(p.Name) + " given twice or unnamed")
		}
		t[p.Name] = p
	}
	pairTable = t
}

// pairReports are the registered pairs in the report's one order: that
// of services/kit/pairs, the pairs measured by a bench of their own
// (runs) after the others, as their sections are, and a pair the kit's
// table lacks (a test's) last. RESULTS.md's sections, the cards, the
// README's findings and advise all follow it.
func pairReports() []Pair {
	rank := map[string]int{}
	for i, name := range pairs.Names() {
		rank[name] = i + 1
	}
	out := make([]Pair, 0, len(pairTable))
	for _, p := range pairTable {
		out = append(out, p)
	}
	key := func(p Pair) (bool, int) {
		r, known := rank[p.Name]
		if !known {
			r = len(rank) + 1
		}
		return p.runs != nil, r
	}
	slices.SortFunc(out, func(a, b Pair) int {
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
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

// CardPairs are the pairs with a verdict card, in card order (the
// report's one order, pairReports): the pairs advise knows.
func CardPairs() []string {
	var out []string
	for _, p := range pairReports() {
		if p.verdict != nil {
			out = append(out, p.Name)
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
// own (a Pair's runs) from all and returns both, each in all's
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

// benchCommand reports whether cmd is one of a Pair's runs.
func benchCommand(cmd string) bool {
	for _, p := range pairTable {
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
func reportOf(name string) (Pair, bool) {
	p, ok := pairTable[name]
	return p, ok
}

// titleOf is the heading of the named pair's section ("" for none).
func titleOf(name string) string {
	p, _ := reportOf(name)
	return p.Title
}

// pairCommands are the pairs' commands in the report's order.
func pairCommands() []string {
	var out []string
	for _, p := range pairReports() {
		out = append(out, p.Name)
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
		return "no entry in the report's pair table (Use)"
	case p.Title == "":
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
