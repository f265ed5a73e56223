package cli

import (
	"context"
	"errors"
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

// eventStoreServers sets an event-store command's Postgres and Kafka
// brokers: DATABASE_URL's, else the stack's Postgres, and KAFKA_BROKERS',
// else the brokers already set.
func eventStoreServers(databaseURL, kafkaBrokers *string) {
	*databaseURL = envOr("DATABASE_URL", versions.DefaultPostgresURL)
	*kafkaBrokers = envOr("KAFKA_BROKERS", *kafkaBrokers)
}

// eventStoreExtraMain runs `eventstore-long` or `eventstore-cleanup`
// [flags], then prints the event-store section rendered from every JSON
// result present; it returns the exit status.
func eventStoreExtraMain(cmd string, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet(cmd, stderr)
	lo, co := eventstore.DefaultLongOptions(), eventstore.DefaultCleanupOptions()
	o := &lo.Options
	if cmd == eventstore.CleanupCommand {
		o = &co.Options
	}
	eventStoreServers(&o.DatabaseURL, &o.KafkaBrokers)
	if cmd == eventstore.CleanupCommand {
		co.Register(fs)
	} else {
		lo.Register(fs)
	}
	if len(args) > 0 && isHelp(args[0]) {
		printFlags(stdout, fs, fmt.Sprintf("usage: go run ./loadtests %s [flags]\n\nflags:\n", cmd))
		return 0
	}
	if rc, ok := parseFlags(fs, args); !ok {
		return rc
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
		return fail(stderr, 2, err)
	}
	es, lerr := eventstore.LoadRuns(o.Out)
	fmt.Fprintf(stdout, "wrote %s\n\n%s", path, report.EventStoreSection(es))
	if err = errors.Join(err, lerr); err != nil {
		return fail(stderr, 1, err)
	}
	return 0
}
