package report

import (
	"strings"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/eventstore"
)

// TestEventStoreHarnessRendering: the append table says how many
// operations were late and in flight (and that older files did not count
// them), each scenario says what its stores held, a point read whose
// stream differed between engines prints "failed: <reason>" and no
// figure, and KurrentDB's rows say "not run here".
func TestEventStoreHarnessRendering(t *testing.T) {
	n0, n1 := int64(0), int64(1183068)
	stores := []eventstore.StoreState{
		{Engine: "no-kurrentdb", Mode: eventstore.StoreKept, Store: "table eventstore.events", Records: &n1},
		{Engine: "kurrentdb", Mode: eventstore.StoreKept, Error: "not measured here: connection refused"},
		{Engine: "kafka-eventstore", Mode: eventstore.StoreFresh, Store: "topic eventstore-bench-x, partition 0", Records: &n0},
	}
	a := &eventstore.AppendResult{Options: eventstore.Options{Workers: 2, Rounds: 1}, Stores: stores,
		Engines: []*eventstore.Engine{{Name: "no-kurrentdb", Up: true}, {Name: "kurrentdb"}, {Name: "kafka-eventstore", Up: true}},
		Rows: []eventstore.AppendRow{
			{Engine: "no-kurrentdb", Mode: "blind", Series: "growing", Round: 1, Ops: 900, Late: 2, Counted: true, Measured: true},
			{Engine: "kurrentdb", Mode: "blind", Series: "growing", Round: 1},
			{Engine: "kafka-eventstore", Mode: "read-then-append", Series: "growing", Round: 1, Ops: 3, Late: 14, InFlight: 2, Counted: true, Measured: true},
			{Engine: "kafka-eventstore", Mode: "blind", Series: "reset", Round: 1, Ops: 7, Measured: true},
		}}
	p := &eventstore.PointReadResult{Stores: stores, Rows: []eventstore.PointReadRow{
		{Engine: "no-kurrentdb", Failed: "failed: the stream read differs between engines: kafka-eventstore holds 0 events"},
		{Engine: "kurrentdb"},
		{Engine: "kafka-eventstore", Failed: "failed: the stream read differs between engines: kafka-eventstore holds 0 events"},
	}}
	md := eventStoreSection(eventstore.Results{Append: a, PointRead: p})
	wantContains(t, "section", md,
		"| engine | mode | series | round | ops | late | in flight |",
		"| kafka-eventstore | read-then-append | growing | 1 | 3 | 14 | 2 |",
		"| kafka-eventstore | blind | reset | 1 | 7 | not counted (older file: dropped) | not counted |",
		"| kurrentdb | blind | growing | 1 | not run here |",
		"kafka-eventstore: topic eventstore-bench-x, partition 0, created empty for this run, holding 0 records",
		"no-kurrentdb: table eventstore.events, as the bench found it (not reset), holding 1,183,068 records",
		"kurrentdb: not run here",
		"| kafka-eventstore | failed: the stream read differs between engines: kafka-eventstore holds 0 events |",
		"| kurrentdb | not run here |")
	_, table, _ := strings.Cut(md, "| engine | matched records")
	if strings.Contains(table, "| 0 |") || strings.Contains(table, "×") || strings.Contains(table, "Stores at the start") {
		t.Errorf("the failed point read draws a figure, or splits its table:\n%s", table)
	}
}
