package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/eventstore"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/experiments"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/scenario"
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
