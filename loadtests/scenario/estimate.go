package scenario

import (
	"slices"
	"time"
)

// Estimate is how long a scenario is expected to take, computed from its
// options before it runs. It is an estimate: a ceiling search stops at the
// first failing step, which is not known in advance, and a backlog may
// drain at once or take the whole settle bound.
type Estimate struct {
	// Attacks is how many attacks the scenario reports (warm-ups are not
	// reported).
	Attacks int
	// Typical assumes backlogs drain at once and ceiling searches fail
	// half-way up their ladder.
	Typical time.Duration
	// Bound assumes every settle wait runs to its bound and every ceiling
	// search climbs its whole ladder.
	Bound time.Duration
}

// Add returns the sum of e and o.
func (e Estimate) Add(o Estimate) Estimate {
	return Estimate{Attacks: e.Attacks + o.Attacks, Typical: e.Typical + o.Typical, Bound: e.Bound + o.Bound}
}

// Fixed costs the estimates add to the attacks' own durations.
const (
	// attackOverhead is the stats reset and reads around each attack.
	attackOverhead = time.Second
	// serviceStart is one service started (or restarted) by the driver.
	serviceStart = 10 * time.Second
)

// warmupTime is one warm-up of a pair (2 s per side plus its overhead).
const warmupTime = 2 * (2*time.Second + attackOverhead)

// attacks returns n attacks of d each, with their overhead.
func attacks(n int, d, settle time.Duration) Estimate {
	t := time.Duration(n) * (d + attackOverhead)
	return Estimate{Attacks: n, Typical: t, Bound: t + time.Duration(n)*settle}
}

// Estimate returns the expected duration of Queue or Log run with o, when
// each settle wait is bounded by settle.
func (o RateOptions) Estimate(settle time.Duration) Estimate {
	sides := 2
	e := Estimate{Typical: 2*serviceStart + warmupTime, Bound: 2*serviceStart + warmupTime}
	e = e.Add(attacks(len(o.Rates)*o.Rounds*sides, o.Duration, settle))
	if o.Ceiling {
		e = e.Add(o.CeilingOpts.estimate(sides, settle))
		if o.Designs && o.DesignSides > 0 {
			e = e.Add(o.CeilingOpts.estimate(o.DesignSides, settle))
		}
	}
	if o.Variant {
		// The default mode (none when VariantRate is one of Rates: that
		// point is reused), the variant and the extras at one rate, each
		// after a restart of both services and a warm-up, then back to
		// the defaults.
		modes := 2 + o.Extras
		if slices.Contains(o.Rates, o.VariantRate) {
			modes--
		}
		restarts := time.Duration((modes+1)*sides) * serviceStart
		warmups := time.Duration(modes) * warmupTime
		e = e.Add(Estimate{Typical: restarts + warmups, Bound: restarts + warmups})
		e = e.Add(attacks(modes*o.Rounds*sides, o.Duration, settle))
	}
	return e
}

// pastKneeDrain is the typical drain of a ceiling step past the knee:
// the backlog it left, processed at the side's own rate.
const pastKneeDrain = 3 * time.Second

// estimate is the ceiling search of o on sides: typically, a side's
// first search climbs half the ladder, its later ones start at their
// knee (a pass and a failure), each bisects o.Bisect times and ends with
// a step past the knee whose backlog drains; at the bound every search
// climbs the whole ladder. Restarting the services with their in-flight
// bound changed, and their warm-up, come on top.
func (o CeilingOptions) estimate(sides int, settle time.Duration) Estimate {
	n := len(o.ladder())
	searches := o.Rounds * sides
	steps := sides * ((n+1)/2 + o.Bisect)
	if o.Rounds > 1 {
		steps += sides * (o.Rounds - 1) * (2 + o.Bisect)
	}
	// Each step offers its rate for o.Warmup before its measured o.Step.
	typical := attacks(steps, o.Warmup+o.Step, 3*settle/2)
	bound := attacks(searches*(n+o.Bisect), o.Warmup+o.Step, 3*settle/2)
	e := Estimate{Attacks: typical.Attacks, Typical: typical.Typical + time.Duration(searches)*pastKneeDrain, Bound: bound.Bound}
	if o.MaxInFlight != LeaveInFlight {
		restart := time.Duration(sides)*serviceStart + warmupTime
		e.Typical += restart
		e.Bound += restart
	}
	return e
}

// Estimate returns the expected duration of Documents run with o, each
// ceiling step's wait for its start bounded by 1.5 × settle.
func (o DocumentsOptions) Estimate(settle time.Duration) Estimate {
	const sides = 2
	// Creating and deleting the data set: a few milliseconds per user
	// and side on a small machine.
	data := time.Duration(o.Users*sides*2) * 2 * time.Millisecond
	e := Estimate{Typical: 2*serviceStart + data, Bound: 2*serviceStart + 3*data}
	e = e.Add(attacks(o.Rounds*sides, o.Duration, 0))
	e = e.Add(attacks(len(o.Sizes)*o.Rounds*sides*2, o.Duration, 0))
	if o.LZ4 {
		// The Postgres side again, after two restarts.
		e = e.Add(Estimate{Typical: 2 * serviceStart, Bound: 2 * serviceStart})
		e = e.Add(attacks(len(o.Sizes)*o.Rounds*2, o.Duration, 0))
	}
	if o.SearchCeiling {
		e = e.Add(o.SearchCeilingOpts.opEstimate(sides, settle, true))
	}
	if o.WriteCeiling {
		e = e.Add(o.WriteCeilingOpts.opEstimate(sides, settle, !o.SearchCeiling))
	}
	return e.Add(o.scaleEstimate(settle))
}

// scaleEstimate is the ScaleUsers part of Estimate: each size's load
// (about 60 µs a user on Postgres and 300 µs on FerretDB here, each with
// its index build), removal, and the ceilings: the search on the
// Postgres side only when the MongoDB side is FerretDB (one timed search
// there, of a minute or more), the write on both.
func (o DocumentsOptions) scaleEstimate(settle time.Duration) Estimate {
	var e Estimate
	if !o.SearchCeiling && !o.WriteCeiling {
		return e // scale runs nothing without a ceiling to search
	}
	for _, n := range o.ScaleUsers {
		load := time.Duration(n) * 400 * time.Microsecond
		e = e.Add(Estimate{Typical: load, Bound: 3 * load})
		if o.SearchCeiling {
			e = e.Add(o.SearchCeilingOpts.opEstimate(1, settle, false)).Add(Estimate{Typical: time.Minute, Bound: 10 * time.Minute})
		}
		if o.WriteCeiling {
			e = e.Add(o.WriteCeilingOpts.opEstimate(2, settle, false))
		}
	}
	return e
}
