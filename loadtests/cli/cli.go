package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/advise"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/eventstore"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/scenario"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// command is one command of the load driver.
type command struct {
	// name is what follows `go run ./loadtests`; help its line in the
	// usage.
	name, help string
	// main runs it with the arguments after its name and returns the
	// exit status: 0, 1 when it failed, 2 for a bad command line.
	main func(args []string, stdout, stderr io.Writer) int
}

// load is the load command name of loadTable: its flags, options,
// environment and plan are loadTable's, run by loadMain.
func load(name, help string) command {
	return command{name: name, help: help, main: func(args []string, _, stderr io.Writer) int {
		return loadMain(name, args, stderr)
	}}
}

// commands is the load driver's one command table, in the usage's order:
// each pair's load command (loadPairs), the other load commands, then
// the commands of their own. Run dispatches on it, usage lists it, and a
// test holds loadTable and doc.go to it.
func commands() []command {
	var out []command
	for _, p := range loadPairs {
		if p.help != "" {
			out = append(out, load(p.name(), p.help))
		}
	}
	return append(out,
		load(eventstore.CeilingCommand, "search the event store's append ceiling (no-kurrentdb vs kafka-eventstore, kurrentdb with KURRENTDB_URL): appends/s, CPU per 1,000 appends"),
		load(throughputCommand, "closed-loop batch senders on the queue and log pairs: accepted and end-to-end items/s, latency, CPU per 1,000 items; then the open-loop sustainable search"),
		command{name: sustainableCommand, help: "the open-loop sustainable search alone (throughput -closed-loop=false): the highest batched rate each side keeps flat under the SLO, and the queue sides at twice it",
			main: func(args []string, _, stderr io.Writer) int {
				return loadMain(throughputCommand, sustainableArgs(args), stderr)
			}},
		load(scenario.DurabilityCommand, "durability at equal guarantees on the cluster profile: synchronous_commit local/on/remote_apply, classic vs quorum queues, acks=1 vs all; acknowledgement and end-to-end latency at a fixed rate, CPU per 1,000 items per node, sustainable rate"),
		load(resultsCommand, "run queue, log, documents, cache, the throughput and scale-out scenarios, the event-store bench and append ceiling, the durability scenario (when the cluster profile runs) and the failure-mode experiments at the make-results size, then write RESULTS.md and README.md's findings"),
		load(longLivedCommand, "drive the queue and log pairs (fixed rates, one round) on -history rows of history per table: results' long-lived variant alone"),
		load(demoCommand, "drive every pair briefly (queue, log, documents, cache, and the event store through its bench) and print one side-by-side table per pair"),
		load(reportCommand, "regenerate RESULTS.md, the charts and README.md's findings from results/*.json"),
		command{name: "check", help: "ask every service for /healthz and /stats and print which are up", main: checkMain},
		command{name: pairs.EventStore, help: "bench the event store trio: append, point-read, catch-up, causal (see loadtests/eventstore)", main: eventStoreMain},
		command{name: eventstore.LongCommand, help: "one long stream per engine: paged, service and snapshot folds", main: eventStoreExtra(eventstore.LongCommand)},
		command{name: eventstore.CleanupCommand, help: "delete one stream: Postgres batches, Kafka retention and compaction", main: eventStoreExtra(eventstore.CleanupCommand)},
		command{name: scaleoutCommand, help: "competing consumers: 1, 2 and 4 instances of each queue service on one schema / one queue, fixed rates, a batch, kill -9 of one of two; fan-out to 1, 2, 4 and 8 subscribers, each with its sustainable published rate; 1, 2, 4 and 8 consumer groups of each log service",
			main: func(args []string, _, stderr io.Writer) int { return scaleoutMain(args, stderr) }},
		command{name: "raw", help: "measure the engines' own limits without a service (see loadtests/raw)", main: rawMain},
		command{name: experimentsCommand, help: "run the failure-mode experiments (see loadtests/experiments, docs/experiments.md)", main: experimentsMain},
		command{name: "fuzz", help: "start each service and run Schemathesis against its contract (make fuzz)", main: fuzzMain},
		command{name: "advise", help: "answer the reference's decision questions for your workload from the committed results", main: advise.Main},
	)
}

// helpOf is the usage line of the command name ("" when there is none).
func helpOf(name string) string {
	for _, c := range commands() {
		if c.name == name {
			return c.help
		}
	}
	return ""
}

// Run runs the command line args (without the program name) and returns
// the exit status. -h (or --help) works at every level: alone, it lists
// the commands; after a command, it prints that command's flags; both
// exit 0 without touching any server.
func Run(args []string, stdout, stderr io.Writer) int {
	if len(args) < 1 {
		usage(stderr)
		return 2
	}
	if isHelp(args[0]) {
		usage(stdout)
		return 0
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.main(args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

// isHelp reports whether arg asks for help.
func isHelp(arg string) bool {
	return arg == "-h" || arg == "-help" || arg == "--help" || arg == "help"
}

// newFlagSet is the flag set of the command name: it returns its errors
// to the caller and writes them, and -h's flags, to stderr.
func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// commandFlagSet is newFlagSet whose -h writes the command table's
// usage line of cmd (helpOf) before the flags.
func commandFlagSet(cmd string, stderr io.Writer) *flag.FlagSet {
	fs := newFlagSet(cmd, stderr)
	fs.Usage = func() {
		printFlags(stderr, fs, fmt.Sprintf("usage: go run ./loadtests %s [flags]\n%s\n\nflags:\n", cmd, helpOf(cmd)))
	}
	return fs
}

// printFlags writes header, then fs's flags, to w (fs writes there from
// then on).
func printFlags(w io.Writer, fs *flag.FlagSet, header string) {
	fs.SetOutput(w)
	fmt.Fprint(w, header)
	fs.PrintDefaults()
}

// parseFlags parses args with fs. When the command cannot go on it
// returns false and the exit status: 0 after -h (the flags printed), 2
// for a bad command line (the flag package said why).
func parseFlags(fs *flag.FlagSet, args []string) (int, bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, false
		}
		return 2, false
	}
	return 0, true
}

// fail writes err to stderr as a command's error and returns the exit
// status code.
func fail(stderr io.Writer, code int, err error) int {
	fmt.Fprintln(stderr, "error:", err)
	return code
}

// usage lists every command of the table.
func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: go run ./loadtests <command> [flags]   (go run ./loadtests <command> -h lists a command's flags)")
	fmt.Fprintln(w)
	for _, c := range commands() {
		fmt.Fprintf(w, "%-18s %s\n", c.name, c.help)
	}
}
