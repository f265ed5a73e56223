package scenario

import (
	"math"
	"strconv"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// RateOptions parameterize the fixed-rate points, the ceiling and the
// durability (or synchronous_commit) variant of the queue and log pairs.
type RateOptions struct {
	// Rates are the fixed rates (per second).
	Rates []float64
	// Duration is each attack's duration; Rounds the rounds per point.
	Duration time.Duration
	Rounds   int
	// Ceiling runs the ceiling search when true.
	Ceiling     bool
	CeilingOpts CeilingOptions
	// Variant runs the environment variant (QUEUE_TABLE=logged +
	// QUEUE_TYPE=quorum; SYNCHRONOUS_COMMIT=off) at VariantRate when true.
	Variant     bool
	VariantRate float64
	// Extras is how many of the scenario's extra variants
	// (RateScenario.Extras) run after the variant, at VariantRate; the
	// commands set it from the scenario. It sizes the estimate.
	Extras int
	// Designs runs the scenario's ceiling designs
	// (RateScenario.CeilingDesigns) after its main ceiling search;
	// DesignSides is how many side searches they are (the commands set
	// it from the scenario, for the estimate).
	Designs     bool
	DesignSides int
}

// The queue pair's variant and extra variant (PairScenarioName
// "queue.durable", "queue.outbox").
const (
	VariantDurable = "durable"
	ExtraOutbox    = "outbox"
)

// QueueScenario is the queue pair's: POST /tasks at fixed rates, a
// ceiling search on send→processed p99 with a flat backlog (the services
// without an in-flight bound), the durable
// variant (logged queue tables against quorum queues) and, at the same
// rate, the outbox variant (rabbitmq with PUBLISH_MODE=outbox).
var QueueScenario = RateScenario{
	Pair: QueuePair,
	Load: Load{Phase: "send", Path: "/tasks", Body: func(n uint64) []byte {
		return []byte(`{"kind":"load","payload":{"n":` + strconv.FormatUint(n, 10) + `},"fail_times":0}`)
	}},
	CeilingLatency: "processing",
	CeilingAck:     "send",
	Variant:        VariantDurable,
	VariantEnv: map[string]map[string]string{
		pairs.NoRabbitMQ: {"QUEUE_TABLE": "logged"},
		// A quorum queue cannot take over the classic queue's name
		// (RabbitMQ refuses to redeclare a queue with another
		// x-queue-type).
		pairs.RabbitMQ: {"QUEUE_TYPE": "quorum", "RABBITMQ_QUEUE": "tasks-quorum"},
	},
	// The main ceiling search at equal durability: on both sides the
	// task record is the durable truth and the queue's state is rebuilt
	// from it after a crash (RabbitMQ's transient messages by the
	// reconciler, no-rabbitmq's UNLOGGED queue table at start).
	CeilingEnv: map[string]map[string]string{pairs.RabbitMQ: {"DELIVERY_MODE": "transient"}},
	// The same guarantee at its higher price on both sides (persistent,
	// confirmed messages against a logged queue table), RabbitMQ alone
	// (no task row per request: the broker's own ceiling, and the dual
	// write's price beside it), and classic queues v1, the tuning table's
	// before (a queue of its own: RabbitMQ refuses to redeclare a queue
	// with another x-queue-version).
	CeilingDesigns: []Extra{
		{Name: "logged", Env: map[string]map[string]string{pairs.NoRabbitMQ: {"QUEUE_TABLE": "logged"}, pairs.RabbitMQ: {"DELIVERY_MODE": "persistent"}}},
		{Name: "broker-only", Env: map[string]map[string]string{pairs.RabbitMQ: {"PUBLISH_MODE": "broker-only", "RABBITMQ_QUEUE": "tasks-broker-only"}}},
		{Name: "classic-v1", Env: map[string]map[string]string{pairs.RabbitMQ: {"RABBITMQ_QUEUE_VERSION": "1", "DELIVERY_MODE": "transient", "RABBITMQ_QUEUE": "tasks-v1"}}},
	},
	// The outbox variant: what RabbitMQ at its most careful costs, the
	// record and an outbox row in one transaction and a relay publishing
	// them (the classic queue of the default mode; no-rabbitmq, whose
	// enqueue is its own outbox already, unchanged).
	Extras: []Extra{{Name: ExtraOutbox, Env: map[string]map[string]string{
		pairs.RabbitMQ: {"PUBLISH_MODE": "outbox"},
	}}},
	Defaults: RateOptions{
		Rates:   []float64{500, 1000, 2000, 5000},
		Ceiling: true,
		CeilingOpts: CeilingOptions{Start: 1000, Factor: math.Sqrt2, Max: 16000, Bisect: 2,
			Warmup: CeilingWarmup, Step: CeilingStep, Rounds: CeilingRounds, P99: CeilingP99},
		Variant: true, VariantRate: 1000, Extras: 1, Designs: true,
	},
}
