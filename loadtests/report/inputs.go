package report

import (
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/eventstore"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/resultfile"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/scenario"
)

// InputCommands are the commands whose newest results file the report
// reads, in the order of its sections: every registered pair's (a pair
// without a file of its own, the event store, is read by
// eventstore.LoadRuns instead), then the long-lived, throughput and
// scale-out runs. The one list of them: `report`, `advise` and the
// report's own sections all read it.
func InputCommands() []string {
	return append(pairCommands(), scenario.LongLivedCommand, scenario.ThroughputCommand, scenario.ScaleOutCommand)
}

// NewestInputs are the files a report reads by default: the newest
// results file of each InputCommands in dir that has one.
func NewestInputs(dir string) []string {
	var files []string
	for _, c := range InputCommands() {
		if f := resultfile.Newest(dir, resultfile.Kind(c)); f != "" {
			files = append(files, f)
		}
	}
	return files
}

// ReadInputs reads the runs a report is made of: each of files (as
// NewestInputs lists them, or as a user named them), then the event
// store's runs in dir (eventstore.LoadRuns). A file that does not parse
// is an error naming it, before anything is written.
func ReadInputs(dir string, files []string) ([]*driver.Run, error) {
	var runs []*driver.Run
	for _, f := range files {
		r, err := driver.ReadRun(f)
		if err != nil {
			return nil, err
		}
		runs = append(runs, r)
	}
	es, err := eventstore.LoadRuns(dir)
	if err != nil {
		return nil, err
	}
	return append(runs, es...), nil
}
