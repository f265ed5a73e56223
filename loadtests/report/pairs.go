package report

import (
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/eventstore"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// pairReport is how the report shows one pair of services/kit/pairs: its
// RESULTS.md section, the charts under it and its claims. Adding a pair
// to the report means one entry of pairReports and the pair's own file
// (its section, if it is not the rate pairs' tables, and its claims).
type pairReport struct {
	// name is the pair's name and its runs' command.
	name string
	// title is the heading of its RESULTS.md section, which the README's
	// findings and the verdict cards link to.
	title string
	// section, when set, writes the pair's whole section from its run
	// (the cache). Otherwise the pair gets the tables every pair's
	// scenarios share, then after's subsection (when set), its knee, its
	// chart (the one keyed by its name), the charts keyed by charts and
	// the run's notes.
	section func(r *driver.Run, charts map[string]string, chartsRel string) string
	after   func(r *driver.Run) string
	charts  []string
	// benchSection, when set, writes the section of a pair measured by
	// its own bench (the event store), from the bench's results, under
	// the other pairs' sections.
	benchSection func(es eventstore.Results) string
	// claims are the short names of the pair's claims outside
	// claimTable (the event store's causal claim, decided by its
	// experiment); the rows of claimTable name their pair themselves.
	claims []string
}

// pairReports is the report's pair table, in the order of RESULTS.md's
// sections: one entry per pair of services/kit/pairs.
var pairReports = []pairReport{
	{name: pairs.Queue, title: "Queue: rabbitmq vs no-rabbitmq", after: OutboxSection, charts: []string{"queue-rate"}},
	{name: pairs.Log, title: "Log: kafka vs no-kafka", charts: []string{"log-rate"}},
	{name: pairs.Documents, title: "Documents: mongodb vs no-mongodb", charts: []string{"toast"}},
	{name: pairs.Cache, title: CacheTitle, section: cacheSection},
	{name: pairs.EventStore, title: eventstore.SectionTitle, benchSection: EventStoreSection, claims: []string{causalShort}},
}

// reportOf returns the named pair's entry.
func reportOf(name string) (pairReport, bool) {
	for _, p := range pairReports {
		if p.name == name {
			return p, true
		}
	}
	return pairReport{}, false
}

// titleOf is the heading of the named pair's section ("" for none).
func titleOf(name string) string {
	p, _ := reportOf(name)
	return p.title
}

// pairCommands are the pairs' commands in the order of their sections.
func pairCommands() []string {
	var out []string
	for _, p := range pairReports {
		out = append(out, p.name)
	}
	return out
}

// cacheSection is the cache pair's section and its staleness chart.
func cacheSection(r *driver.Run, charts map[string]string, chartsRel string) string {
	return CacheSection(r) + "\n" + chartLine(charts, "staleness", chartsRel)
}

// PairCoverage says what the report has for the named pair: a section
// (its title and a way to render it) and claims. It is "" when the pair
// has both, and names what is missing otherwise.
func PairCoverage(name string) string {
	p, ok := reportOf(name)
	switch {
	case !ok:
		return "no entry in report's pairReports"
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
