package report

import (
	"strings"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/eventstore"
)

// TestEventStoreShowsPostgres18BesideTheStacks: with no-kurrentdb-pg18
// among the bench's engines, the event store's section sets its figures
// beside the stack's no-kurrentdb, with the ratio; a scenario whose 18
// side failed says why, never 0; without an 18 side the subsection says
// why it is missing (absent binaries, a server that did not start, a run
// that did not ask), never zeros.
func TestEventStoreShowsPostgres18BesideTheStacks(t *testing.T) {
	t.Parallel()
	pg18 := eventstore.CompareName("18")
	a := &eventstore.AppendResult{Options: eventstore.Options{Workers: 2, Streams: 2, Rounds: 2},
		Engines: []*eventstore.Engine{{Name: "no-kurrentdb", Up: true}, {Name: pg18, Up: true}, {Name: "kafka-eventstore", Up: true}}}
	for _, r := range []eventstore.AppendRow{
		{Engine: "no-kurrentdb", Label: "PostgreSQL 15.18 (the stack's)", Round: 1, OpsPerSec: 800},
		{Engine: "no-kurrentdb", Label: "PostgreSQL 15.18 (the stack's)", Round: 2, OpsPerSec: 1000},
		{Engine: pg18, Label: "PostgreSQL 18.4 (a private server)", Round: 1, OpsPerSec: 1800},
		{Engine: pg18, Label: "PostgreSQL 18.4 (a private server)", Round: 2, OpsPerSec: 1800},
		{Engine: "kafka-eventstore", Round: 1, OpsPerSec: 50},
	} {
		r.Mode, r.Series, r.Ops, r.Measured = "read-then-append", "growing", 10, true
		a.Rows = append(a.Rows, r)
	}
	p := &eventstore.PointReadResult{Rows: []eventstore.PointReadRow{
		{Engine: "no-kurrentdb", Matched: 50, MedianMS: 4, Measured: true},
		{Engine: pg18, Failed: "failed: read answered 500"},
	}}
	es := eventstore.Results{Append: a, PointRead: p}
	md := eventStoreSection(es)
	wantContains(t, "section", md, "### "+esVersionsTitle,
		"| figure | no-kurrentdb: PostgreSQL 15.18 (the stack's) | no-kurrentdb-pg18: PostgreSQL 18.4 (a private server) | no-kurrentdb-pg18 ÷ no-kurrentdb |",
		"| append, read-then-append, growing series: ops/s | 900 | 1800 | 2× |",
		"| point read: read time (ms) | 4 | failed: read answered 500 | no ratio: a figure is missing |")
	if strings.Contains(md, "Other PostgreSQL versions") || strings.Contains(md, "reset series: ops/s") {
		t.Errorf("18 ran in every scenario, yet the section says it is missing (or shows a series that did not run):\n%s", md)
	}

	// No 18 side: why, for each scenario, and no table of zeros.
	solo := &eventstore.AppendResult{Options: eventstore.Options{Rounds: 1, Compare: &eventstore.CompareOutcome{Why: "no PostgreSQL 18 binaries in /x/pg18/native/bin"}},
		Engines: []*eventstore.Engine{{Name: "no-kurrentdb", Up: true}},
		Rows:    []eventstore.AppendRow{{Engine: "no-kurrentdb", Mode: "blind", Series: "reset", Round: 1, Ops: 5, OpsPerSec: 700, Measured: true}}}
	failed := &eventstore.PointReadResult{Options: eventstore.Options{Compare: &eventstore.CompareOutcome{Error: "-compare-bindirs /x: initdb: exit status 1"}},
		Rows: []eventstore.PointReadRow{{Engine: "no-kurrentdb", Matched: 5, MedianMS: 3, Measured: true}}}
	older := &eventstore.CatchUpResult{Rows: []eventstore.CatchUpRow{{Engine: "no-kurrentdb", CatchUpMS: []float64{10}, Measured: true}}}
	md = eventStoreSection(eventstore.Results{Append: solo, PointRead: failed, CatchUp: older})
	wantContains(t, "section without 18", md, "### "+esVersionsTitle,
		"append: not measured: no PostgreSQL 18 binaries in /x/pg18/native/bin",
		"point-read: failed: -compare-bindirs /x: initdb: exit status 1",
		"catch-up: not measured: this run measured the stack's PostgreSQL only")
	if strings.Contains(md, "| figure |") {
		t.Errorf("no 18 side, yet a table:\n%s", md)
	}
}
