package cli

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/report"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/scenario"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/localport"
)

func TestCheckTellsUpFromDownAndWrongService(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte(`{"status":"ok"}`)) })
	mux.HandleFunc("/stats", func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte(`{"service":"no-kafka","pair":"log","backend":"postgres"}`))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	_, portStr, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	port, _ := strconv.Atoi(portStr)
	free, err := localport.Free()
	if err != nil {
		t.Fatal(err)
	}

	got := Check(context.Background(), "127.0.0.1", time.Second, []Target{
		{"no-kafka", "log", port}, {"kafka", "log", port}, {"rabbitmq", "queue", free},
	})
	if !got[0].Up || got[0].Backend != "postgres" {
		t.Errorf("no-kafka: %+v", got[0])
	}
	if got[1].Up || !strings.Contains(got[1].Err, `served by "no-kafka"`) {
		t.Errorf("a port served by another service passed: %+v", got[1])
	}
	if got[2].Up || !strings.Contains(got[2].Err, "not running") {
		t.Errorf("a closed port passed: %+v", got[2])
	}
	var b strings.Builder
	Print(&b, got)
	if !strings.Contains(b.String(), "SERVICE") || strings.Count(b.String(), "\n") != 4 {
		t.Errorf("table:\n%s", b.String())
	}
}

// TestSizesFlagRoundTrips checks that the -sizes default written from the
// declared documents scenario parses back to the same sizes.
func TestSizesFlagRoundTrips(t *testing.T) {
	want := scenario.DocumentsScenario.Defaults.Sizes
	s := formatSizes(want)
	got, err := parseSizes(s)
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("formatSizes(%v) = %q, parsed back to %v, %v", want, s, got, err)
	}
	if s != "512KiB,2MiB" {
		t.Errorf("formatSizes = %q, want 512KiB,2MiB", s)
	}
}

// TestHelpAtEveryLevel checks that -h works alone and after every command
// of the table (and the event-store bench's scenarios): exit 0, the usage
// or the flags printed, no server touched (each returns before
// connecting anything).
func TestHelpAtEveryLevel(t *testing.T) {
	t.Parallel()
	var out, errOut strings.Builder
	if code := Run([]string{"-h"}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "usage:") {
		t.Errorf("loadtests -h: exit %d, stdout %q, stderr %q", code, out.String(), errOut.String())
	}
	cmds := [][]string{{"eventstore", "append"}, {"eventstore", "point-read"}, {"eventstore", "catch-up"}}
	for _, c := range commands() {
		cmds = append(cmds, []string{c.name})
	}
	for _, c := range cmds {
		for _, h := range []string{"-h", "--help"} {
			var out, errOut strings.Builder
			code := Run(append(slices.Clone(c), h), &out, &errOut)
			all := out.String() + errOut.String()
			if code != 0 || !strings.Contains(all, "\n  -") {
				t.Errorf("loadtests %s %s: exit %d (want 0) and flags printed; got:\n%s", strings.Join(c, " "), h, code, all)
			}
		}
	}
	// A bad flag is still an error, and so is an unknown command.
	if code := Run([]string{"eventstore", "append", "-no-such-flag"}, &out, &errOut); code != 2 {
		t.Errorf("loadtests eventstore append -no-such-flag: exit %d, want 2", code)
	}
	if code := Run([]string{"queue", "-no-such-flag"}, &out, &errOut); code != 2 {
		t.Errorf("loadtests queue -no-such-flag: exit %d, want 2", code)
	}
	if code := Run([]string{"no-such-command"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), `unknown command "no-such-command"`) {
		t.Errorf("loadtests no-such-command: exit %d, want 2", code)
	}
}

// TestCommandTable: the table names each command once, with a usage
// line, and its load commands are exactly loadTable's (sustainable is
// throughput's, run with -closed-loop=false).
func TestCommandTable(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, c := range commands() {
		if seen[c.name] || c.help == "" || c.main == nil {
			t.Errorf("command %q: listed twice, or without a usage line or a main", c.name)
		}
		seen[c.name] = true
	}
	for name := range loadTable {
		if !seen[name] {
			t.Errorf("loadTable's %s is no command of the table", name)
		}
	}
	var b strings.Builder
	usage(&b)
	for name := range seen {
		if !strings.Contains(b.String(), "\n"+name+" ") {
			t.Errorf("the usage does not list %s", name)
		}
	}
}

// TestParseExports reads what `scripts/cluster.sh env running` prints.
func TestParseExports(t *testing.T) {
	out := "# the cluster profile's Postgres\nexport CLUSTER_DATABASE_URL='postgres://p@10.77.0.11:5432,10.77.0.12:5432/wpe?sslmode=disable'\n" +
		"export CLUSTER_PG_ROLES='primary=pg1 sync=pg2 async=pg3'\nexport CLUSTER_KAFKA_BROKERS='10.77.0.31:9092,10.77.0.32:9092'\nnoise=1\n"
	got := parseExports(out)
	if len(got) != 3 || got["CLUSTER_DATABASE_URL"] != "postgres://p@10.77.0.11:5432,10.77.0.12:5432/wpe?sslmode=disable" ||
		got["CLUSTER_PG_ROLES"] != "primary=pg1 sync=pg2 async=pg3" || got["CLUSTER_KAFKA_BROKERS"] != "10.77.0.31:9092,10.77.0.32:9092" {
		t.Fatalf("parseExports = %v", got)
	}
}

// TestResultsDurabilityNotMeasured: without the cluster profile (here, a
// root without scripts/cluster.sh) the results command's durability step
// writes a results file without figures that says why, and the report
// says it was not measured.
func TestResultsDurabilityNotMeasured(t *testing.T) {
	c := common{resultsDir: t.TempDir()}
	runResultsDurability(context.Background(), invocation{c: c, env: &scenario.Env{}, root: t.TempDir()})
	parts, err := report.LoadDurabilityParts(c.resultsDir)
	if err != nil || len(parts) != 1 {
		t.Fatalf("durability results files: %d, %v", len(parts), err)
	}
	run, path := parts[0].Run, parts[0].File
	if len(run.Points) != 0 || !strings.Contains(run.Aborted, "not measured: the cluster profile's postgres, rabbitmq, kafka not running") {
		t.Fatalf("%s: %d points, aborted %q", path, len(run.Points), run.Aborted)
	}
	if md := report.DurabilitySection(parts); !strings.Contains(md, "Not measured (`results/"+path) {
		t.Errorf("the report does not say it was not measured:\n%s", md)
	}
}
