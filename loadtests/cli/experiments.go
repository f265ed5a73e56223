package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/experiments"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/launch"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/report"
)

// experimentsCommand is the failure-mode experiments' subcommand.
const experimentsCommand = "experiments"

// experimentsMain runs `experiments [flags]`: the failure-mode
// experiments (loadtests/experiments), their results file
// results/<UTC time>-experiments.json, and a table on stdout; it returns
// the exit status.
func experimentsMain(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet(experimentsCommand, stderr)
	dir := fs.String("results", "results", "folder for the results JSON file")
	size := fs.String("size", "full", "small (seconds each, as the tests run them) or full (make results' size)")
	only := fs.String("only", "", "comma-separated experiments to run (default all but the cluster profile's): "+strings.Join(experimentNames(), ", "))
	repeat := fs.Int("repeat", 1, "run the selected experiments this many times, in rounds, into one results file (the cluster profile's faults: 3 or more, for the cards' ranges)")
	var env experiments.Env
	fs.StringVar(&env.PostgresURL, "database-url", "", "Postgres (default DATABASE_URL or the stack's): scratch schemas are created and dropped there")
	fs.StringVar(&env.PgBouncerURL, "pgbouncer-url", "", "pgbouncer in transaction mode (default PGBOUNCER_URL or the stack's)")
	compare := fs.String("compare-bindirs", "", "comma-separated bin directories of other PostgreSQL versions that "+experiments.NotifySerializes+
		" measures again on a private server of each, \"none\" for none (default "+experiments.CompareBindirsEnv+", else PostgreSQL 18 from make deps-cluster when present)")
	if rc, ok := parseFlags(fs, args); !ok {
		return rc
	}
	env.CompareBindirs, env.CompareNone = compareBindirs(*compare)
	sz, err := experiments.ParseSize(*size)
	if err != nil {
		return fail(stderr, 2, err)
	}
	var names []string
	if *only != "" {
		names = strings.Split(*only, ",")
	}
	xs, err := experiments.Select(names)
	if err != nil {
		return fail(stderr, 2, err)
	}
	if *repeat < 1 {
		fmt.Fprintln(stderr, "error: -repeat must be at least 1")
		return 2
	}
	xs = experiments.Repeat(xs, *repeat)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	env.Out = stderr
	// The single-node, the documents pair's and the cluster profile's
	// experiments write files of their own (experiments.Groups), read by
	// RESULTS.md's sections.
	rc := 0
	for _, set := range experiments.Groups(xs) {
		if ctx.Err() != nil {
			continue
		}
		if _, err := runExperiments(ctx, env, sz, set, experimentsOut{*dir, stdout, stderr}); err != nil {
			fmt.Fprintln(stderr, "error:", err)
			rc = 1
		}
	}
	return rc
}

// experimentsOut is where runExperiments writes: the results folder, the
// table's stream and the progress's.
type experimentsOut struct {
	dir            string
	stdout, stderr io.Writer
}

// runExperiments runs xs at size, writes their results file to dir and
// prints their table to stdout; it returns the file's path ("" when
// nothing ran) and an error when an experiment could not measure or the
// run was cut short.
func runExperiments(ctx context.Context, env experiments.Env, size experiments.Size, xs []experiments.Experiment, out experimentsOut) (string, error) {
	dir, stdout, stderr := out.dir, out.stdout, out.stderr
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
	section := report.FailureModesTitle
	switch {
	case experiments.IsCluster(f.Results[0].Name):
		section = report.FailoverTitle
	case experiments.IsBeyondCRUD(f.Results[0].Name):
		section = report.BeyondCRUDTitle
	}
	fmt.Fprintf(stdout, "\nresults: %s (RESULTS.md's %q section: go run ./loadtests report)\n", path, section)
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
		name := r.Name
		if r.Round > 0 {
			name = fmt.Sprintf("%s (run %d)", r.Name, r.Round)
		}
		fmt.Fprintf(tw, "%s\t%s\t%.1f\t%s\n", name, report.LostCell(r), r.DurationS, fig)
	}
	tw.Flush()
}

// experimentNames are every experiment's name, in Known's order (All's,
// then the cluster profile's).
func experimentNames() []string {
	var names []string
	for _, x := range experiments.Known() {
		names = append(names, x.Name)
	}
	return names
}

// compareBindirs is the -compare-bindirs flag's value as
// experiments.Env's CompareBindirs and CompareNone: "none" for none,
// empty for experiments.DefaultCompareBindirs.
func compareBindirs(flagValue string) ([]string, string) {
	switch flagValue {
	case "":
		root, _ := launch.Root()
		return experiments.DefaultCompareBindirs(root)
	case "none":
		return nil, "-compare-bindirs none"
	}
	return strings.Split(flagValue, ","), ""
}
