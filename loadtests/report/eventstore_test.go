package report

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/eventstore"
)

// TestEventStoreSection renders the bench's fixture: the section is
// headed by SectionTitle and has one table per scenario that ran, and
// there is no section when the bench has not run.
func TestEventStoreSection(t *testing.T) {
	es, err := eventstore.Load(filepath.Join("testdata", "eventstore"))
	if err != nil {
		t.Fatal(err)
	}
	md := eventStoreSection(es)
	wantContains(t, "section", md, "## "+eventstore.SectionTitle+"\n", "### append (", "### point-read (", "### catch-up (")
	es.PointRead = nil
	if md := eventStoreSection(es); strings.Contains(md, "### point-read") {
		t.Errorf("a scenario that did not run has a table")
	}
	if md := eventStoreSection(eventstore.Results{}); md != "" {
		t.Errorf("no bench results, yet a section: %q", md)
	}
	// The event store's tables at the start, when the bench recorded them.
	if strings.Contains(md, "Starting state") {
		t.Errorf("the fixture has no starting state, yet the section shows one")
	}
	es.StartState = &driver.StartState{Mode: driver.StateKeep, Tables: []driver.TableState{{Schema: "eventstore", Table: "events", Rows: 192648, TotalBytes: 49 << 20}}}
	md = eventStoreSection(es)
	wantContains(t, "section", md, "Starting state: **kept**", "the event store always keeps its history", "| eventstore.events | 192,648 | 49 MB | 0 |")
}

// TestBlindAndReadThenAppendAreLabelledApart renders results holding both
// append modes: the table names each row's mode, both modes are
// described, and the headline gives the blind figures in a sentence of
// their own, never in the read-then-append one.
func TestBlindAndReadThenAppendAreLabelledApart(t *testing.T) {
	a := &eventstore.AppendResult{Options: eventstore.Options{Workers: 2, Streams: 2, Rounds: 1},
		Engines: []*eventstore.Engine{{Name: "no-kurrentdb", Up: true, Conditional: true}, {Name: "kafka-eventstore", Up: true}}}
	for _, r := range []eventstore.AppendRow{
		{Engine: "no-kurrentdb", Mode: "read-then-append", OpsPerSec: 900},
		{Engine: "kafka-eventstore", Mode: "read-then-append", OpsPerSec: 40},
		{Engine: "no-kurrentdb", Mode: "blind", OpsPerSec: 1500},
		{Engine: "kafka-eventstore", Mode: "blind", OpsPerSec: 7000},
	} {
		r.Series, r.Round, r.Ops, r.Measured = "growing", 1, 10, true
		a.Rows = append(a.Rows, r)
	}
	es := eventstore.Results{Append: a}
	md := eventStoreSection(es)
	wantContains(t, "section", md, "| kafka-eventstore | blind | growing |", "| kafka-eventstore | read-then-append | growing |", eventstore.Blind.Label, eventstore.ReadThenAppend.Label)
	h := eventStoreHeadline(&inputs{es: es})
	rta, blind, ok := strings.Cut(h, "Blind appends")
	if !ok || !strings.Contains(rta, "900") || !strings.Contains(rta, "40") || strings.Contains(rta, "7000") || strings.Contains(rta, "1500") {
		t.Errorf("read-then-append part %q", rta)
	}
	if !strings.Contains(blind, "7000") || !strings.Contains(blind, "1500") || strings.Contains(blind, "900") {
		t.Errorf("blind part %q", blind)
	}
}
