package report

import (
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/eventstore"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/experiments"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/raw"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/resultfile"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/scenario"
)

// legacyRuns are the report's inputs (reportRuns) as the last run of the
// code before driver.SchemaVersion and raw.SchemaVersion wrote them: for
// each command the newest committed file of an older schema, which still
// holds its sentences. The upgrade tests prove on them that what the
// code generates now is what those files say.
func legacyRuns(t testing.TB) ([]*driver.Run, Sources, string) {
	t.Helper()
	dir := filepath.Join("..", "..", "results")
	newestFirst := func(cmd string) []string {
		m, err := filepath.Glob(filepath.Join(dir, "2*-"+cmd+".json"))
		if err != nil {
			t.Fatal(err)
		}
		slices.Reverse(m)
		return m
	}
	var runs []*driver.Run
	for _, cmd := range append([]string{"queue", "log", "documents", "cache", "longlived", "throughput", scenario.ScaleOutCommand}, eventstore.Commands()...) {
		for _, f := range newestFirst(cmd) {
			r, err := driver.ReadRun(f)
			if err != nil {
				t.Fatal(err)
			}
			if r.Schema < driver.SchemaVersion {
				runs = append(runs, r)
				break
			}
		}
	}
	var src Sources
	for _, f := range newestFirst("raw") {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var r raw.Results
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if r.Schema < raw.SchemaVersion {
			src.Raw = r
			break
		}
	}
	xf, xpath, err := experiments.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	src.Experiments = xf
	if len(runs) == 0 || len(src.Raw.Loops) == 0 {
		t.Fatalf("no committed results of an older schema in %s: the upgrade tests need the last run of the code before it", dir)
	}
	return runs, src, xpath
}

// committedRuns returns every committed results file that is a
// driver.Run (the raw loops', the experiments' and the event store's
// legacy files have shapes of their own), read once per test binary: the
// files do not change under the tests, and decoding them (tens of MB of
// JSON, under -race) was most of what each test that reads them cost.
// The runs are shared: a caller must not modify them.
func committedRuns(t testing.TB) []*driver.Run {
	t.Helper()
	runs, err := committed()
	if err != nil {
		t.Fatal(err)
	}
	return runs
}

var committed = sync.OnceValues(func() ([]*driver.Run, error) {
	files, err := filepath.Glob(filepath.Join("..", "..", "results", "2*.json"))
	if err != nil {
		return nil, err
	}
	var out []*driver.Run
	for _, f := range files {
		if k, _ := resultfile.KindOf(f); k == resultfile.Raw || slices.Contains(experiments.Kinds(), k) {
			continue
		}
		r, err := driver.ReadRun(f)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	if len(out) == 0 {
		return nil, errors.New("no committed results files")
	}
	return out, nil
})

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
	runs, _, _ := legacyRuns(t)
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

// TestUpgradedResultsRenderTheSame: the runs the report reads, rewritten
// as the code writes them now (upgraded), render the same README block
// and RESULTS.md as the committed files: the sentences the files no
// longer hold are generated, each once, where they were printed.
func TestUpgradedResultsRenderTheSame(t *testing.T) {
	runs, src, xpath := legacyRuns(t)
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
		if err := Write(Files{out, filepath.Join(dir, "charts")}, rs, src, now, FailureModesSection(src.Experiments, filepath.Base(xpath))); err != nil {
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

// upgradedRaw is the raw loops' results r as the code writes them now
// (raw.SchemaVersion): no description, the rows that ran out a status.
// It fails t when a description the code words is not the one r holds.
func upgradedRaw(t *testing.T, r raw.Results) raw.Results {
	t.Helper()
	u := r
	u.Schema = raw.SchemaVersion
	u.Loops = slices.Clone(r.Loops)
	for i := range u.Loops {
		l := &u.Loops[i]
		l.Desc, l.RanOut = "", strings.Contains(l.Desc, "ran out before the loop's end")
		if got := u.LoopDesc(*l); got != r.Loops[i].Desc {
			t.Errorf("%s %s: worded %q, recorded %q", l.Engine, l.Loop, got, r.Loops[i].Desc)
		}
	}
	if r.Notify != nil {
		n := *r.Notify
		n.Desc = ""
		u.Notify = &n
	}
	if r.Retention != nil {
		m := *r.Retention
		m.Removals, m.Claims = slices.Clone(m.Removals), slices.Clone(m.Claims)
		u.Retention = &m
		for i := range m.Removals {
			m.Removals[i].Desc = ""
			if got, want := u.RemovalDesc(m.Removals[i]), r.Retention.Removals[i].Desc; got != want {
				t.Errorf("removal %s: worded %q, recorded %q", m.Removals[i].Method, got, want)
			}
		}
		for i := range m.Claims {
			m.Claims[i].Desc = ""
			if got, want := u.ClaimDesc(m.Claims[i]), r.Retention.Claims[i].Desc; got != want {
				t.Errorf("claims %s: worded %q, recorded %q", m.Claims[i].State, got, want)
			}
		}
	}
	if p, err := driver.Prose(u); err != nil || len(p) > 0 {
		t.Errorf("upgraded, the raw results still hold sentences (%v):\n%s", err, strings.Join(p, "\n"))
	}
	return u
}

// TestUpgradedRawResultsRenderTheSame: the committed raw loops' results,
// rewritten as the code writes them now, word every description as the
// file does and render the same raw-limits and retention sections.
func TestUpgradedRawResultsRenderTheSame(t *testing.T) {
	runs, src, _ := legacyRuns(t)
	if len(src.Raw.Loops) == 0 {
		t.Fatal("no committed raw results")
	}
	up := upgradedRaw(t, src.Raw)
	if a, b := RawSection(src.Raw, runs), RawSection(up, runs); a != b {
		t.Errorf("the raw section differs:\n%s", lineDiff(a, b))
	}
}
