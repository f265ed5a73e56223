package eventstorerun

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/eventstore"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/experiments"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/report"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/scenario"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/versions"
)

// TestResultsBenchSaysWhyNoOtherVersionRan: make results' bench
// (benchScenarios) records in every scenario's results why no-kurrentdb
// did not also run on another PostgreSQL version, none there to run
// (PG_COMPARE_BINDIRS=none) or one that did not start (bin directory
// without PostgreSQL), so that the report says so instead of showing
// nothing; the scenarios run either way.
func TestResultsBenchSaysWhyNoOtherVersionRan(t *testing.T) {
	for _, c := range []struct{ env, why, err string }{
		{"none", experiments.CompareBindirsEnv + "=none", ""},
		{"/nonexistent/pg18/bin", "", "/nonexistent/pg18/bin"},
	} {
		t.Setenv(experiments.CompareBindirsEnv, c.env)
		o := eventstore.DefaultOptions()
		// Nothing answers there: every engine is "not measured here".
		o.Targets, o.Out = "no-kurrentdb=http://127.0.0.1:9", t.TempDir()
		o.Duration, o.Rounds, o.Runs, o.Reads = 100*time.Millisecond, 1, 1, 1
		if err := benchScenarios(context.Background(), &scenario.Env{}, o); err != nil {
			t.Fatalf("%s: %v", c.env, err)
		}
		es, err := eventstore.Load(o.Out)
		if err != nil {
			t.Fatal(err)
		}
		opts := map[string]*eventstore.Options{}
		if es.Append != nil {
			opts["append"] = &es.Append.Options
		}
		if es.PointRead != nil {
			opts["point-read"] = &es.PointRead.Options
		}
		if es.CatchUp != nil {
			opts["catch-up"] = &es.CatchUp.Options
		}
		if len(opts) != len(eventstore.Scenarios) {
			t.Errorf("%s: results of %d scenarios, want %d", c.env, len(opts), len(eventstore.Scenarios))
		}
		for sc, o := range opts {
			switch w := o.Compare; {
			case w == nil:
				t.Errorf("%s: %s records nothing about the other version", c.env, sc)
			case w.Why != c.why || !strings.Contains(w.Error, c.err) || (c.err == "") != (w.Error == ""):
				t.Errorf("%s: %s records %+v, want why %q, error with %q", c.env, sc, *w, c.why, c.err)
			}
		}
	}
}

// TestResultsBenchRunsPostgres18 runs make results' bench
// (benchScenarios) at a tiny size with PostgreSQL 18 from make
// deps-cluster: no-kurrentdb-pg18 is measured in every scenario on its
// private server (the stack's no-kurrentdb is not asked here: its target
// answers nothing), labelled with its version, and the event store's
// section sets it beside the stack's side. Skipped under -short and
// without the binaries.
func TestResultsBenchRunsPostgres18(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a private PostgreSQL 18 server and no-kurrentdb")
	}
	if dirs, none := CompareBindirs(); len(dirs) == 0 {
		t.Skip(none)
	}
	o := eventstore.DefaultOptions()
	o.DatabaseURL = versions.DefaultPostgresURL
	if v := os.Getenv("DATABASE_URL"); v != "" {
		o.DatabaseURL = v
	}
	o.Targets, o.Out = "no-kurrentdb=http://127.0.0.1:9", t.TempDir()
	o.Duration, o.Rounds, o.Workers, o.Streams, o.Runs, o.Reads, o.Events = time.Second, 1, 2, 4, 1, 3, 50
	if err := benchScenarios(context.Background(), &scenario.Env{}, o); err != nil {
		t.Fatal(err)
	}
	es, err := eventstore.Load(o.Out)
	if err != nil {
		t.Fatal(err)
	}
	pg18 := eventstore.CompareName("18")
	measured := map[string]bool{}
	for _, r := range es.Append.Rows {
		measured["append"] = measured["append"] || (r.Engine == pg18 && r.Measured && r.Ops > 0)
	}
	for _, r := range es.PointRead.Rows {
		measured["point-read"] = measured["point-read"] || (r.Engine == pg18 && r.Measured)
	}
	for _, r := range es.CatchUp.Rows {
		measured["catch-up"] = measured["catch-up"] || (r.Engine == pg18 && r.Measured)
	}
	for _, sc := range eventstore.Scenarios {
		if !measured[sc] {
			t.Errorf("%s: %s not measured", sc, pg18)
		}
	}
	md := report.EventStoreSection(mustLoadRuns(t, o.Out))
	if !strings.Contains(md, "| figure | no-kurrentdb") || !strings.Contains(md, pg18+": PostgreSQL 18.") {
		t.Errorf("the section does not set 18 beside the stack's side:\n%s", md)
	}
	t.Log(md)
}

// mustLoadRuns is the event store's runs in dir.
func mustLoadRuns(t *testing.T, dir string) []*driver.Run {
	t.Helper()
	rs, err := eventstore.LoadRuns(dir)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}
