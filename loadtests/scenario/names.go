package scenario

import (
	"fmt"
	"strconv"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
)

// The kinds of a pair's points, the part of their scenario after the
// pair's name (PairScenarioName): "queue.rate", "log.overload".
const (
	KindRate            = "rate"
	KindDefault         = "default"
	KindOverload        = "overload"
	KindBatchThroughput = "batch_throughput"
	KindAtThroughput    = "at_throughput"
)

// PairScenarioName is the scenario of a pair's points of kind:
// "queue.rate".
func PairScenarioName(pair, kind string) driver.ScenarioName {
	return driver.ScenarioName(pair + "." + kind)
}

// RateScenarioName is the scenario of a pair's fixed-rate points
// ("queue.rate").
func RateScenarioName(pair string) driver.ScenarioName { return PairScenarioName(pair, KindRate) }

// CostTotal names the sum of the process groups in a per-group CPU
// metric ("cpu.total.s", "cpu_per_k.total").
const CostTotal = "total"

// The families of per-name metrics: a process group's CPU-seconds and
// cores, a cache phase's CPU per 1,000 requests, the stampede's figures
// per burst, the documents rewrite point's WAL per operation and cost
// ratio per quantile.
const (
	MetricCPUSecondsOf          driver.MetricPrefix = "cpu_s."
	MetricCPUPerKOf             driver.MetricPrefix = "cpu_per_k."
	MetricCoresOf               driver.MetricPrefix = "cores."
	MetricStampedeElapsedOf     driver.MetricPrefix = "elapsed_ms."
	MetricStampedeErrorsOf      driver.MetricPrefix = "errors."
	MetricStampedeOriginLoadsOf driver.MetricPrefix = "origin_loads."
	MetricWALPerOpOf            driver.MetricPrefix = "wal_per_op."
	MetricCostRatioOf           driver.MetricPrefix = "cost_ratio."
)

// MetricStaleInstance is the staleness point's milliseconds until
// instance j saw the new stock: "stale_ms.instance<j>".
func MetricStaleInstance(j int) driver.Metric {
	return driver.Metric(fmt.Sprintf("stale_ms.instance%d", j))
}

// MetricScaleShare is instance i's share of the tasks processed, in per
// cent: "share.<i>_pct".
func MetricScaleShare(i int) driver.Metric {
	return driver.Metric("share." + strconv.Itoa(i) + "_pct")
}

// MetricAt is a sustainable search's metric k at its sustainable rate:
// "at.<k>".
func MetricAt(k driver.Metric) driver.Metric { return MetricAtOf.Of(string(k)) }

// MetricAtOf starts a sustainable search's metrics at its sustainable
// rate (MetricAt).
const MetricAtOf driver.MetricPrefix = "at."

// The figures of a pair's fixed-rate points (rate, overload, a ceiling's
// steps) and of the throughput and scale-out points, per side: the items
// processed (or delivered) per second during the attack, the backlog left
// at its end, the seconds the backlog took to drain after it
// (MetricDrained 0 when it had not within the bound), the batch size of a
// batched point, and the cores the whole machine was busy during the
// attack (everybody's: MetricCoresOf is a process group's).
const (
	MetricThroughput   driver.Metric = "throughput"
	MetricBacklogEnd   driver.Metric = "backlog_end"
	MetricSettle       driver.Metric = "settle_s"
	MetricBatch        driver.Metric = "batch"
	MetricCoresMachine driver.Metric = "cores.machine"
)
