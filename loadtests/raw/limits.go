package raw

import "fmt"

// Path is the chain of raw loops a service's items go through on its
// engine: a queue task is written then claimed, a log event written then
// decoded or fetched.
type Path struct {
	// Engine is the engine measured ("postgres", "rabbitmq", "kafka").
	Engine string
	// Loops are the raw loops each item passes through, in order.
	Loops []string
}

// Paths maps each service of the queue and log pairs to its engine path.
// The rabbitmq service also writes its task records to Postgres; its
// limit here is RabbitMQ's own, the engine the comparison is about.
var Paths = map[string]Path{
	"no-rabbitmq": {Postgres, []string{InsertBatch, ClaimDelete}},
	"rabbitmq":    {RabbitMQ, []string{Publish, Consume}},
	"no-kafka":    {Postgres, []string{InsertBatch, Wal2JSON}},
	"kafka":       {Kafka, []string{Produce, Fetch}},
}

// Limit returns the raw limit of service's engine path in r: items pass
// through every loop of the path on the same machine, so the limit is
// 1 / Σ(1/rate) (the time per item of each stage, added). ok is false
// when the service has no path or a loop of it was not measured.
func (r Results) Limit(service string) (rate float64, desc string, ok bool) {
	p, found := Paths[service]
	if !found {
		return 0, "", false
	}
	var inv float64
	for _, l := range p.Loops {
		res, found := r.Find(p.Engine, l)
		if !found {
			return 0, "", false
		}
		inv += 1 / res.Rate
	}
	desc = p.Engine + " "
	for i, l := range p.Loops {
		if i > 0 {
			desc += " → "
		}
		desc += l
	}
	return 1 / inv, desc, true
}

// PercentOfRaw returns rate (items per second a service sustained) as a
// percentage of its engine path's raw limit measured in r.
func (r Results) PercentOfRaw(service string, rate float64) (float64, bool) {
	lim, _, ok := r.Limit(service)
	if !ok || lim <= 0 {
		return 0, false
	}
	return 100 * rate / lim, true
}

// PercentCell is PercentOfRaw as a table cell ("37% of 41,000/s"), or "–".
func (r Results) PercentCell(service string, rate float64) string {
	lim, _, ok := r.Limit(service)
	if !ok || lim <= 0 {
		return "–"
	}
	pct := 100 * rate / lim
	if pct < 10 {
		return fmt.Sprintf("%.1f%% of %.0f/s", pct, lim)
	}
	return fmt.Sprintf("%.0f%% of %.0f/s", pct, lim)
}
