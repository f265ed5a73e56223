package queue

import (
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config"
)

// WorkerConfig holds the settings both sides share, read with the same
// variable names and defaults on both.
type WorkerConfig struct {
	// Workers is the number of worker goroutines in the service. Env
	// WORKERS; default 8. Zero runs an API-only instance that enqueues but
	// never processes (another instance's workers do).
	Workers int
	// Work is the simulated work per attempt. Env WORK_MS (milliseconds);
	// default 0.
	Work time.Duration
	// RetryBase is the first retry's delay, doubled per attempt and capped
	// at 30s. Env RETRY_BASE; default 200ms.
	RetryBase time.Duration
	// MaxAttempts is the number of deliveries after which a failing task
	// is dead (dead-lettered). Env MAX_ATTEMPTS; default 5.
	MaxAttempts int
	// PayloadLimit caps one task's payload. Env PAYLOAD_LIMIT; default
	// 64KiB.
	PayloadLimit int
	// Faults enables POST /payments?fault=between, which crashes between
	// the payment insert and the enqueue. Env FAULTS; default false.
	Faults bool
	// Fanout is the kinds that have subscribers: a task of such a kind
	// becomes one task per subscriber (ParseFanout's syntax). Env FANOUT;
	// default empty (no kind has subscribers).
	Fanout Fanout
}

// ReadWorkerConfig reads WorkerConfig and records an error naming each bad
// variable.
func ReadWorkerConfig(r *config.Reader) WorkerConfig {
	c := WorkerConfig{
		Workers:      r.Int("WORKERS", DefaultWorkers),
		Work:         time.Duration(r.Int("WORK_MS", 0)) * time.Millisecond,
		RetryBase:    r.Duration("RETRY_BASE", DefaultRetryBase),
		MaxAttempts:  r.Int("MAX_ATTEMPTS", DefaultMaxAttempts),
		PayloadLimit: int(r.Bytes("PAYLOAD_LIMIT", DefaultPayloadLimit)),
		Faults:       r.Bool("FAULTS", false),
	}
	if f, err := ParseFanout(r.String("FANOUT", "")); err != nil {
		r.Fail("FANOUT", "%v", err)
	} else {
		c.Fanout = f
	}
	if c.Workers < 0 || c.Workers > 1000 {
		r.Fail("WORKERS", "must be between 0 and 1000, got %d", c.Workers)
	}
	if c.Work < 0 {
		r.Fail("WORK_MS", "must not be negative, got %v", c.Work)
	}
	if c.RetryBase <= 0 || c.RetryBase > MaxRetryDelay {
		r.Fail("RETRY_BASE", "must be between 1ms and %v, got %v", MaxRetryDelay, c.RetryBase)
	}
	if c.MaxAttempts < 1 || c.MaxAttempts > 100 {
		r.Fail("MAX_ATTEMPTS", "must be between 1 and 100, got %d", c.MaxAttempts)
	}
	if c.PayloadLimit < 2 || c.PayloadLimit > 16<<20 {
		r.Fail("PAYLOAD_LIMIT", "must be between 2 bytes and 16MiB, got %d", c.PayloadLimit)
	}
	return c
}
