package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/experiments"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/report"
)

// experimentsCommand is the failure-mode experiments' subcommand.
const experimentsCommand = "experiments"

// experimentsMain runs `experiments [flags]`: the failure-mode
// experiments (loadtests/experiments), their results file
// results/<UTC time>-experiments.json, and a table on stdout; it returns
// the exit status.
func experimentsMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(experimentsCommand, flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("results", "results", "folder for the results JSON file")
	size := fs.String("size", "full", "small (seconds each, as the tests run them) or full (make results' size)")
	only := fs.String("only", "", "comma-separated experiments to run (default all but the cluster profile's): "+strings.Join(experimentNames(), ", "))
	var env experiments.Env
	fs.StringVar(&env.PostgresURL, "database-url", "", "Postgres (default DATABASE_URL or the stack's): scratch schemas are created and dropped there")
	fs.StringVar(&env.PgBouncerURL, "pgbouncer-url", "", "pgbouncer in transaction mode (default PGBOUNCER_URL or the stack's)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	sz, err := experiments.ParseSize(*size)
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 2
	}
	var names []string
	if *only != "" {
		names = strings.Split(*only, ",")
	}
	xs, err := experiments.Select(names)
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	env.Out = stderr
	if _, err := runExperiments(ctx, env, sz, xs, *dir, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	return 0
}

// runExperiments runs xs at size, writes their results file to dir and
// prints their table to stdout; it returns the file's path ("" when
// nothing ran) and an error when an experiment could not measure or the
// run was cut short.
func runExperiments(ctx context.Context, env experiments.Env, size experiments.Size, xs []experiments.Experiment, dir string, stdout, stderr io.Writer) (string, error) {
	if env.Out == nil {
		env.Out = stderr
	}
	fmt.Fprintf(stderr, "experiments: %d at size %s, estimated ~%s at full size\n", len(xs), size, driver.Human(experiments.Estimate(xs)))
	f, err := experiments.Run(ctx, env, size, xs)
	if len(f.Results) == 0 {
		return "", err
	}
	path, werr := experiments.Write(dir, f)
	if werr != nil {
		return "", errors.Join(err, werr)
	}
	printExperiments(stdout, f)
	fmt.Fprintf(stdout, "\nresults: %s (RESULTS.md's %q section: go run ./loadtests report)\n", path, report.FailureModesTitle)
	var failed []string
	for _, r := range f.Results {
		if r.Error != "" {
			failed = append(failed, r.Name)
		}
	}
	if len(failed) > 0 {
		err = errors.Join(err, fmt.Errorf("could not measure: %s", strings.Join(failed, ", ")))
	}
	return path, err
}

// printExperiments writes one line per experiment: its name, the
// acknowledged writes lost, its duration and its figure.
func printExperiments(w io.Writer, f experiments.File) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "EXPERIMENT\tACKED LOST\tSECONDS\tFIGURE")
	for _, r := range f.Results {
		fig := experiments.Describe(r).Figure
		if r.Error != "" {
			fig = "could not measure: " + r.Error
		}
		fmt.Fprintf(tw, "%s\t%s\t%.1f\t%s\n", r.Name, report.LostCell(r), r.DurationS, fig)
	}
	tw.Flush()
}

// experimentNames are every experiment's name, in Known's order (the
// cluster profile's last).
func experimentNames() []string {
	var names []string
	for _, x := range experiments.Known() {
		names = append(names, x.Name)
	}
	return names
}
