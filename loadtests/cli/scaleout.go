package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/launch"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/scenario"
)

// scaleoutCommand is the scale-out scenario's command (issue 23).
const scaleoutCommand = scenario.ScaleOutCommand

// scaleoutMain runs `go run ./loadtests scaleout [flags]`: the scale-out
// scenario alone, as one results file "<id>-scaleout.json". It returns
// the exit code.
func scaleoutMain(args []string, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fs := commandFlagSet(scaleoutCommand, stderr)
	var c common
	o := scenario.ScaleOutDefaults
	c.register(fs, 1, o.Duration)
	instances := fs.String("scaleout-instances", formatInts(o.Instances), "scaleout: numbers of instances of each queue side (empty: no queue rate, batch or kill points)")
	rates := fs.String("scaleout-rates", formatRates(o.Rates), "scaleout: fixed rates per second, offered round-robin to the instances")
	fs.IntVar(&o.BatchTasks, "scaleout-batch-tasks", o.BatchTasks, "scaleout: tasks of the batch point")
	fs.IntVar(&o.Workers, "scaleout-workers", o.Workers, "scaleout: WORKERS of every instance")
	fs.IntVar(&o.WorkMS, "scaleout-work-ms", o.WorkMS, "scaleout: WORK_MS of every instance")
	fs.DurationVar(&o.Lease, "scaleout-lease", o.Lease, "scaleout: no-rabbitmq's LEASE (how long a killed instance's tasks stay locked)")
	fs.DurationVar(&o.KillDuration, "scaleout-kill-duration", o.KillDuration, "scaleout: load of the kill -9 point (the victim dies a third of the way in)")
	fs.BoolVar(&o.Kill, "scaleout-kill", o.Kill, "scaleout: run the kill -9 point")
	subs := fs.String("scaleout-subscribers", formatInts(o.Subscribers), "scaleout: numbers of subscribers of the fan-out points (empty: none)")
	fs.Float64Var(&o.FanoutRate, "scaleout-fanout-rate", o.FanoutRate, "scaleout: tasks/s posted at the fan-out points (each becomes one copy per subscriber)")
	fs.IntVar(&o.FanoutWorkMS, "scaleout-fanout-work-ms", o.FanoutWorkMS, "scaleout: WORK_MS of the fan-out points' instance")
	fanoutSustain := fs.Bool("scaleout-fanout-sustainable", o.FanoutSustain != nil, "scaleout: search each fan-out point's sustainable published rate on each side and design (backlog of copies flat, send→processed p99 < "+scenario.SustainSLO.String()+")")
	fo := *scenario.ScaleOutDefaults.FanoutSustain
	fs.DurationVar(&fo.Step, "scaleout-fanout-step", fo.Step, "scaleout: duration of each offered rate of the fan-out search (its first "+fo.Warmup.String()+" left out of the backlog's trend)")
	groups := fs.String("scaleout-groups", formatInts(o.Groups), "scaleout: numbers of consumer groups (the default one included) of the log pair's groups points (empty: none)")
	fs.Float64Var(&o.GroupRate, "scaleout-group-rate", o.GroupRate, "scaleout: events/s (single POST /events) at the groups points")
	fs.BoolVar(&o.Cursors, "scaleout-cursors", o.Cursors, "scaleout: measure the fan-out, groups, takeover, replay and stopped points on the Postgres sides' second designs too (FANOUT_DESIGN, GROUPS_DESIGN=cursors)")
	fs.DurationVar(&o.StoppedFor, "scaleout-stopped-for", o.StoppedFor, "scaleout: how long one of three groups is not consumed at the stopped point, at -scaleout-group-rate (0: no stopped point)")
	fs.IntVar(&o.ReplayEvents, "scaleout-replay-events", o.ReplayEvents, "scaleout: events written before the replay point's group is created from earliest (0: no replay point)")
	fs.Float64Var(&o.ReplayLiveRate, "scaleout-replay-live-rate", o.ReplayLiveRate, "scaleout: events/s written while the replay group catches up")
	if rc, ok := parseFlags(fs, args); !ok {
		return rc
	}
	var err error
	if o.Rates, err = parseRates(*rates); err != nil {
		fmt.Fprintln(stderr, "loadtests scaleout:", err)
		return 2
	}
	for _, l := range []struct {
		name  string
		value *string
		to    *[]int
	}{{"scaleout-instances", instances, &o.Instances}, {"scaleout-subscribers", subs, &o.Subscribers}, {"scaleout-groups", groups, &o.Groups}} {
		if *l.to, err = optionalSizes(l.name, *l.value); err != nil {
			fmt.Fprintln(stderr, "loadtests scaleout:", err)
			return 2
		}
	}
	o.Duration = c.duration
	o.FanoutSustain = nil
	if *fanoutSustain {
		o.FanoutSustain = &fo
	}
	if err := runScaleOutCommand(ctx, c, args, o); err != nil {
		fmt.Fprintln(stderr, "loadtests scaleout:", err)
		return 1
	}
	return 0
}

