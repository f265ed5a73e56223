package scenario

import "github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"

// Explain returns the sentences that explain run's figures, in the order
// the scenarios measure them: each is generated from run's settings and
// points by a function beside the scenario it explains, so that results
// files hold figures, statuses and settings only (driver.SchemaVersion 2).
// The report prints them under the run, before its incidents
// (Run.Notes); a file of schema 1 kept them in its notes instead.
func Explain(run *driver.Run) []string {
	var out []string
	for _, explain := range []func(*driver.Run) []string{ownBoundNotes, reusedDefaultNotes, walNotes, cacheNotes, cacheRolesNotes} {
		out = append(out, explain(run)...)
	}
	return out
}

// hasPoint reports whether run holds a point of scenario.
func hasPoint(run *driver.Run, scenario driver.ScenarioName) bool {
	for i := range run.Points {
		if run.Points[i].Scenario == scenario {
			return true
		}
	}
	return false
}
