package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/scenario"
)

func init() {
	loadCommands["throughput"] = "closed-loop batch senders on the queue and log pairs: accepted and end-to-end items/s, latency, CPU per 1,000 items"
}

// throughputFlags are the throughput scenario's flags. The throughput
// command takes its duration and rounds from -duration and -rounds; the
// results command, whose -duration is the rate points', from
// -throughput-duration and -throughput-rounds.
type throughputFlags struct {
	cmd      string
	sizes    *string
	senders  *int
	duration *time.Duration
	rounds   *int
	drain    *time.Duration
}

// registerThroughput registers the throughput flags of cmd.
func registerThroughput(fs *flag.FlagSet, cmd string) *throughputFlags {
	d := scenario.ThroughputDefaults
	f := &throughputFlags{cmd: cmd}
	f.sizes = fs.String("batch-sizes", formatInts(d.Sizes), "throughput: items per batch request, comma-separated (1 to 1000)")
	f.senders = fs.Int("senders", d.Senders, "throughput: closed-loop senders per side")
	f.drain = fs.Duration("throughput-drain", d.Drain, "throughput: longest wait for a side's backlog to drain after its loop (and before its next point); -settle when that is longer")
	if cmd == "results" {
		f.duration = fs.Duration("throughput-duration", d.Duration, "throughput: duration of each loop")
		f.rounds = fs.Int("throughput-rounds", d.Rounds, "throughput: rounds per batch size")
	}
	return f
}

// options returns the scenario's options from the parsed flags.
func (f *throughputFlags) options(c common, root string) (scenario.ThroughputOptions, error) {
	o := scenario.ThroughputOptions{Senders: *f.senders, Duration: c.duration, Rounds: c.rounds, Drain: *f.drain, StackDir: scenario.StackDir(root)}
	if f.duration != nil {
		o.Duration, o.Rounds = *f.duration, *f.rounds
	}
	for s := range strings.SplitSeq(*f.sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 || n > 1000 {
			return o, fmt.Errorf("-batch-sizes: bad size %q (1 to 1000)", s)
		}
		o.Sizes = append(o.Sizes, n)
	}
	switch {
	case o.Senders < 1:
		return o, fmt.Errorf("-senders must be at least 1")
	case o.Duration <= 0 || o.Rounds < 1:
		return o, fmt.Errorf("throughput: duration and rounds must be positive")
	}
	return o, nil
}

func formatInts(v []int) string {
	var parts []string
	for _, n := range v {
		parts = append(parts, strconv.Itoa(n))
	}
	return strings.Join(parts, ",")
}

// runThroughput runs the throughput scenario as one results file,
// "<id>-throughput.json".
func runThroughput(ctx context.Context, c common, env *scenario.Env, root string, args []string, o scenario.ThroughputOptions) error {
	return runPair(ctx, c, env, root, "throughput", args, throughputRun(ctx, c, env, o))
}

// throughputRun is the throughput scenario's part of a run (the
// throughput and results commands): each pair's tables get the run's
// starting state (-state: truncated when fresh) before its services
// start, and its services the driver started are stopped once its points
// are done.
func throughputRun(ctx context.Context, c common, env *scenario.Env, o scenario.ThroughputOptions) func(*driver.Run) error {
	return func(run *driver.Run) error {
		tables := []driver.TableState{}
		var errs []string
		before := func(p scenario.Pair) {
			if c.state.mode == "" {
				return
			}
			err := env.PrepareStart(ctx, run, p, c.state.mode)
			if err != nil {
				run.Note("starting state (%s) of the %s pair not prepared: %v", c.state.mode, p.Name, err)
				errs = append(errs, p.Name+": "+err.Error())
			}
			// One state for the run: both pairs' tables.
			tables = append(tables, run.StartState.Tables...)
			run.StartState.Tables, run.StartState.Error = tables, strings.Join(errs, "; ")
		}
		return scenario.RunThroughput(ctx, env, run, o, before, func(p scenario.Pair) { stopPair(env, p) })
	}
}
