package cli

import (
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/eventstore"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/report"
)

// publishVerdict is the results command's last step: an error naming
// every failed point of the run's files and the event-store bench's
// (report.PublishDecision), unless -publish-failed was given or nothing
// failed. The report is already written, with the failed points shown as
// failed.
func publishVerdict(c common, files []string) error {
	runs, err := readInputs(c, files)
	if err != nil {
		return err
	}
	return report.PublishDecision(report.FailedPoints(runs), c.publishFailed)
}

// readInputs reads the report's runs: each results file of files
// (driver.ReadRun), in order, then the event store's runs in
// c.resultsDir (eventstore.LoadRuns). The first that does not read is
// the error.
func readInputs(c common, files []string) ([]*driver.Run, error) {
	var runs []*driver.Run
	for _, f := range files {
		r, err := driver.ReadRun(f)
		if err != nil {
			return nil, err
		}
		runs = append(runs, r)
	}
	es, err := eventstore.LoadRuns(c.resultsDir)
	if err != nil {
		return nil, err
	}
	return append(runs, es...), nil
}
