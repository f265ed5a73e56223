package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/advise"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/eventstore"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// Target is one service of the pair table.
type Target struct {
	// Name is the service's directory under services/.
	Name string
	// Pair is the comparison it belongs to.
	Pair string
	// Port is its default HTTP port.
	Port int
}

// Targets are the built services of the pair table (services/kit/pairs)
// and their default ports; planned services are left out.
var Targets = targets()

func targets() []Target {
	var ts []Target
	for _, s := range pairs.Built() {
		ts = append(ts, Target{Name: s.Name, Pair: s.Pair, Port: s.Port})
	}
	return ts
}

// Status is what check learned about one service.
type Status struct {
	Target
	// Up is true when /healthz answered 200 and /stats named the service.
	Up bool
	// Backend is /stats' backend field.
	Backend string
	// Err says why the service is not up.
	Err string
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// isHelp reports whether arg asks for help.
func isHelp(arg string) bool {
	return arg == "-h" || arg == "-help" || arg == "--help" || arg == "help"
}

// run dispatches a command line (without the program name) and returns
// the exit status. -h (or --help) works at every level: alone, it lists
// the commands; after a command, it prints that command's flags; both
// exit 0 without touching any server.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) < 1 {
		usage(stderr)
		return 2
	}
	if _, ok := loadTable[args[0]]; ok {
		return loadMain(args[0], args[1:], stderr)
	}
	switch args[0] {
	case "check":
		fs := flag.NewFlagSet("check", flag.ContinueOnError)
		fs.SetOutput(stderr)
		host := fs.String("host", "localhost", "host the services listen on")
		timeout := fs.Duration("timeout", 2*time.Second, "timeout per request")
		if err := fs.Parse(args[1:]); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return 0
			}
			return 2
		}
		statuses := Check(context.Background(), *host, *timeout, Targets)
		Print(stdout, statuses)
		return 0
	case sustainableCommand:
		return loadMain("throughput", sustainableArgs(args[1:]), stderr)
	case pairs.EventStore:
		return eventStoreMain(args[1:], stdout, stderr)
	case eventstore.LongCommand, eventstore.CleanupCommand:
		return eventStoreExtraMain(args[0], args[1:], stdout, stderr)
	case "raw":
		return rawMain(args[1:], stdout, stderr)
	case "advise":
		return advise.Main(args[1:], stdout, stderr)
	case "fuzz":
		return fuzzMain(args[1:], stdout, stderr)
	case experimentsCommand:
		return experimentsMain(args[1:], stdout, stderr)
	case scaleoutCommand:
		return scaleoutMain(args[1:], stderr)
	}
	if isHelp(args[0]) {
		usage(stdout)
		return 0
	}
	fmt.Fprintf(stderr, "unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: go run ./loadtests <command> [flags]   (go run ./loadtests <command> -h lists a command's flags)")
	fmt.Fprintln(w, "       go run ./loadtests check [-host localhost] [-timeout 2s]")
	fmt.Fprintln(w, "       go run ./loadtests eventstore <append|point-read|catch-up|causal> [flags]")
	fmt.Fprintln(w, "       go run ./loadtests eventstore-long|eventstore-cleanup [flags]")
	fmt.Fprintln(w, "\ncheck       asks every service for /healthz and /stats and prints which are up")
	fmt.Fprintln(w, "eventstore  benches the event store trio (see loadtests/eventstore)")
	fmt.Fprintln(w, "raw         measures the engines' own limits without a service (see loadtests/raw)")
	fmt.Fprintln(w, "fuzz        starts each service and runs Schemathesis against its contract (make fuzz)")
	fmt.Fprintln(w, "experiments runs the failure-mode experiments (see loadtests/experiments, docs/experiments.md)")
	fmt.Fprintln(w, "scaleout    runs 1, 2 and 4 instances of each queue service on one queue (competing consumers, kill -9)")
	fmt.Fprintln(w, "advise      answers the reference's decision questions for your workload from the committed results")
	loadUsage(w)
}

// Check asks each target for /healthz and /stats, concurrently.
func Check(ctx context.Context, host string, timeout time.Duration, targets []Target) []Status {
	client := &http.Client{Timeout: timeout}
	out := make([]Status, len(targets))
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Go(func() { out[i] = checkOne(ctx, client, host, t) })
	}
	wg.Wait()
	return out
}

func checkOne(ctx context.Context, client *http.Client, host string, t Target) Status {
	s := Status{Target: t}
	base := fmt.Sprintf("http://%s:%d", host, t.Port)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/healthz", nil)
	resp, err := client.Do(req)
	if err != nil {
		s.Err = "not running (" + err.Error() + ")"
		return s
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		s.Err = fmt.Sprintf("/healthz answered %d", resp.StatusCode)
		return s
	}
	req, _ = http.NewRequestWithContext(ctx, http.MethodGet, base+"/stats", nil)
	resp, err = client.Do(req)
	if err != nil {
		s.Err = "/stats: " + err.Error()
		return s
	}
	defer resp.Body.Close()
	var st struct{ Service, Pair, Backend string }
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		s.Err = "/stats is not the shared JSON shape: " + err.Error()
		return s
	}
	if st.Service != t.Name {
		s.Err = fmt.Sprintf("port %d is served by %q, not %q", t.Port, st.Service, t.Name)
		return s
	}
	s.Up, s.Backend = true, st.Backend
	return s
}

// Print writes one line per service.
func Print(w io.Writer, statuses []Status) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVICE\tPAIR\tPORT\tSTATUS\tBACKEND")
	for _, s := range statuses {
		state := "up"
		if !s.Up {
			state = s.Err
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", s.Name, s.Pair, s.Port, state, s.Backend)
	}
	tw.Flush()
}
