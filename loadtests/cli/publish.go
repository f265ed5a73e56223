package cli

import (
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/report"
)

// publishVerdict is the results command's last step: an error naming
// every failed point of the run's files and the event-store bench's
// (report.PublishDecision), unless -publish-failed was given or nothing
// failed. The report is already written, with the failed points shown as
// failed.
func publishVerdict(c common, files []string) error {
	runs, err := report.ReadInputs(c.resultsDir, files)
	if err != nil {
		return err
	}
	return report.PublishDecision(report.FailedPoints(runs), c.publishFailed)
}
