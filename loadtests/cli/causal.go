package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/eventstore"
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
	path, err := eventstore.RunCausal(ctx, o, causalLauncher(env), stderr)
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

// runEventStoreCausal runs the causal experiment in `make results`, after
// the bench's scenarios, at its default sizes, with the bench's
// Postgres, brokers and results folder; its instances are started
// through env's launcher.
func runEventStoreCausal(ctx context.Context, env *scenario.Env, bench eventstore.Options) error {
	o := eventstore.DefaultCausalOptions()
	o.Out, o.DatabaseURL, o.KafkaBrokers, o.KeyedPartitions = bench.Out, bench.DatabaseURL, bench.KafkaBrokers, max(bench.KeyedPartitions, 2)
	_, err := eventstore.RunCausal(ctx, o, causalLauncher(env), os.Stderr)
	return err
}

// causalLauncher starts the experiment's instances through env's
// launcher, each with the service's environment from env and the
// side's own on top, on its port plus env's offset.
func causalLauncher(env *scenario.Env) eventstore.CausalLauncher {
	return func(ctx context.Context, s eventstore.CausalSide) (string, func(), error) {
		if env.Launcher == nil {
			return "", nil, errors.New("the causal experiment starts instances of its own on fresh stores, which -start=never forbids")
		}
		port := s.Port + env.PortOffset
		url := fmt.Sprintf("http://127.0.0.1:%d", port)
		client := &http.Client{Timeout: time.Second}
		if resp, err := client.Get(url + "/healthz"); err == nil {
			resp.Body.Close()
			return "", nil, fmt.Errorf("port %d is already served by another process: the experiment's %s needs it", port, s.Instance)
		}
		e := maps.Clone(env.ServiceEnv[s.Service])
		if e == nil {
			e = map[string]string{}
		}
		maps.Copy(e, s.Env)
		timeout := env.ReadyTimeout
		if timeout == 0 {
			timeout = 90 * time.Second
		}
		if _, err := env.Launcher.Start(ctx, s.Instance, port, e, timeout); err != nil {
			return "", nil, err
		}
		stop := func() {
			if err := env.Launcher.Stop(s.Instance, 30*time.Second); err != nil {
				fmt.Fprintf(os.Stderr, "eventstore causal: %v\n", err)
			}
		}
		return url, stop, nil
	}
}
