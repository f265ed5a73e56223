package cli

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

// sustainableCommand runs the throughput command without its closed-loop
// points (main maps it to throughput -closed-loop=false), so that its
// results file is a throughput run the report reads.
const sustainableCommand = "sustainable"

// throughputCommand is the throughput scenarios' command.
const throughputCommand = scenario.ThroughputCommand

// sustainableArgs are the throughput command's arguments of the
// sustainable command run with args.
func sustainableArgs(args []string) []string {
	return append([]string{"-closed-loop=false"}, args...)
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
	designs  *bool
	// The sustainable search's flags.
	closedLoop, sustain, quick *bool
	sRounds, sOver, sOverSize  *int
	sStep                      *time.Duration
	sSizes                     *string
}

// registerThroughput registers the throughput flags of cmd.
func registerThroughput(fs *flag.FlagSet, cmd string) *throughputFlags {
	d := scenario.ThroughputDefaults
	f := &throughputFlags{cmd: cmd}
	f.sizes = fs.String("batch-sizes", formatInts(d.Sizes), "throughput: items per batch request, comma-separated (1 to 1000)")
	f.senders = fs.Int("senders", d.Senders, "throughput: closed-loop senders per side")
	f.designs = fs.Bool("throughput-designs", d.Designs, "throughput: measure the Postgres sides' other designs too, on their side alone after the pairs (no-kafka with SLOT_PLUGIN=pgoutput on a slot of its own, against wal2json)")
	f.drain = fs.Duration("throughput-drain", d.Drain, "throughput: longest wait for a side's backlog to drain after its loop (and before its next point); -settle when that is longer")
	if cmd == "results" {
		f.duration = fs.Duration("throughput-duration", d.Duration, "throughput: duration of each loop")
		f.rounds = fs.Int("throughput-rounds", d.Rounds, "throughput: rounds per batch size")
	}
	sd := scenario.SustainDefaults
	f.closedLoop = fs.Bool("closed-loop", true, "throughput: run the closed-loop points (accepted/s); false runs the sustainable search alone")
	f.sustain = fs.Bool("sustainable", true, "throughput: run the open-loop sustainable search after each pair's closed-loop points")
	f.quick = fs.Bool("sustainable-quick", false, "throughput: the sustainable search at its quick size (4 s steps at 500–1000 items/s, one round): a check that it runs, not a measurement")
	f.sSizes = fs.String("sustainable-sizes", formatInts(sd.Sizes), "throughput: batch sizes of the sustainable search, comma-separated (1 to 1000)")
	f.sStep = fs.Duration("sustainable-step", sd.Step, "throughput: duration of each offered rate of the sustainable search (its first "+sd.Warmup.String()+" left out of the backlog's trend)")
	f.sRounds = fs.Int("sustainable-rounds", sd.Rounds, "throughput: sustainable searches per side (the run-to-run range)")
	f.sOver = fs.Int("sustainable-over-rounds", sd.OverRounds, "throughput: rounds of the queue sides at twice their sustainable rate (0: none)")
	f.sOverSize = fs.Int("sustainable-over-size", sd.OverSize, "throughput: the batch size (one of -sustainable-sizes) at which the queue sides are offered twice their sustainable rate")
	return f
}

// sustainOptions returns the sustainable search's options from the
// parsed flags (nil when it is off).
func (f *throughputFlags) sustainOptions() (*scenario.SustainOptions, error) {
	if !*f.sustain {
		return nil, nil
	}
	o := scenario.SustainDefaults
	if *f.quick {
		o = scenario.SustainQuick
	} else {
		o.Step, o.Rounds, o.OverRounds, o.OverSize = *f.sStep, *f.sRounds, *f.sOver, *f.sOverSize
		o.Sizes = nil
		for s := range strings.SplitSeq(*f.sSizes, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil || n < 1 || n > 1000 {
				return nil, fmt.Errorf("-sustainable-sizes: bad size %q (1 to 1000)", s)
			}
			o.Sizes = append(o.Sizes, n)
		}
		if o.Warmup >= o.Step {
			return nil, fmt.Errorf("-sustainable-step %s must be longer than the %s warm-up", o.Step, o.Warmup)
		}
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return &o, nil
}

// options returns the scenario's options from the parsed flags.
func (f *throughputFlags) options(c common, root string) (scenario.ThroughputOptions, error) {
	o := scenario.ThroughputOptions{Senders: *f.senders, Duration: c.duration, Rounds: c.rounds, Drain: *f.drain, StackDir: scenario.StackDir(root), Designs: *f.designs}
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
	o.SkipClosedLoop = !*f.closedLoop
	so, err := f.sustainOptions()
	if err != nil {
		return o, err
	}
	o.Sustain = so
	if o.SkipClosedLoop && o.Sustain == nil {
		return o, fmt.Errorf("-closed-loop=false and -sustainable=false leave nothing to run")
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
func runThroughput(ctx context.Context, inv invocation, o scenario.ThroughputOptions) error {
	return runPair(ctx, inv, throughputCommand, throughputRun(ctx, inv.c, inv.env, o))
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
		return scenario.RunThroughput(ctx, env, run, o, scenario.PairHooks{Before: before, After: func(p scenario.Pair) { stopPair(env, p) }})
	}
}
