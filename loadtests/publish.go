package main

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
	var runs []*driver.Run
	for _, f := range files {
		r, err := driver.ReadRun(f)
		if err != nil {
			return err
		}
		runs = append(runs, r)
	}
	es, err := eventstore.Load(c.resultsDir)
	if err != nil {
		return err
	}
	return report.PublishDecision(report.FailedPoints(runs, es), c.publishFailed)
}
