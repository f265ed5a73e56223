package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/report"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/scenario"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/versions"
)

// The starting state of a run and the long-lived variant (issue 16):
// every pair's run declares what its tables held when it began, and by
// default begins on empty ones; `results` adds a run on a million rows of
// history so that RESULTS.md shows how each side ages.

// longLivedCommand is the command (and results file suffix) of the
// long-lived variant.
const longLivedCommand = scenario.LongLivedCommand

// defaultHistory is -history's default: a million finished tasks and a
// million delivered events per side, about a minute and a half of
// set-based SQL on the 2-core stack.
const defaultHistory = 1_000_000

// stateFlags are the flags of the starting state.
type stateFlags struct {
	// mode is -state: fresh or keep.
	mode string
	// schemas is -schemas: service=schema pairs, for services whose
	// tables live outside their default schema.
	schemas string
	// history is -history, the long-lived variant's rows per table;
	// longLived is -long-lived (results only).
	history   int64
	longLived bool
}

// registerState adds -state and -schemas: the starting state of a
// command whose runs declare one.
func (s *stateFlags) registerState(fs *flag.FlagSet) {
	fs.StringVar(&s.mode, "state", driver.StateFresh, "tables at the start of each pair's run: fresh (truncate the pair's tables first; the schemas stay as the services' migrations made them) or keep (run on the history they hold); either way the run records every table's rows, size and dead tuples")
	s.registerSchemas(fs)
}

// registerSchemas adds -schemas alone (the long-lived command, which
// always starts from its own history).
func (s *stateFlags) registerSchemas(fs *flag.FlagSet) {
	fs.StringVar(&s.schemas, "schemas", "", "service=schema,... for services keeping their tables outside their default schema (also set as their DATABASE_SCHEMA when the driver starts them)")
}

// registerHistory adds -history, the long-lived variant's size (results
// and longlived).
func (s *stateFlags) registerHistory(fs *flag.FlagSet) {
	fs.Int64Var(&s.history, "history", defaultHistory, "long-lived variant: finished tasks and delivered events written into each side's tables before its run (plus a tenth more past retention, deleted as churn)")
}

// registerLongLived adds -long-lived (results only).
func (s *stateFlags) registerLongLived(fs *flag.FlagSet) {
	fs.BoolVar(&s.longLived, "long-lived", true, "run the long-lived variant after the pairs: the queue and log scenarios (fixed rates, one round) on -history rows of history")
}

// validate checks the flags' values.
func (s stateFlags) validate() error {
	if s.mode != driver.StateFresh && s.mode != driver.StateKeep {
		return fmt.Errorf("-state %q: want fresh or keep", s.mode)
	}
	if s.history < 0 {
		return errors.New("-history must not be negative")
	}
	_, err := s.serviceEnv()
	return err
}

// serviceEnv turns -schemas into the services' DATABASE_SCHEMA.
func (s stateFlags) serviceEnv() (map[string]map[string]string, error) {
	out := map[string]map[string]string{}
	for f := range strings.SplitSeq(s.schemas, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		svc, sch, ok := strings.Cut(f, "=")
		if !ok || svc == "" || sch == "" {
			return nil, fmt.Errorf("-schemas: %q is not service=schema", f)
		}
		if _, known := scenario.DefaultSchemas[svc]; !known {
			return nil, fmt.Errorf("-schemas: %q keeps no tables in Postgres", svc)
		}
		out[svc] = map[string]string{"DATABASE_SCHEMA": sch}
	}
	return out, nil
}

// prepareStart declares the pair's starting state in run before its
// scenario, when its loadPairs entry says its runs declare one
// (truncating its tables with -state fresh). A failure is written in the
// run's state and notes, and the run goes on.
func prepareStart(ctx context.Context, c common, env *scenario.Env, run *driver.Run, pair string) {
	p, ok := lookupPair(pair)
	if !ok || !p.state {
		return
	}
	if err := env.PrepareStart(ctx, run, p.pair, c.state.mode); err != nil {
		run.Note("starting state (%s) not prepared: %v", c.state.mode, err)
		fmt.Fprintf(os.Stderr, "%s: starting state: %v\n", pair, err)
	}
}

// longLivedPart is one pair of the long-lived variant: a pair of
// loadPairs with a longLived scenario, and its options.
type longLivedPart struct {
	p  loadPair
	sc scenario.RateScenario
	o  scenario.RateOptions
}

// longLivedOpts are the long-lived variant's pairs, in table order.
type longLivedOpts []longLivedPart

