package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/eventstore"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/experiments"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/raw"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/report"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/scenario"
)

// extras are the parts of the queue, log and results commands added by
// issue 15: overload points at multiples of each side's ceiling, the log
// pair at fractions of its batch throughput, and the engines' raw limits.
type extras struct {
	overload, atThroughput, raw bool
	// experiments runs the failure-mode experiments (issue 14) last.
	experiments bool
	// steps are the results command's steps to run (resultsStepNames),
	// every one when empty (-steps).
	steps        map[string]bool
	rawDuration  time.Duration
	overloadOpts scenario.OverloadOptions
	atOpts       scenario.AtThroughputOptions
}

// newExtras returns the extras at their defaults, every one off until a
// command registers its flags.
func newExtras() *extras {
	return &extras{overloadOpts: scenario.DefaultOverload, atOpts: scenario.DefaultAtThroughput}
}

// registerOverload registers the overload flags (once: the queue and
// log pairs both take them).
func (x *extras) registerOverload(fs *flag.FlagSet) {
	if fs.Lookup("overload") != nil {
		return
	}
	fs.BoolVar(&x.overload, "overload", true, "after the ceiling search, offer 2× and 5× each side's ceiling (needs -ceiling)")
	fs.DurationVar(&x.overloadOpts.Duration, "overload-duration", x.overloadOpts.Duration, "duration of each overload attack")
}

// registerAtThroughput registers the log pair's at-throughput flags.
func (x *extras) registerAtThroughput(fs *flag.FlagSet) {
	fs.BoolVar(&x.atThroughput, "at-throughput", true, "log: measure each side's batch throughput, then delivery latency at 25/50/75% of it")
	fs.DurationVar(&x.atOpts.Duration, "at-throughput-duration", x.atOpts.Duration, "log: duration of each point at a fraction of the batch throughput")
}

// registerResults registers the results command's extras: the raw loops
// and the failure-mode experiments.
func (x *extras) registerResults(fs *flag.FlagSet) {
	fs.BoolVar(&x.raw, "raw", true, "measure the engines' raw limits (no service) before the pairs")
	fs.DurationVar(&x.rawDuration, "raw-duration", 3*time.Second, "duration of each raw loop")
	fs.BoolVar(&x.experiments, "experiments", true, "after the event-store bench, run the failure-mode experiments at full size (go run ./loadtests experiments)")
	fs.Func("steps", "results: run only these steps, comma-separated ("+strings.Join(resultsStepNames(), ", ")+"; default every one), then write the report from the newest results file of every step: to complete a run whose later steps failed (a full disk, a server that died) without measuring the others again", func(v string) error {
		x.steps = map[string]bool{}
		for _, name := range strings.Split(v, ",") {
			name = strings.TrimSpace(name)
			if !slices.Contains(resultsStepNames(), name) {
				return fmt.Errorf("unknown step %q (have %s)", name, strings.Join(resultsStepNames(), ", "))
			}
			x.steps[name] = true
		}
		return nil
	})
}

// resultsStepNames are the results command's steps, in their order: the
// names -steps takes.
func resultsStepNames() []string {
	names := []string{"raw"}
	for _, p := range loadPairs {
		if !p.last {
			names = append(names, p.name())
		}
	}
	names = append(names, throughputCommand, scaleoutCommand, longLivedCommand)
	for _, p := range loadPairs {
		if p.last {
			names = append(names, p.name())
		}
	}
	return append(names, eventstore.CeilingCommand, scenario.DurabilityCommand, "experiments")
}

// runs reports whether the results command runs step name (-steps).
func (x *extras) runs(name string) bool { return len(x.steps) == 0 || x.steps[name] }

// overloadEstimate is the overload points' part of a rate pair's step
// (none when -overload is off).
func (x *extras) overloadEstimate(settle time.Duration) scenario.Estimate {
	if !x.overload {
		return scenario.Estimate{}
	}
	return x.overloadOpts.Estimate(settle)
}

// atThroughputEstimate is the at-throughput points' part of the log
// pair's step (none when -at-throughput is off).
func (x *extras) atThroughputEstimate(settle time.Duration) scenario.Estimate {
	if !x.atThroughput {
		return scenario.Estimate{}
	}
	return x.atOpts.Estimate(settle)
}

