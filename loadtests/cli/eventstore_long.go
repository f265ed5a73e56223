package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/eventstore"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/report"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/versions"
)

// eventStoreExtra is the main of the command cmd, eventstore-long or
// eventstore-cleanup (eventStoreExtraMain).
func eventStoreExtra(cmd string) func(args []string, stdout, stderr io.Writer) int {
	return func(args []string, stdout, stderr io.Writer) int {
		return eventStoreExtraMain(cmd, args, stdout, stderr)
	}
}

// eventStoreExtraMain runs `eventstore-long` or `eventstore-cleanup`
// [flags], then prints the event-store section rendered from every JSON
// result present; it returns the exit status.
func eventStoreExtraMain(cmd string, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	lo, co := eventstore.DefaultLongOptions(), eventstore.DefaultCleanupOptions()
	o := &lo.Options
	if cmd == eventstore.CleanupCommand {
		o = &co.Options
	}
	o.DatabaseURL = envOr("DATABASE_URL", versions.DefaultPostgresURL)
	o.KafkaBrokers = envOr("KAFKA_BROKERS", o.KafkaBrokers)
	if cmd == eventstore.CleanupCommand {
		co.Register(fs)
	} else {
		lo.Register(fs)
	}
	if len(args) > 0 && isHelp(args[0]) {
		fs.SetOutput(stdout)
		fmt.Fprintf(stdout, "usage: go run ./loadtests %s [flags]\n\nflags:\n", cmd)
		fs.PrintDefaults()
		return 0
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var path string
	var err error
	if cmd == eventstore.CleanupCommand {
		path, err = eventstore.Cleanup(ctx, co, stderr)
	} else {
		path, err = eventstore.Long(ctx, lo, stderr)
	}
	if path == "" && err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 2
	}
	es, lerr := eventstore.LoadRuns(o.Out)
	fmt.Fprintf(stdout, "wrote %s\n\n%s", path, report.EventStoreSection(es))
	if err = errors.Join(err, lerr); err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	return 0
}
