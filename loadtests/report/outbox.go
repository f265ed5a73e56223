package report

import (
	"fmt"
	"strings"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/scenario"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// outboxRows are the metrics of the outbox comparison, in order.
var outboxRows = []row{
	{scenario.MetricThroughput, "processed/s"}, {driver.ClientErrors, "errors"}, {driver.ClientShed, "shed (503)"},
	{driver.ServerSendP50, "send p50 ms"}, {driver.ServerSendP99, "send p99 ms"},
	{driver.ServerDeliveryP50, "delivery p50 ms"}, {driver.ServerDeliveryP99, "delivery p99 ms"},
	{driver.ServerProcessingP50, "send→processed p50 ms"}, {driver.ServerProcessingP99, "send→processed p99 ms"},
}

// OutboxSection is the queue section's answer to "what does the outbox
// cost": rabbitmq's dual write (the queue.default point, its default
// mode) against PUBLISH_MODE=outbox (the queue.outbox point), at the same
// rate in the same run, with no-rabbitmq's default run beside them (its
// enqueue is one transaction already). Empty when the run has no outbox
// point.
func OutboxSection(r *driver.Run) string {
	var def, out *driver.Point
	for i := range r.Points {
		switch p := &r.Points[i]; p.Scenario {
		case scenario.PairScenarioName(pairs.Queue, scenario.KindDefault):
			def = p
		case scenario.PairScenarioName(pairs.Queue, scenario.ExtraOutbox):
			out = p
		}
	}
	if out == nil {
		return ""
	}
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("### What the outbox costs: rabbitmq dual-write vs PUBLISH_MODE=outbox\n\n")
	w("rabbitmq restarted with `PUBLISH_MODE=outbox` (the task record and an outbox row in one transaction, a relay publishing the rows with confirms; classic queue) at %s, against its default dual write at the same rate in this run (the durability table's default point), with no-rabbitmq's default beside them. The outbox's `202` follows the commit, not the confirm, so its send time drops the broker and adds the outbox insert; its delivery adds the relay's pass.\n\n", out.Name)
	w("| metric | no-rabbitmq | rabbitmq dual-write | rabbitmq outbox | outbox ÷ dual-write |\n|---|---|---|---|---|\n")
	side := func(p *driver.Point, m driver.Metric, svc string) (driver.Agg, bool) {
		if p == nil {
			return driver.Agg{}, false
		}
		mm := p.Find(m)
		if mm == nil {
			return driver.Agg{}, false
		}
		a, ok := mm.Sides[svc]
		return a, ok
	}
	for _, rw := range outboxRows {
		pg, okPG := side(def, rw.metric, pairs.NoRabbitMQ)
		dw, okDW := side(def, rw.metric, pairs.RabbitMQ)
		ob, okOB := side(out, rw.metric, pairs.RabbitMQ)
		if !okPG && !okDW && !okOB {
			continue
		}
		ratio := noRatioMissing
		switch {
		case okDW && okOB && dw.Median == 0 && ob.Median == 0:
			ratio = noRatioBoth
		case okDW && okOB && (dw.Median == 0 || ob.Median == 0):
			ratio = noRatioZero
		case okDW && okOB:
			ratio = num(ob.Median/dw.Median) + "×"
		}
		w("| %s | %s | %s | %s | %s |\n", rw.label, cell(pg, okPG), cell(dw, okDW), cell(ob, okOB), ratio)
	}
	w("\n")
	return b.String()
}
