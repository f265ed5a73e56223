package report

import (
	"fmt"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/scenario"
	"strings"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/raw"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// RawTitle is the heading of RESULTS.md's raw-limits section.
const RawTitle = "Engine limits without a service (raw loops)"

// PercentOfRaw returns a service's rate (items per second) as a
// percentage of its engine path's raw limit in r (see raw.Paths: every
// loop the service's design makes an item pass through, the task records
// and delivery records kept in Postgres on both sides included). ok is
// false when r lacks a loop of the path or service has none.
func PercentOfRaw(r raw.Results, service string, rate float64) (float64, bool) {
	return r.PercentOfRaw(service, rate)
}

// RawSection renders the raw-limits section: every raw loop, then each
// queue and log service's rates from runs (single-request ceiling, batch
// throughput, the throughput scenario's best end-to-end rate) as a share
// of its engine's raw limit; then the retention section, when r has one.
func RawSection(r raw.Results, runs []*driver.Run) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("## %s\n\n", RawTitle)
	w("Measured by `go run ./loadtests raw` (the first step of `make results`), run `%s` (started %s UTC): each loop %vs on a scratch schema, queue or topic, with no service in between, from the driver's machine (which shares the cores). ", r.ID, r.StartedAt.UTC().Format("2006-01-02 15:04"), r.Settings["duration_s"])
	w("They say what the engine itself sustains here, so a service's rate can be read as the engine's cost plus the service's.\n\n")
	w("| engine | loop | what is counted, how | items | seconds | items/s |\n|---|---|---|---|---|---|\n")
	for _, l := range r.Loops {
		rate := num(l.Rate)
		if l.Error != "" {
			rate = "not measured: " + md(l.Error)
		}
		w("| %s | %s | %s | %d | %s | %s |\n", l.Engine, l.Loop, md(r.LoopDesc(l)), l.Items, num(l.Seconds), rate)
	}
	rs := runs2map(runs)
	w("\n### Services as a share of their engine's raw limit\n\n")
	w("A service's items pass through every loop of its engine path on the same machine, so the path's limit is 1 ÷ Σ(times ÷ loop rate). The path is the service's design: both queue services keep a task record in Postgres (inserted with the enqueue, updated on delivery and on completion) and both log services record each event and its delivery in Postgres, so those loops are on both sides' paths, and the transport between them differs. The last column shows the best end-to-end rate against the compared engine's own loops alone, without the record keeping.\n\n")
	w("| service | engine path | raw limit/s | single-request ceiling/s (share) | batch throughput/s (share) | throughput scenario: best end-to-end/s (share) | best end-to-end, share of the compared engine's loops alone |\n|---|---|---|---|---|---|---|\n")
	for _, svc := range []string{pairs.NoRabbitMQ, pairs.RabbitMQ, pairs.NoKafka, pairs.Kafka} {
		lim, path, ok := r.Limit(svc)
		if !ok {
			w("| %s | %s | not measured | | | | |\n", svc, raw.Paths[svc].String())
			continue
		}
		cmd := pairs.Queue
		if svc == pairs.NoKafka || svc == pairs.Kafka {
			cmd = pairs.Log
		}
		ceilCell, tpCell := notMeasuredHere, notMeasuredHere
		if c := rs.ceiling(cmd, svc); c != nil && c.Rate.Median > 0 {
			ceilCell = num(c.Rate.Median) + " (" + r.PercentCell(svc, c.Rate.Median) + ")"
		}
		if v, ok := median(rs.point(cmd, scenario.PairScenarioName(cmd, scenario.KindBatchThroughput), ""), scenario.MetricBatchThroughput, svc); ok && v > 0 {
			tpCell = num(v) + " (" + r.PercentCell(svc, v) + ")"
		}
		// The throughput scenario's end-to-end rate at its best batch size
		// (processed or delivered: every stage of the path).
		bestCell, coreCell := notMeasuredHere, notMeasuredHere
		if v, p := bestE2E(rs, cmd, svc, 0); p != nil && v > 0 {
			bestCell = num(v) + " at " + p.Name + " (" + r.PercentCell(svc, v) + ")"
			lat := map[string]driver.Metric{pairs.Queue: driver.ServerProcessingP50, pairs.Log: driver.ServerDeliveryP50}[cmd]
			if l, ok := median(p, lat, svc); ok && l > comfortableP50MS {
				bestCell += fmt.Sprintf(", a backlog draining (p50 %s s), not a sustained rate", num(l/1000))
			}
			if p := raw.Paths[svc]; len(p.Core().Steps) < len(p.Steps) {
				coreCell = p.Core().String() + ": " + r.CoreCell(svc, v)
			} else {
				coreCell = "the same path (no other engine)"
			}
		}
		w("| %s | %s | %s | %s | %s | %s | %s |\n", svc, path, num(lim), ceilCell, tpCell, bestCell, coreCell)
	}
	w("\n")
	b.WriteString(NotifySection(r))
	b.WriteString(RetentionSection(r))
	return b.String()
}

func runs2map(all []*driver.Run) runs {
	rs := runs{}
	for _, r := range all {
		rs[r.Command] = r
	}
	return rs
}
