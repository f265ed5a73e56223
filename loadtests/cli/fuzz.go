package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/launch"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// fuzzSkipped are the built services make fuzz leaves out by default, and
// why.
var fuzzSkipped = map[string]string{
	"kurrentdb": "KurrentDB does not run on the native stack",
}

// fuzzMain runs the fuzz command: for each service, start it on its port
// (plus -port-offset), run Schemathesis against its /openapi.yaml with
// every check and phase for -seconds, stop it. It returns 1 when any run
// failed.
func fuzzMain(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("fuzz", stderr)
	st := fs.String("st", "st", "the Schemathesis CLI (make fuzz installs a pinned one into .stack/)")
	seconds := fs.Int("seconds", 60, "Schemathesis' time budget per service (its --max-time)")
	offset := fs.Int("port-offset", 0, "added to every service's default port (to run beside services of your own)")
	logDir := fs.String("logs", filepath.Join(os.TempDir(), "wpe-fuzz-logs"), "folder for the services' logs and Schemathesis' reports")
	only := fs.String("services", "", "comma-separated services to fuzz (default: every built service that runs here)")
	workers := fs.Int("workers", 1, "Schemathesis workers per service")
	if rc, ok := parseFlags(fs, args); !ok {
		return rc
	}
	names := fuzzTargets(*only)
	if strings.ContainsRune(*st, os.PathSeparator) {
		// Schemathesis runs in .stack/fuzz: a relative path would miss.
		if abs, err := filepath.Abs(*st); err == nil {
			*st = abs
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root, err := launch.Root()
	if err != nil {
		fmt.Fprintln(stderr, "fuzz:", err)
		return 1
	}
	l, err := launch.New(root, *logDir)
	if err != nil {
		fmt.Fprintln(stderr, "fuzz:", err)
		return 1
	}
	defer func() { _ = l.StopAll(30 * time.Second) }()
	if err := l.Build(ctx, names...); err != nil {
		fmt.Fprintln(stderr, "fuzz:", err)
		return 1
	}
	var failed []string
	for _, name := range names {
		run := fuzzRun{l: l, root: root, schemathesis: *st, seconds: *seconds, offset: *offset, workers: *workers, logDir: *logDir, out: stdout}
		if err := run.one(ctx, name); err != nil {
			fmt.Fprintf(stderr, "fuzz %s: %v\n", name, err)
			failed = append(failed, name)
		}
		if ctx.Err() != nil {
			break
		}
	}
	if len(failed) > 0 {
		fmt.Fprintf(stderr, "fuzz: Schemathesis failed on %s (reports and service logs in %s)\n", strings.Join(failed, ", "), *logDir)
		return 1
	}
	fmt.Fprintf(stdout, "fuzz: no failures on %s\n", strings.Join(names, ", "))
	return 0
}

// fuzzTargets is the -services list, or every built service but
// fuzzSkipped.
func fuzzTargets(only string) []string {
	var names []string
	if only != "" {
		for n := range strings.SplitSeq(only, ",") {
			if n = strings.TrimSpace(n); n != "" {
				names = append(names, n)
			}
		}
		return names
	}
	for _, s := range pairs.Built() {
		if _, skip := fuzzSkipped[s.Name]; !skip {
			names = append(names, s.Name)
		}
	}
	return names
}

// fuzzRun is what every service's Schemathesis run shares: the
// launcher, the repository's root, the Schemathesis binary, the time
// budget, the port offset, the workers, the folder of reports and logs,
// and where the output goes.
type fuzzRun struct {
	l                        *launch.Launcher
	root, schemathesis       string
	seconds, offset, workers int
	logDir                   string
	out                      io.Writer
}

// one fuzzes the named service: it starts it, runs Schemathesis against
// its contract for the budget and stops it.
func (f fuzzRun) one(ctx context.Context, name string) error {
	l, root, st, seconds, offset, workers, logDir, stdout := f.l, f.root, f.schemathesis, f.seconds, f.offset, f.workers, f.logDir, f.out
	s, ok := pairs.Lookup(name)
	if !ok || s.Planned {
		return fmt.Errorf("no built service %q", name)
	}
	port := s.Port + offset
	fmt.Fprintf(stdout, "== fuzz %s on :%d for %ds\n", name, port, seconds)
	if _, err := l.Start(ctx, name, port, fuzzEnv[s.Pair], 90*time.Second); err != nil {
		return err
	}
	defer func() { _ = l.Stop(name, 30*time.Second) }()
	if s.Pair == "log" {
		// The groups Schemathesis created hold replication slots (WAL
		// for the whole server) on the Postgres side: delete them.
		defer func() {
			if err := deleteGroups(fmt.Sprintf("http://localhost:%d", port)); err != nil {
				fmt.Fprintf(stdout, "fuzz %s: deleting the groups it created: %v\n", name, err)
			}
		}()
	}
	report := filepath.Join(logDir, name+"-schemathesis")
	cmd := exec.CommandContext(ctx, st, schemathesisArgs(root, port, seconds, workers, report)...)
	cmd.Stdout, cmd.Stderr = stdout, stdout
	// Schemathesis keeps a cache of the failures it found (replayed
	// first by the next run) in its working directory: .stack/fuzz,
	// ignored by git like the rest of .stack.
	cmd.Dir = filepath.Join(root, ".stack", "fuzz")
	if err := os.MkdirAll(cmd.Dir, 0o755); err != nil {
		return err
	}
	// The budget bounds generation; a last request or shrinking may run
	// over, but never far.
	cmd.WaitDelay = 10 * time.Second
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return fmt.Errorf("schemathesis exited with %d", exit.ExitCode())
	}
	return err
}

// schemathesisArgs are the arguments of one Schemathesis run against the
// service on port: the checks scripts/schemathesis.toml enables (every
// check but max_response_time; named there, not with --checks, which
// would override its per-operation exceptions), every phase (examples,
// coverage, fuzzing, stateful; Schemathesis' defaults, spelled out so that
// a newer default cannot narrow the run unnoticed), seconds of budget,
// workers (one by default: two cores are shared with the services and
// their servers) and a JUnit report into report.
func schemathesisArgs(root string, port, seconds, workers int, report string) []string {
	return []string{"--config-file", filepath.Join(root, "scripts", "schemathesis.toml"),
		"run", fmt.Sprintf("http://127.0.0.1:%d/openapi.yaml", port),
		"--phases", "examples,coverage,fuzzing,stateful",
		"--max-time", strconv.Itoa(seconds),
		"--workers", strconv.Itoa(workers),
		"--request-timeout", "20",
		"--report", "junit", "--report-dir", report,
		"--no-color"}
}

// fuzzEnv is the environment of the services fuzzed, by pair: the log
// services allow one group beside the default, so that the groups
// Schemathesis creates (each a replication slot decoding all of the
// server's WAL on the Postgres side) stay few while they run.
var fuzzEnv = map[string]map[string]string{"log": {"MAX_GROUPS": "2"}}

// deleteGroups deletes every consumer group of the log service at base
// but the default one (which cannot be deleted: 409).
func deleteGroups(base string) error {
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(base + "/groups")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var list struct {
		Groups []struct {
			Name string `json:"name"`
		} `json:"groups"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&list); err != nil {
		return fmt.Errorf("GET /groups: %w", err)
	}
	var errs []error
	for _, g := range list.Groups {
		req, _ := http.NewRequest(http.MethodDelete, base+"/groups/"+url.PathEscape(g.Name), nil)
		r, err := client.Do(req)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		r.Body.Close()
		if r.StatusCode != http.StatusNoContent && r.StatusCode != http.StatusConflict {
			errs = append(errs, fmt.Errorf("DELETE /groups/%s: %s", g.Name, r.Status))
		}
	}
	return errors.Join(errs...)
}
