package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/launch"
)

// make fuzz covers every built service that runs here: all but kurrentdb.
func TestFuzzTargets(t *testing.T) {
	t.Parallel()
	got := fuzzTargets("")
	want := []string{"rabbitmq", "no-rabbitmq", "kafka", "no-kafka", "mongodb", "no-mongodb", "redis", "no-redis", "no-kurrentdb", "kafka-eventstore"}
	if !slices.Equal(got, want) {
		t.Errorf("fuzzTargets() = %v, want %v", got, want)
	}
	if got := fuzzTargets(" no-kafka, kafka ,"); !slices.Equal(got, []string{"no-kafka", "kafka"}) {
		t.Errorf("fuzzTargets(list) = %v", got)
	}
}

// make fuzz runs every check of the pinned Schemathesis but
// max_response_time: a check a newer pin adds must be enabled in
// scripts/schemathesis.toml (or left out with its reason), never missed;
// and none is named on the command line, where it would override the
// file's per-operation exceptions. It asks the pinned CLI
// make fuzz installed (skips when it is not installed yet).
func TestFuzzChecksAreEveryCheckButLatency(t *testing.T) {
	t.Parallel()
	root, err := launch.Root()
	if err != nil {
		t.Fatal(err)
	}
	version := schemathesisVersion(t, root)
	st := filepath.Join(root, ".stack", "schemathesis-"+version, "bin", "st")
	if _, err := os.Stat(st); err != nil {
		t.Skipf("Schemathesis %s is not installed (make fuzz installs it): %v", version, err)
	}
	// An unknown check makes the CLI list its choices.
	out, _ := exec.Command(st, "run", "http://127.0.0.1:1/openapi.yaml", "--checks", "no_such_check").CombinedOutput()
	_, list, ok := strings.Cut(string(out), "Choose from ")
	if !ok {
		t.Fatalf("st run --checks no_such_check did not list the choices:\n%s", out)
	}
	list, _, _ = strings.Cut(list, ".\n")
	var choices []string
	for c := range strings.SplitSeq(list, ",") {
		if c = strings.TrimSpace(c); c != "" && c != "all" {
			choices = append(choices, c)
		}
	}
	if len(choices) < 10 {
		t.Fatalf("parsed %d choices from %q", len(choices), list)
	}
	if slices.Contains(choices, "max_response_time") {
		t.Errorf("the CLI now offers max_response_time as a --checks choice: scripts/schemathesis.toml's comment is stale")
	}
	got, want := enabledChecks(t, filepath.Join(root, "scripts", "schemathesis.toml")), slices.Sorted(slices.Values(choices))
	if !slices.Equal(got, want) {
		t.Errorf("scripts/schemathesis.toml enables %v\nthe pinned Schemathesis offers %v", got, want)
	}
	if args := strings.Join(schemathesisArgs(root, 8080, 20, 1, t.TempDir()), " "); strings.Contains(args, "--checks") {
		t.Errorf("schemathesisArgs names checks on the command line, which overrides the file's per-operation exceptions: %s", args)
	}
	args := strings.Join(schemathesisArgs(root, 8080, 20, 1, t.TempDir()), " ")
	for _, w := range []string{"--phases examples,coverage,fuzzing,stateful", "--request-timeout 20", "--max-time 20"} {
		if !strings.Contains(args, w) {
			t.Errorf("schemathesisArgs lacks %q: %s", w, args)
		}
	}
}

// schemathesisVersion is SCHEMATHESIS_VERSION of scripts/fuzz.sh: the pin.
func schemathesisVersion(t testing.TB, root string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "scripts", "fuzz.sh"))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "SCHEMATHESIS_VERSION="); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatal("scripts/fuzz.sh sets no SCHEMATHESIS_VERSION")
	return ""
}

// checkTableRE finds a [checks.<name>] table of a Schemathesis
// configuration and the enabled setting that follows it.
var checkTableRE = regexp.MustCompile(`(?m)^\[checks\.([a-z_]+)\]\s*\nenabled = (true|false)$`)

// enabledChecks are the checks the global [checks.<name>] tables of the
// Schemathesis configuration at path enable, sorted.
func enabledChecks(t testing.TB, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var on []string
	for _, m := range checkTableRE.FindAllStringSubmatch(string(b), -1) {
		if m[2] == "true" {
			on = append(on, m[1])
		}
	}
	slices.Sort(on)
	return on
}