// plan adds the extras to a command's progress plan: the raw loops as
// a first step, the failure-mode experiments as the last (the rate
// pairs' steps hold their own extras, ratePair.estimate).
func (x *extras) plan(steps []step) []step {
	var out []step
	if x.raw {
		o := raw.DefaultOptions()
		o.Duration = x.rawDuration
		out = append(out, step{"raw", scenario.Estimate{Typical: raw.Estimate(o), Bound: 2 * raw.Estimate(o)}})
	}
	out = append(out, steps...)
	if x.experiments {
		d := experiments.Estimate(experiments.All())
		out = append(out, step{"experiments", scenario.Estimate{Typical: d, Bound: 2 * d}})
	}
	// -steps: those the run takes (the long-lived variant's two steps are
	// "long-lived queue" and "long-lived log").
	return slices.DeleteFunc(out, func(s step) bool {
		name := s.name
		if strings.HasPrefix(name, "long-lived ") {
			name = longLivedCommand
		}
		return !x.runs(name)
	})
}

// queue runs the queue pair's extras on run, after its scenario.
func (x *extras) queue(ctx context.Context, env *scenario.Env, run *driver.Run, o scenario.RateOptions) error {
	if ctx.Err() != nil {
		return nil // the scenario before has said so
	}
	if x.overload && o.Ceiling {
		return scenario.QueueScenario.Overload(ctx, env, run, x.overloadOpts)
	}
	return nil
}

// log runs the log pair's extras on run, after its scenario.
func (x *extras) log(ctx context.Context, env *scenario.Env, run *driver.Run, o scenario.RateOptions) error {
	if ctx.Err() != nil {
		return nil // the scenario before has said so
	}
	if x.overload && o.Ceiling {
		if err := scenario.LogScenario.Overload(ctx, env, run, x.overloadOpts); err != nil {
			return err
		}
	}
	if x.atThroughput {
		return scenario.LogScenario.AtThroughput(ctx, env, run, x.atOpts)
	}
	return nil
}

// measureRaw runs the raw loops and writes their results file to c's
// results folder.
func measureRaw(ctx context.Context, c common, d time.Duration, log io.Writer) error {
	o := raw.DefaultOptions()
	o.PostgresURL, o.Duration = c.pgURL, d
	o.Log = func(format string, args ...any) { fmt.Fprintf(log, format+"\n", args...) }
	res, err := raw.Measure(ctx, o)
	if len(res.Loops) > 0 {
		path, werr := raw.Write(c.resultsDir, res)
		if werr != nil {
			return werr
		}
		fmt.Fprintf(log, "raw results: %s\n", path)
	}
	return err
}

// rawSection is RESULTS.md's raw-limits section from the newest raw
// results file in c's results folder and runs, or "" when there is none.
func rawSection(c common, runs []*driver.Run) (string, error) {
	r, err := raw.Load(c.resultsDir)
	if err != nil || len(r.Loops) == 0 {
		return "", err
	}
	return report.RawSection(r, runs), nil
}

// rawMain runs `raw [flags]`: the engines' raw limits alone, written to
// results/<id>-raw.json and printed as RESULTS.md's section would show
// them.
func rawMain(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("raw", stderr)
	o := raw.DefaultOptions()
	fs.StringVar(&o.PostgresURL, "database-url", o.PostgresURL, "Postgres (a scratch schema and a temporary wal2json slot are created there)")
	fs.StringVar(&o.RabbitMQURL, "rabbitmq-url", o.RabbitMQURL, "RabbitMQ (a scratch queue)")
	brokers := fs.String("kafka-brokers", strings.Join(o.KafkaBrokers, ","), "Kafka bootstrap servers (a scratch topic)")
	fs.DurationVar(&o.Duration, "duration", o.Duration, "duration of each loop")
	fs.IntVar(&o.Conns, "conns", o.Conns, "connections of the Postgres loops")
	fs.IntVar(&o.RetentionRows, "retention-rows", o.RetentionRows, "rows of the retention measurement's history and queue tables (with the Postgres loops); 0 skips it")
	dir := fs.String("results", "results", "folder for the results JSON file")
	only := fs.String("only", "", "comma-separated engines to measure (postgres, rabbitmq, kafka); default all")
	if rc, ok := parseFlags(fs, args); !ok {
		return rc
	}
	o.KafkaBrokers = strings.Split(*brokers, ",")
	if *only != "" {
		o.Only = strings.Split(*only, ",")
	}
	o.Log = func(format string, args ...any) { fmt.Fprintf(stderr, format+"\n", args...) }
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(stderr, "raw: estimated ~%s\n", driver.Human(raw.Estimate(o)))
	res, err := raw.Measure(ctx, o)
	if len(res.Loops) > 0 {
		path, werr := raw.Write(*dir, res)
		if werr != nil {
			return fail(stderr, 1, werr)
		}
		fmt.Fprintf(stdout, "wrote %s\n\n%s", path, report.RawSection(res, nil))
	}
	if err != nil {
		return fail(stderr, 1, err)
	}
	return 0
}
