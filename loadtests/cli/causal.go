package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/eventstore"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/eventstorerun"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/launch"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/report"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/scenario"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/versions"
)

// causalScenario is the causal experiment's name after `eventstore`:
// `go run ./loadtests eventstore causal [flags]`.
const causalScenario = "causal"

// causalMain runs the causal point-read experiment alone
// (eventstore.RunCausal), starting its own instances, then prints its
// part of the event store section; it returns the exit status.
func causalMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("eventstore causal", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := eventstore.DefaultCausalOptions()
	o.DatabaseURL = envOr("DATABASE_URL", versions.DefaultPostgresURL)
	o.KafkaBrokers = envOr("KAFKA_BROKERS", o.KafkaBrokers)
	o.Register(fs)
	c := common{host: "localhost", start: scenario.StartAuto}
	fs.StringVar(&c.start, "start", c.start, "auto or always: the experiment starts instances of its own (ports 8790-8792); never: it cannot run")
	fs.StringVar(&c.logDir, "logs", filepath.Join(os.TempDir(), "wpe-loadtests-logs"), "folder for the logs of the instances it starts")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if err := o.Validate(); err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 2
	}
	c.pgURL, c.resultsDir = o.DatabaseURL, o.Out
	root, err := launch.Root()
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	env, cleanup, err := newEnv(c, root)
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 2
	}
	defer cleanup()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	est := eventstore.CausalEstimate(o)
	fmt.Fprintf(stderr, "eventstore causal: sizes %v, estimated ~%s (at most ~%s)\n", o.Run(), est.Typical.Round(time.Second), est.Bound.Round(time.Second))
	path, err := eventstore.RunCausal(ctx, o, eventstorerun.CausalLauncher(env), stderr)
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		if path == "" {
			return 1
		}
	}
	run, lerr := driver.ReadRun(path)
	if lerr == nil {
		_, lerr = eventstore.FromRuns([]*driver.Run{run})
	}
	if lerr != nil {
		fmt.Fprintln(stderr, "error:", lerr)
		return 1
	}
	fmt.Fprintf(stdout, "wrote %s\n\n%s", path, report.EventStoreSection([]*driver.Run{run}))
	if err != nil {
		return 1
	}
	return 0
}
