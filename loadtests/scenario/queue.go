package scenario

import (
	"context"
	"strconv"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
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
}

// QueueLoad is POST /tasks with a small payload.
var QueueLoad = Load{Phase: "send", Path: "/tasks", Body: func(n uint64) []byte {
	return []byte(`{"kind":"load","payload":{"n":` + strconv.FormatUint(n, 10) + `},"fail_times":0}`)
}}

// QueueDurable is the durability variant's environment: logged queue
// tables on the Postgres side, quorum queues on the RabbitMQ side.
var QueueDurable = map[string]map[string]string{
	"no-rabbitmq": {"QUEUE_TABLE": "logged"},
	// A quorum queue cannot take over the classic queue's name (RabbitMQ
	// refuses to redeclare a queue with another x-queue-type).
	"rabbitmq": {"QUEUE_TYPE": "quorum", "RABBITMQ_QUEUE": "tasks-quorum"},
}

// Queue runs the queue pair: the fixed rates, the ceiling search
// (send→processed p99 under the limit, backlog flat) and the durable
// variant, recording everything in run.
func Queue(ctx context.Context, e *Env, run *driver.Run, o RateOptions) error {
	return rates(ctx, e, run, QueuePair, QueueLoad, "processing", QueueDurable, "durable", o)
}

// variant measures the pair at o.VariantRate in the default mode, then
// restarted with variantEnv.
func (e *Env) variant(ctx context.Context, run *driver.Run, pair Pair, load Load, variantEnv map[string]map[string]string, variant string, o RateOptions) error {
	// Fail early, before measuring anything, when a service cannot be
	// restarted by the driver.
	if err := e.Ensure(ctx, pair.Services(), variantEnv, nil); err != nil {
		return err
	}
	// The same rate in the default mode, so the two are compared within
	// one run even when VariantRate is not one of Rates.
	if err := e.Ensure(ctx, pair.Services(), nil, nil); err != nil {
		return err
	}
	e.warmup(ctx, pair, load)
	if err := e.ratePoint(ctx, run, pair, pair.Name+".default", load, o.VariantRate, o.Duration, o.Rounds, nil); err != nil {
		return err
	}
	if err := e.Ensure(ctx, pair.Services(), variantEnv, nil); err != nil {
		return err
	}
	e.warmup(ctx, pair, load)
	return e.ratePoint(ctx, run, pair, pair.Name+"."+variant, load, o.VariantRate, o.Duration, o.Rounds, variantEnv)
}

// rates is the shared shape of the queue and log scenarios.
func rates(ctx context.Context, e *Env, run *driver.Run, pair Pair, load Load, ceilingLatency string,
	variantEnv map[string]map[string]string, variant string, o RateOptions) error {
	run.Settings["rates"] = o.Rates
	run.Settings["duration_s"] = o.Duration.Seconds()
	run.Settings["rounds"] = o.Rounds
	run.Settings["settle_s"] = e.settle().Seconds()
	run.Settings["max_workers"] = e.MaxWorkers
	if err := e.Ensure(ctx, pair.Services(), nil, nil); err != nil {
		return err
	}
	e.warmup(ctx, pair, load)
	for _, r := range o.Rates {
		if err := e.ratePoint(ctx, run, pair, pair.Name+".rate", load, r, o.Duration, o.Rounds, nil); err != nil {
			return err
		}
	}
	if o.Ceiling {
		run.Settings["ceiling"] = o.CeilingOpts
		if err := e.ceiling(ctx, run, pair, pair.Name+".ceiling", ceilingLatency, load, o.CeilingOpts); err != nil {
			return err
		}
	}
	if o.Variant {
		run.Settings[variant+"_env"] = variantEnv
		run.Settings[variant+"_rate"] = o.VariantRate
		if err := e.variant(ctx, run, pair, load, variantEnv, variant, o); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			run.Note("%s variant not measured: %v", variant, err)
			e.logf("%s variant not measured: %v", variant, err)
		}
		// Back to the defaults for whatever runs next.
		if err := e.Ensure(ctx, pair.Services(), nil, nil); err != nil {
			return err
		}
	}
	return nil
}