// optionalSizes is the size list value of the flag name (parseSizes),
// none when it is empty; an error names the flag.
func optionalSizes(name, value string) ([]int, error) {
	if value == "" {
		return nil, nil
	}
	sizes, err := parseSizes(value)
	if err != nil {
		return nil, fmt.Errorf("-%s: %w", name, err)
	}
	return sizes, nil
}

// runScaleOutCommand assembles the environment and runs the scenario.
func runScaleOutCommand(ctx context.Context, c common, args []string, o scenario.ScaleOutOptions) error {
	if o.WorkMS < 1 || o.Workers < 1 || o.BatchTasks < 1 || o.Duration <= 0 || o.KillDuration <= 0 {
		return errors.New("-scaleout-work-ms, -scaleout-workers, -scaleout-batch-tasks, -duration and -scaleout-kill-duration must be positive")
	}
	if len(o.Subscribers) > 0 && (o.FanoutRate <= 0 || o.FanoutWorkMS < 1) {
		return errors.New("-scaleout-fanout-rate and -scaleout-fanout-work-ms must be positive")
	}
	if o.FanoutSustain != nil && len(o.Subscribers) > 0 {
		if err := o.FanoutSustain.Validate(); err != nil {
			return fmt.Errorf("-scaleout-fanout-step: %w", err)
		}
	}
	if len(o.Groups) > 0 && o.GroupRate <= 0 {
		return errors.New("-scaleout-group-rate must be positive")
	}
	if o.StoppedFor < 0 || (o.StoppedFor > 0 && o.GroupRate <= 0) {
		return errors.New("-scaleout-stopped-for must not be negative, and -scaleout-group-rate must be positive")
	}
	if o.ReplayEvents < 0 || (o.ReplayEvents > 0 && o.ReplayLiveRate <= 0) {
		return errors.New("-scaleout-replay-events must not be negative, and -scaleout-replay-live-rate must be positive")
	}
	root, err := launch.Root()
	if err != nil {
		return err
	}
	o.StackDir = scenario.StackDir(root)
	env, cleanup, err := newEnv(c, root)
	if err != nil {
		return err
	}
	defer cleanup()
	if c.progress {
		env.Progress = newProgress(os.Stderr, scaleoutCommand, c.settle, []step{{scaleoutCommand, o.Estimate(c.settle)}})
	}
	return runPair(ctx, invocation{c, env, root, args}, scaleoutCommand, scaleoutRun(ctx, env, o))
}

// scaleoutRun is the scenario's part of a run (the scaleout and results
// commands).
func scaleoutRun(ctx context.Context, env *scenario.Env, o scenario.ScaleOutOptions) func(*driver.Run) error {
	return func(run *driver.Run) error {
		start := time.Now()
		err := scenario.RunScaleOut(ctx, env, run, o)
		run.Settings["elapsed_s"] = time.Since(start).Round(time.Second).Seconds()
		return err
	}
}
