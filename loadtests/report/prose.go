package report

import (
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/scenario"
)

// notesOf is what the report says under run, one "Note:" line each: the
// sentences that explain its figures, generated beside the scenarios
// that measured them (scenario.Explain), then its incidents (Run.Notes).
// A file of schema 1 kept both in its notes, in the order they were
// written: those are printed as they are, each once.
func notesOf(run *driver.Run) []string {
	if run.Schema < 2 {
		return run.Notes
	}
	return append(scenario.Explain(run), run.Notes...)
}

// criteriaOf words what a passing step of c is: from its Spec
// (scenario.CriteriaText), or, in a file of schema 1 that recorded no
// Spec, the words it recorded.
func criteriaOf(c *driver.Ceiling) string {
	if c.Spec != nil {
		return scenario.CriteriaText(*c.Spec)
	}
	return c.Criteria
}
