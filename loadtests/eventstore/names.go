package eventstore

import "github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"

// AppendScenarioName is the scenario of the append points of the mode
// named mode: "eventstore.append.<mode>".
func AppendScenarioName(mode string) driver.ScenarioName {
	return driver.ScenarioName(appendPrefix + mode)
}

// The cleanup point's live-load metrics, per phase (CleanupMetric).
const (
	AppendOf  = "append_"
	DeliverOf = "deliver_"
)

// CleanupMetric is the live load's figure of phase ph during a cleanup:
// kind (AppendOf, DeliverOf), the phase, "_", what (driver.SuffixP50,
// "n"): "append_during_p99_ms".
func CleanupMetric(kind, ph, what string) driver.Metric {
	return driver.Metric(kind + ph + "_" + what)
}
