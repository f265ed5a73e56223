package cli

import (
	"context"
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
)

// causalScenario is the causal experiment's name after `eventstore`:
// `go run ./loadtests eventstore causal [flags]`.
const causalScenario = "causal"

// causalMain runs the causal point-read experiment alone
// (eventstore.RunCausal), starting its own instances, then prints its
// part of the event store section; it returns the exit status.
func causalMain(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("eventstore causal", stderr)
	o := eventstore.DefaultCausalOptions()
	eventStoreServers(&o.DatabaseURL, &o.KafkaBrokers)
	o.Register(fs)
	c := common{host: "localhost", start: scenario.StartAuto}
	fs.StringVar(&c.start, "start", c.start, "auto or always: the experiment starts instances of its own (ports 8790-8792); never: it cannot run")
	fs.StringVar(&c.logDir, "logs", filepath.Join(os.TempDir(), "wpe-loadtests-logs"), "folder for the logs of the instances it starts")
	if rc, ok := parseFlags(fs, args); !ok {
		return rc
	}
	if err := o.Validate(); err != nil {
		return fail(stderr, 2, err)
	}
	c.pgURL, c.resultsDir = o.DatabaseURL, o.Out
	root, err := launch.Root()
	if err != nil {
		return fail(stderr, 1, err)
	}
	env, cleanup, err := newEnv(c, root)
	if err != nil {
		return fail(stderr, 2, err)
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
		return fail(stderr, 1, lerr)
	}
	fmt.Fprintf(stdout, "wrote %s\n\n%s", path, report.EventStoreSection([]*driver.Run{run}))
	if err != nil {
		return 1
	}
	return 0
}