// longLivedOptions are the long-lived variant's options: for each pair
// of loadPairs with a longLived scenario, the standard fixed rates of
// its options (opts, by pair; its scenario's defaults for a pair not in
// opts), -duration, one round, no ceiling, no variant.
func longLivedOptions(opts map[string]scenario.RateOptions, c common) longLivedOpts {
	var out longLivedOpts
	for _, p := range loadPairs {
		if p.longLived == nil {
			continue
		}
		o, ok := opts[p.name()]
		if !ok {
			o = p.longLived.Defaults
		}
		o.Duration, o.Rounds, o.Ceiling, o.Variant = c.duration, 1, false, false
		out = append(out, longLivedPart{p: p, sc: *p.longLived, o: o})
	}
	return out
}

// historyEstimate is the typical time to write the history into one
// pair's two schemas on the 2-core stack, per million rows (measured: 7.5 s
// for the queue's 200,000, 9.5 s for the log's, on a busy machine).
const historyEstimate = 45 * time.Second

// steps are the long-lived variant's progress steps, the history's
// writing included in each pair's estimate.
func (o longLivedOpts) steps(settle time.Duration, history int64) []step {
	h := time.Duration(float64(historyEstimate) * float64(history) / 1e6)
	var out []step
	for _, part := range o {
		est := part.o.Estimate(settle)
		est.Typical += h
		est.Bound += 2 * h
		out = append(out, step{"long-lived " + part.p.name(), est})
	}
	return out
}

// runLongLived runs the long-lived variant and returns its results file:
// for the queue pair, then the log pair, it lets the services migrate
// their schemas, stops them, writes -history rows of history and churn
// into both sides' tables, records the tables' state, and runs the
// pair's fixed rates with the services' default retention (24 hours) on.
// Everything goes into one run, command "longlived", which the report
// sets beside the fresh runs.
func runLongLived(ctx context.Context, inv invocation, o longLivedOpts) (string, error) {
	c, env, root, args := inv.c, inv.env, inv.root, inv.args
	if c.state.history < 1 {
		return "", errors.New("-history must be at least 1 for the long-lived variant")
	}
	run := driver.NewRun(longLivedCommand, args, time.Now())
	run.Versions = versions.Collect(ctx, versionsConfig(c, root))
	run.Settings["host"], run.Settings["port_offset"] = c.host, c.portOffset
	run.Settings["history_rows"] = c.state.history
	for _, part := range o {
		run.Settings[part.p.name()+"_rates"] = part.o.Rates
	}
	run.StartState = &driver.StartState{Mode: driver.StateLongLived, HistoryRows: c.state.history, Tables: []driver.TableState{}}
	var errs []error
	for _, part := range o {
		p := part.p.pair
		env.Progress.Begin("long-lived " + p.Name)
		err := part.run(ctx, env, run, c.state.history)
		stopPair(env, p)
		if err != nil {
			run.Note("long-lived %s: %v", p.Name, err)
			errs = append(errs, fmt.Errorf("%s: %w", p.Name, err))
		}
		if ctx.Err() != nil {
			break
		}
	}
	if st := run.StartState; len(errs) > 0 {
		st.Error = errors.Join(errs...).Error()
	}
	run.FinishedAt = time.Now().UTC()
	if len(run.Points) == 0 {
		return "", errors.Join(errs...)
	}
	path, werr := driver.WriteRun(c.resultsDir, run)
	if werr != nil {
		return "", errors.Join(append(errs, werr)...)
	}
	report.Table(os.Stdout, run)
	fmt.Printf("\nresults: %s\n", path)
	return path, errors.Join(errs...)
}

// run prepares the pair's history of n rows per table and runs its
// fixed rates into run.
func (part longLivedPart) run(ctx context.Context, env *scenario.Env, run *driver.Run, n int64) error {
	p, sc, o := part.p.pair, part.sc, part.o
	// The services create and migrate their schemas (goose) when they
	// start: the history goes into tables exactly as they make them. In
	// `results` the fresh runs have done it already.
	schemas := env.Schemas(p)
	if st, err := env.ReadState(ctx, schemas); err != nil || !everySchemaHasTables(st, schemas) {
		if err := env.Ensure(ctx, p.Services(), nil, nil); err != nil {
			return err
		}
		stopPair(env, p)
	}
	notes, err := env.BuildHistory(ctx, p, n)
	for _, n := range notes {
		run.Note("%s", n)
	}
	if err != nil {
		return err
	}
	tables, err := env.ReadState(ctx, schemas)
	if err != nil {
		return err
	}
	run.StartState.Tables = append(run.StartState.Tables, tables...)
	return sc.Run(ctx, env, run, o)
}

// everySchemaHasTables reports whether each of schemas has a table in st.
func everySchemaHasTables(st []driver.TableState, schemas []string) bool {
	for _, sch := range schemas {
		found := false
		for _, t := range st {
			found = found || t.Schema == sch
		}
		if !found {
			return false
		}
	}
	return true
}
