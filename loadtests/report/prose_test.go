package report

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/experiments"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/scenario"
)

// committedRuns reads every committed results file that is a driver.Run
// (the raw loops', the experiments' and the event store's legacy files
// have shapes of their own).
func committedRuns(t *testing.T) []*driver.Run {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "..", "results", "2*.json"))
	if err != nil {
		t.Fatal(err)
	}
	var out []*driver.Run
	for _, f := range files {
		if strings.HasSuffix(f, "-raw.json") || strings.HasSuffix(f, experiments.FileSuffix) {
			continue
		}
		r, err := driver.ReadRun(f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if len(out) == 0 {
		t.Fatal("no committed results files")
	}
	return out
}

// upgraded is run as the code writes it now (driver.SchemaVersion): its
// notes without the explanations scenario.Explain generates, its
// ceilings without the criteria in words, the event store's settings
// without their sentences. It fails t when an explanation generated is
// not the note the file holds, word for word and in order, when a note
// left explains rather than reports an incident, or when a ceiling's
// criteria are not its Spec's words.
func upgraded(t *testing.T, run *driver.Run) *driver.Run {
	t.Helper()
	c := *run
	c.Schema = driver.SchemaVersion
	gen := scenario.Explain(run)
	c.Notes = []string{}
	for _, n := range run.Notes {
		if len(gen) > 0 && n == gen[0] {
			gen = gen[1:]
			continue
		}
		c.Notes = append(c.Notes, n)
	}
	if len(gen) > 0 {
		t.Errorf("%s: explanations generated that its notes do not hold: %q (notes %q)", run.ID, gen, run.Notes)
	}
	c.Ceilings = slices.Clone(run.Ceilings)
	for i := range c.Ceilings {
		ce := &c.Ceilings[i]
		if ce.Spec == nil {
			continue
		}
		if got := scenario.CriteriaText(*ce.Spec); got != ce.Criteria {
			t.Errorf("%s %s: criteria from the spec\n%s\nrecorded\n%s", run.ID, ce.Service, got, ce.Criteria)
		}
		ce.Criteria = ""
	}
	c.Settings = maps.Clone(run.Settings)
	for _, k := range []string{"source", "description", "fill_method"} {
		delete(c.Settings, k)
	}
	if p, err := driver.Prose(&c); err != nil || len(p) > 0 {
		t.Errorf("%s: upgraded, it still holds sentences (%v):\n%s", run.ID, err, strings.Join(p, "\n"))
	}
	return &c
}

// TestCommittedNotesAreGenerated: every explanation the results files
// the report reads hold in their notes is what scenario.Explain
// generates from their settings and points, word for word, and every
// criteria text what scenario.CriteriaText words from their spec; what
// is left is incidents (upgraded). Older files are history, in the words
// of the code of their day: they are only read.
func TestCommittedNotesAreGenerated(t *testing.T) {
	runs, _, _ := reportRuns(t)
	for _, r := range runs {
		if r.Schema < 2 {
			upgraded(t, r)
		}
	}
	// Every committed file still reads.
	if n := len(committedRuns(t)); n < len(runs) {
		t.Errorf("%d committed runs, fewer than the report's %d", n, len(runs))
	}
}

// TestCommittedResultsHoldNoProse: a committed results file of the
// current schema holds figures, statuses and settings only.
func TestCommittedResultsHoldNoProse(t *testing.T) {
	n := 0
	for _, r := range committedRuns(t) {
		if r.Schema < 2 {
			continue
		}
		n++
		if p, err := driver.Prose(r); err != nil || len(p) > 0 {
			t.Errorf("%s holds sentences (%v):\n%s", r.ID, err, strings.Join(p, "\n"))
		}
	}
	t.Logf("%d committed files of schema %d", n, driver.SchemaVersion)
}

// TestUpgradedResultsRenderTheSame: the runs the report reads, rewritten
// as the code writes them now (upgraded), render the same README block
// and RESULTS.md as the committed files: the sentences the files no
// longer hold are generated, each once, where they were printed.
func TestUpgradedResultsRenderTheSame(t *testing.T) {
	runs, src, xpath := reportRuns(t)
	var up []*driver.Run
	for _, r := range runs {
		up = append(up, upgraded(t, r))
	}
	if a, b := Findings(runs, src), Findings(up, src); a != b {
		t.Errorf("README block differs:\n%s", lineDiff(a, b))
	}
	now := time.Date(2026, 12, 2, 20, 0, 0, 0, time.UTC)
	render := func(name string, rs []*driver.Run) string {
		dir := filepath.Join(t.TempDir(), name)
		out := filepath.Join(dir, "RESULTS.md")
		if err := Write(out, filepath.Join(dir, "charts"), rs, src, now, FailureModesSection(src.Experiments, filepath.Base(xpath))); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if a, b := render("committed", runs), render("upgraded", up); a != b {
		t.Errorf("RESULTS.md differs:\n%s", lineDiff(a, b))
	}
}

// lineDiff lists the lines of a and b that differ, by position.
func lineDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	var out []string
	for i := range max(len(al), len(bl)) {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			out = append(out, "- "+x, "+ "+y)
		}
		if len(out) > 20 {
			break
		}
	}
	return strings.Join(out, "\n")
}
