package stackcheck

import (
	"bufio"
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// stackEnv runs `scripts/stack.sh env` (what `make env` and `make up`
// print) and returns its exports in order.
func stackEnv(t *testing.T, args ...string) (names []string, values map[string]string) {
	t.Helper()
	out, err := exec.Command("bash", append([]string{stackScript, "env"}, args...)...).Output()
	if err != nil {
		t.Fatalf("bash %s env: %v", stackScript, err)
	}
	values = map[string]string{}
	exportRE := regexp.MustCompile(`^export ([A-Z][A-Z0-9_]*)='([^']*)'$`)
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		m := exportRE.FindStringSubmatch(line)
		if m == nil {
			t.Errorf("%s env: %q is neither a comment nor export NAME='value'", stackScript, line)
			continue
		}
		names = append(names, m[1])
		values[m[1]] = m[2]
	}
	return names, values
}

// notExported are the pair table's variables `make env` leaves unset, and
// why.
var notExported = map[string]string{
	"KURRENTDB_URL": "KurrentDB runs under docker compose only, and the kurrentdb tests run exactly when it is set",
}

// derivedURLs are connection variables services read whose default is
// another one's value, so the environment need not set them.
var derivedURLs = map[string]string{
	"DATABASE_LISTEN_URL": "defaults to DATABASE_URL",
	"REPLICATION_URL":     "defaults to DATABASE_URL",
}

// TestEnvMatchesServices checks that `make env` (scripts/stack.sh env,
// also printed by `make up`) exports exactly the stack's variables of the
// pair table (services/kit/pairs.Backends), under those names and with
// their default values; that each of them is read somewhere in the Go
// code (a service's config, the tests or the load driver); and that every
// connection variable a service's config reads (_URL, _BROKERS) is
// exported or derived from one that is.
func TestEnvMatchesServices(t *testing.T) {
	t.Parallel()
	names, values := stackEnv(t)
	want := map[string]string{}
	for _, b := range pairs.Backends {
		if _, skip := notExported[b.Env]; !skip {
			want[b.Env] = b.DefaultURL
		}
	}
	for _, n := range names {
		if _, ok := want[n]; !ok {
			t.Errorf("make env exports %s, which is not a backend variable of services/kit/pairs (services and tests read those)", n)
		}
	}
	for n, def := range want {
		got, ok := values[n]
		switch {
		case !ok:
			t.Errorf("make env does not export %s (services/kit/pairs.Backends)", n)
		case got != def:
			t.Errorf("make env exports %s=%q; the services' default is %q", n, got, def)
		}
	}

	// Every name read somewhere, and every connection variable read by a
	// service's config exported.
	literal := map[string]bool{}       // "NAME" in any Go file but pairs' table
	configReads := map[string]string{} // connection variables read by r.URL/r.String in services' code
	readRE := regexp.MustCompile(`r\.(?:URL|String)\("([A-Z][A-Z0-9_]*_(?:URL|BROKERS))"`)
	quoted := regexp.MustCompile(`"([A-Z][A-Z0-9_]*_(?:URL|BROKERS))"`)
	for _, root := range []string{servicesDir, "../../loadtests", "../../migrations"} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "pairs/backends.go") {
				return err
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range quoted.FindAllSubmatch(src, -1) {
				literal[string(m[1])] = true
			}
			if !strings.HasSuffix(path, "_test.go") && strings.HasPrefix(path, servicesDir) {
				for _, m := range readRE.FindAllSubmatch(src, -1) {
					configReads[string(m[1])] = path
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range names {
		if !literal[n] {
			t.Errorf("make env exports %s, but no Go code of services/, loadtests/ or migrations/ reads it", n)
		}
	}
	if len(configReads) == 0 {
		t.Fatal("found no r.URL/r.String reads of a connection variable in services/: the pattern is stale")
	}
	for n, path := range configReads {
		if _, ok := values[n]; ok {
			continue
		}
		if _, ok := derivedURLs[n]; ok {
			continue
		}
		if _, ok := notExported[n]; ok {
			continue
		}
		t.Errorf("%s reads %s, which make env does not export (nor is it derived from one it does)", path, n)
	}
}

// TestEnvKeepKeepsSetValues checks `stack.sh env keep`, which make
// run-<service> evaluates: a value already set wins, an unset one gets the
// stack's.
func TestEnvKeepKeepsSetValues(t *testing.T) {
	t.Parallel()
	script := `eval "$(bash ` + stackScript + ` env keep)"; printf '%s\n%s\n' "$DATABASE_URL" "$PGBOUNCER_URL"`
	cmd := exec.Command("bash", "-c", script)
	cmd.Env = append(os.Environ(), "DATABASE_URL=postgres://mine/db", "PGBOUNCER_URL=")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v", script, err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 || lines[0] != "postgres://mine/db" || lines[1] != pairs.DefaultPgBouncerURL {
		t.Errorf("after eval of env keep: DATABASE_URL, PGBOUNCER_URL = %q; want the set value, then the stack's %q", lines, pairs.DefaultPgBouncerURL)
	}
}

// TestMakeRunTargets checks that `make run-<service>` exists for every
// service and runs it (GNU Make never applies a pattern rule to a .PHONY
// target, which once made every run-* a silent no-op), with the stack's
// environment and the variables given to make: GO is replaced by a
// script that prints what it was given instead of running the service.
func TestMakeRunTargets(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make on PATH")
	}
	fake := filepath.Join(t.TempDir(), "go")
	script := "#!/bin/sh\necho \"args=$* STATS_RESET=$STATS_RESET DATABASE_URL=$DATABASE_URL RABBITMQ_URL=$RABBITMQ_URL\"\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(servicesDir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if !e.IsDir() || e.Name() == "kit" {
			continue
		}
		n++
		cmd := exec.Command("make", "-s", "-C", "../..", "run-"+e.Name(), "GO="+fake, "STATS_RESET=true")
		cmd.Env = append(os.Environ(), "DATABASE_URL=postgres://mine/db")
		out, err := cmd.CombinedOutput()
		want := "args=run ./services/" + e.Name() + " STATS_RESET=true DATABASE_URL=postgres://mine/db RABBITMQ_URL=" + pairs.DefaultRabbitMQURL
		if err != nil || !strings.Contains(string(out), want) {
			t.Errorf("make run-%s: %v; want the service run with the stack's environment and make's variables (%q), got:\n%s", e.Name(), err, want, out)
		}
	}
	if n == 0 {
		t.Fatal("no service directories found")
	}
}
