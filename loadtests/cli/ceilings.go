package cli

import (
	"context"
	"flag"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/eventstore"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/eventstorerun"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/scenario"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// ceilingShapeFlags registers the flags of a ceiling search's shape
// (every option but its ladder) into o, defaulting to c's values: the
// queue and log commands' and those of every pair's own command whose
// searches have no backlog (documents, cache, eventstore-ceiling). In
// results they are the queue's, and every other search takes its shape
// from them (withShape).
func ceilingShapeFlags(fs *flag.FlagSet, o *scenario.CeilingOptions, c scenario.CeilingOptions) {
	fs.IntVar(&o.Bisect, "ceiling-bisect", c.Bisect, "ceiling: bisection steps after the first failure")
	fs.DurationVar(&o.Step, "ceiling-step", c.Step, "ceiling: duration of each step")
	fs.IntVar(&o.Rounds, "ceiling-rounds", c.Rounds, "ceiling: searches per side")
	fs.DurationVar(&o.P99, "ceiling-p99", c.P99, "ceiling: server-side latency p99 limit")
	fs.DurationVar(&o.Warmup, "ceiling-warmup", c.Warmup, "ceiling: how long each step first offers its rate, unmeasured")
	fs.IntVar(&o.MaxInFlight, "ceiling-max-in-flight", c.MaxInFlight, "ceiling: MAX_IN_FLIGHT the services are restarted with for the search (0: no bound, -1: leave theirs)")
}

// withShape is o's ladder with shape's search shape (the options
// ceilingShapeFlags sets).
func withShape(o, shape scenario.CeilingOptions) scenario.CeilingOptions {
	o.Bisect, o.Step, o.Rounds, o.P99, o.Warmup, o.MaxInFlight = shape.Bisect, shape.Step, shape.Rounds, shape.P99, shape.Warmup, shape.MaxInFlight
	return o
}

// ladder names a ceiling search's flags: name is their stem
// ("search-ceiling"), what the search in the help ("documents
// containment search").
type ladder struct{ name, what string }

// ladderFlags registers the on/off, first-rate and highest-rate flags of
// the search l names ("search-ceiling": -search-ceiling,
// -search-ceiling-start, -search-ceiling-max) into on and o, defaulting
// to the declared d and o's values; on nil registers no on/off flag
// (the eventstore-ceiling command is the search).
func ladderFlags(fs *flag.FlagSet, l ladder, on *bool, d bool, o *scenario.CeilingOptions) {
	name, what := l.name, l.what
	if on != nil {
		fs.BoolVar(on, name, d, "run the "+what+" ceiling search")
	}
	fs.Float64Var(&o.Start, name+"-start", o.Start, what+" ceiling: first rate")
	fs.Float64Var(&o.Max, name+"-max", o.Max, what+" ceiling: highest rate tried")
}

// shapeOf is the shape of results' searches: the queue pair's ceiling
// options (its -ceiling-* flags), else the declared one.
func shapeOf(set pairSet) scenario.CeilingOptions {
	if q, ok := set[pairs.Queue].(*ratePair); ok {
		return q.o.CeilingOpts
	}
	return scenario.QueueScenario.Defaults.CeilingOpts
}

// eventStoreCeiling is the append ceiling search's part of a command:
// the eventstore-ceiling command, or results' step after the event
// store's bench (on: -append-ceiling).
type eventStoreCeiling struct {
	on bool
	o  scenario.CeilingOptions
}

// register adds the search's flags to fs: its ladder, its on/off flag
// in results, its shape in its own command.
func (s *eventStoreCeiling) register(fs *flag.FlagSet, cmd string) {
	s.on, s.o = true, scenario.EventStoreAppendCeilingOpts
	if cmd == resultsCommand {
		ladderFlags(fs, ladder{"append-ceiling", "event store append"}, &s.on, true, &s.o)
		return
	}
	ladderFlags(fs, ladder{"append-ceiling", "event store append"}, nil, true, &s.o)
	ceilingShapeFlags(fs, &s.o, s.o)
}

// estimate is the search's step of a plan: the services' starts and the
// search on every side (kurrentdb when KURRENTDB_URL is set).
func (s *eventStoreCeiling) estimate(settle time.Duration) scenario.Estimate {
	return (&scenario.Env{}).EventStoreCeilingEstimate(s.o, settle)
}

// run runs the search into run (eventstorerun.Ceiling).
func (s *eventStoreCeiling) run(ctx context.Context, env *scenario.Env, run *driver.Run) error {
	return eventstorerun.Ceiling(ctx, env, run, s.o)
}

// eventStoreCeilingSetup is the eventstore-ceiling command: the append
// ceiling search alone, as one results file.
func eventStoreCeilingSetup(fs *flag.FlagSet, _ *common, _ *extras) action {
	s := &eventStoreCeiling{}
	s.register(fs, eventstore.CeilingCommand)
	return action{
		plan: func(c common) []step { return []step{{eventstore.CeilingCommand, s.estimate(c.settle)}} },
		run: func(ctx context.Context, inv invocation) error {
			return runPair(ctx, inv, eventstore.CeilingCommand, func(run *driver.Run) error { return s.run(ctx, inv.env, run) })
		},
	}
}

// eventStoreCeilingOf is results' append ceiling, when it runs.
func eventStoreCeilingOf(set pairSet) *eventStoreCeiling {
	if p, ok := set[pairs.EventStore].(*eventStorePair); ok && p.ceiling != nil && p.ceiling.on {
		return p.ceiling
	}
	return nil
}

// eventStoreCeilingPlan is results' plan step of the append ceiling (none
// when it is off).
func eventStoreCeilingPlan(c common, set pairSet) []step {
	if s := eventStoreCeilingOf(set); s != nil {
		return []step{{eventstore.CeilingCommand, s.estimate(c.settle)}}
	}
	return nil
}

// eventStoreCeilingSteps is results' step of the append ceiling, after
// the event store's bench, its own results file (none when it is off).
func eventStoreCeilingSteps(ctx context.Context, env *scenario.Env, set pairSet) []resultsStep {
	if s := eventStoreCeilingOf(set); s != nil {
		return []resultsStep{{eventstore.CeilingCommand, scenario.Pair{}, func(run *driver.Run) error { return s.run(ctx, env, run) }}}
	}
	return nil
}
