package raw

import (
	"fmt"
	"strings"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// Step is one raw loop an item passes through, Times times (a task record
// updated twice is one step of two).
type Step struct {
	// Engine and Loop name the raw loop.
	Engine, Loop string
	// Times is how often each item passes through it (0 means once).
	Times int
}

// times is s.Times with its default.
func (s Step) times() int { return max(s.Times, 1) }

// Path is the chain of raw loops a service's items go through on its
// engines, as the service's design makes them: a queue task is recorded,
// written to the queue, claimed and completed, its record updated on
// delivery and completion; a log event is written, decoded or fetched,
// and its delivery recorded.
type Path struct {
	// Engine is the engine the pair compares ("postgres", "rabbitmq",
	// "kafka"); Core selects its steps alone.
	Engine string
	// Steps are the raw loops each item passes through, in order, on
	// every engine the service uses (the specialists also keep records in
	// Postgres).
	Steps []Step
}

// Paths maps each service of the queue and log pairs to its engine path.
// Both queue services keep a task record in Postgres (inserted with the
// enqueue, updated on delivery and on completion), and both log services
// write each event to the messages table and its delivery to the
// deliveries table, so those steps are on both sides' paths; what differs
// is the transport between them.
var Paths = map[string]Path{
	pairs.NoRabbitMQ: {Postgres, []Step{
		{Postgres, InsertBatch, 2}, // the task record and its queue_jobs row
		{Postgres, ClaimDelete, 1}, // the SKIP LOCKED claim, the completion's DELETE
		{Postgres, RecordUpdate, 2},
	}},
	pairs.RabbitMQ: {RabbitMQ, []Step{
		{Postgres, InsertBatch, 1},
		{RabbitMQ, Publish, 1}, {RabbitMQ, Consume, 1},
		{Postgres, RecordUpdate, 2},
	}},
	pairs.NoKafka: {Postgres, []Step{
		{Postgres, InsertBatch, 1}, {Postgres, Wal2JSON, 1},
		{Postgres, InsertBatch, 1}, // the delivery record
	}},
	pairs.Kafka: {Kafka, []Step{
		{Postgres, InsertBatch, 1},
		{Kafka, Produce, 1}, {Kafka, Fetch, 1},
		{Postgres, InsertBatch, 1},
	}},
}

// Core returns the path's steps on its own Engine alone: the limit of the
// compared engine without the record keeping around it.
func (p Path) Core() Path {
	out := Path{Engine: p.Engine}
	for _, s := range p.Steps {
		if s.Engine == p.Engine {
			out.Steps = append(out.Steps, s)
		}
	}
	return out
}

// String describes the path: "postgres insert_batch ×2 → postgres
// claim_delete → ...".
func (p Path) String() string {
	parts := make([]string, len(p.Steps))
	for i, s := range p.Steps {
		parts[i] = s.Engine + " " + s.Loop
		if s.times() > 1 {
			parts[i] += fmt.Sprintf(" ×%d", s.times())
		}
	}
	return strings.Join(parts, " → ")
}

// LimitOf returns the raw limit of path p in r: items pass through every
// step on the same machine, so the limit is 1 / Σ(times/rate) (each
// step's time per item, added). ok is false when a loop of it was not
// measured.
func (r Results) LimitOf(p Path) (rate float64, ok bool) {
	if len(p.Steps) == 0 {
		return 0, false
	}
	var inv float64
	for _, s := range p.Steps {
		res, found := r.Find(s.Engine, s.Loop)
		if !found {
			return 0, false
		}
		inv += float64(s.times()) / res.Rate
	}
	return 1 / inv, true
}

// Limit returns the raw limit of service's whole engine path in r and its
// description. ok is false when the service has no path or a loop of it
// was not measured.
func (r Results) Limit(service string) (rate float64, desc string, ok bool) {
	p, found := Paths[service]
	if !found {
		return 0, "", false
	}
	rate, ok = r.LimitOf(p)
	return rate, p.String(), ok
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
	return percentOf(rate, lim)
}

// percentOf is rate as a share of lim, as a table cell.
func percentOf(rate, lim float64) string {
	pct := 100 * rate / lim
	if pct < 10 {
		return fmt.Sprintf("%.1f%% of %.0f/s", pct, lim)
	}
	return fmt.Sprintf("%.0f%% of %.0f/s", pct, lim)
}

// CoreCell is rate as a share of the service's compared engine alone
// (Path.Core), as a table cell, or "–".
func (r Results) CoreCell(service string, rate float64) string {
	p, found := Paths[service]
	if !found {
		return "–"
	}
	lim, ok := r.LimitOf(p.Core())
	if !ok || lim <= 0 {
		return "–"
	}
	return percentOf(rate, lim)
}
