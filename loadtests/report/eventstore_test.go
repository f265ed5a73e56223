package report

import (
	"path/filepath"
	"strings"
	"testing"

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
	md := EventStoreSection(es)
	for _, want := range []string{"## " + eventstore.SectionTitle + "\n", "### append (", "### point-read (", "### catch-up ("} {
		if !strings.Contains(md, want) {
			t.Errorf("section lacks %q", want)
		}
	}
	es.PointRead = nil
	if md := EventStoreSection(es); strings.Contains(md, "### point-read") {
		t.Errorf("a scenario that did not run has a table")
	}
	if md := EventStoreSection(eventstore.Results{}); md != "" {
		t.Errorf("no bench results, yet a section: %q", md)
	}
}
