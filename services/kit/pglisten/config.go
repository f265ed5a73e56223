package pglisten

import (
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config"
)

// DefaultMode is NOTIFY_MODE's default: debounced, because a NOTIFY in
// every committing transaction caps commits (issue 15) while the debounced
// wake-up adds at most NOTIFY_INTERVAL to delivery under load and nothing
// measurable when idle (docs/queue.md, docs/eventstore.md).
const DefaultMode = ModeDebounced

// NotifyConfig is how a Postgres-backed service's writers wake the
// listeners of every instance. A service setting, not schema state:
// instances in different modes wake each other.
type NotifyConfig struct {
	// Mode is ModeCommit (a NOTIFY in the writing transaction, which takes
	// Postgres's cluster-wide notify lock at every commit) or
	// ModeDebounced (the write commits without it, and a Debouncer on a
	// connection of its own sends at most one NOTIFY per Interval
	// afterwards). Env NOTIFY_MODE; default DefaultMode.
	Mode string
	// Interval is the least time between two debounced NOTIFYs (a write
	// after a quiet spell is notified at once). Env NOTIFY_INTERVAL;
	// default DefaultInterval, between MinInterval and MaxInterval; unused
	// in commit mode.
	Interval time.Duration
}

// ReadNotifyConfig reads NotifyConfig (NOTIFY_MODE, NOTIFY_INTERVAL) and
// records an error naming each bad variable.
func ReadNotifyConfig(r *config.Reader) NotifyConfig {
	c := NotifyConfig{
		Mode:     r.Enum("NOTIFY_MODE", DefaultMode, ModeCommit, ModeDebounced),
		Interval: r.Duration("NOTIFY_INTERVAL", DefaultInterval),
	}
	if c.Interval < MinInterval || c.Interval > MaxInterval {
		r.Fail("NOTIFY_INTERVAL", "must be between %v and %v, got %v", MinInterval, MaxInterval, c.Interval)
	}
	return c
}

// Debounced reports whether the mode is ModeDebounced: the service then
// opens the Debouncer's connection and sends its NOTIFYs through it.
func (c NotifyConfig) Debounced() bool { return c.Mode == ModeDebounced }
