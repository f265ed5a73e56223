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
}

// registerThroughput registers the throughput flags of cmd.
func registerThroughput(fs *flag.FlagSet, cmd string) *throughputFlags {
	d := scenario.ThroughputDefaults
	f := &throughputFlags{cmd: cmd}
	f.sizes = fs.String("batch-sizes", formatInts(d.Sizes), "throughput: items per batch request, comma-separated (1 to 1000)")
	f.senders = fs.Int("senders", d.Senders, "throughput: closed-loop senders per side")
	if cmd == "results" {
		f.duration = fs.Duration("throughput-duration", d.Duration, "throughput: duration of each loop")
		f.rounds = fs.Int("throughput-rounds", d.Rounds, "throughput: rounds per batch size")
	}
	return f
}

// options returns the scenario's options from the parsed flags.
func (f *throughputFlags) options(c common, root string) (scenario.ThroughputOptions, error) {
	o := scenario.ThroughputOptions{Senders: *f.senders, Duration: c.duration, Rounds: c.rounds, StackDir: scenario.StackDir(root)}
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
// "<id>-throughput.json", stopping each pair's services the driver
// started once its points are done.
func runThroughput(ctx context.Context, c common, env *scenario.Env, root string, args []string, o scenario.ThroughputOptions) error {
	return runPair(ctx, c, env, root, "throughput", args, func(run *driver.Run) error {
		return scenario.RunThroughput(ctx, env, run, o, func(p scenario.Pair) { stopPair(env, p) })
	})
}
