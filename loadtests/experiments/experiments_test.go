package experiments

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
)

// logWriter sends an experiment's progress lines to the test log.
type logWriter struct{ t testing.TB }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestAllNamesAreUniqueIDs: every experiment (the cluster profile's too)
// has a Run and a unique lowercase-words name, which Select finds and the
// -only flag accepts.
func TestAllNamesAreUniqueIDs(t *testing.T) {
	t.Parallel()
	id := regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)
	seen := map[string]bool{}
	for _, x := range Known() {
		if !id.MatchString(x.Name) || seen[x.Name] || x.Run == nil {
			t.Errorf("experiment %q: bad name, duplicate or no Run", x.Name)
		}
		seen[x.Name] = true
	}
	for _, n := range []string{NotifySerializes, ListenThroughPgBouncer, CommitOrderGap, ToastRewrite} {
		if !seen[n] {
			t.Errorf("%s is not in All()", n)
		}
	}
	xs, err := Select([]string{ToastRewrite, NotifySerializes})
	if err != nil || len(xs) != 2 || xs[0].Name != NotifySerializes {
		t.Errorf("Select keeps All's order: %v, %v", xs, err)
	}
	if _, err := Select([]string{"no-such"}); err == nil || !strings.Contains(err.Error(), ToastRewrite) {
		t.Errorf("Select(unknown) = %v, want an error listing the known names", err)
	}
	if all, _ := Select(nil); len(all) != len(All()) {
		t.Errorf("Select(nil) = %d experiments, want all %d", len(all), len(All()))
	}
}

// TestRunWriteLoad runs two stand-in experiments, one failing, and reads
// the file back: a failure is recorded, not fatal, and an experiment that
// could not measure counts no writes as lost.
func TestRunWriteLoad(t *testing.T) {
	t.Parallel()
	xs := []Experiment{
		{Name: "fine", Run: func(context.Context, Env, Size) (Result, error) {
			return Result{AckedLost: 0, Metrics: map[driver.Metric]float64{"x": 1}}, nil
		}, Text: Text{Title: "t", Figure: func(f *Figures) string { return "x is " + num(f.Num("x")) }}},
		{Name: "broken", Run: func(context.Context, Env, Size) (Result, error) {
			return Result{Metrics: map[driver.Metric]float64{"x": 1}}, errors.New("server gone")
		}},
	}
	var out strings.Builder
	f, err := Run(context.Background(), Env{Root: t.TempDir(), Out: &out}, Small, xs)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Results) != 2 || f.Size != "small" || f.Results[0].Name != "fine" || f.Results[1].Error != "server gone" || f.Results[1].AckedLost != -1 {
		t.Fatalf("%+v", f)
	}
	if !strings.Contains(out.String(), "experiment fine: x is 1 (") || !strings.Contains(out.String(), "experiment broken: could not measure: server gone") {
		t.Errorf("progress:\n%s", out.String())
	}
	dir := t.TempDir()
	if f, path, err := Load(dir); f != nil || path != "" || err != nil {
		t.Errorf("Load(empty) = %v %q %v", f, path, err)
	}
	path, err := Write(dir, f)
	if err != nil || filepath.Base(path) != f.Started.Format("20060102T150405Z")+"-experiments.json" {
		t.Fatalf("Write = %q, %v", path, err)
	}
	got, gotPath, err := Load(dir)
	if err != nil || gotPath != path || len(got.Results) != 2 {
		t.Fatalf("Load = %+v %q %v", got, gotPath, err)
	}
	if r, ok := got.Find("broken"); !ok || r.Error != "server gone" {
		t.Errorf("Find(broken) = %+v %v", r, ok)
	}
	// The file holds no sentence.
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{`"title"`, `"happens"`, `"figure"`, `"user_must"`, `"notes"`} {
		if strings.Contains(string(b), k) {
			t.Errorf("the results file holds %s:\n%s", k, b)
		}
	}
	if s, err := ParseSize("full"); err != nil || s != Full || s.String() != "full" {
		t.Errorf("ParseSize(full) = %v %v", s, err)
	}
	if _, err := ParseSize("huge"); err == nil {
		t.Error("ParseSize(huge) did not fail")
	}
	if d := Estimate([]Experiment{{Full: time.Second}, {}}); d != time.Second+DefaultEstimate {
		t.Errorf("Estimate = %v", d)
	}
}

// TestDocsExplainEveryExperiment: docs/experiments.md has a section
// (an anchor the report's table links to) and an index row for every
// experiment, the cluster profile's too.
func TestDocsExplainEveryExperiment(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "experiments.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, x := range Known() {
		for _, want := range []string{`<a id="` + x.Name + `"></a>`, "| [`" + x.Name + "`](#" + x.Name + ") |"} {
			if !strings.Contains(doc, want) {
				t.Errorf("docs/experiments.md lacks %q", want)
			}
		}
	}
}

// TestDescribe joins a result with its experiment's Text: the figure
// rendered from the metrics, a missing metric named instead of printed as
// 0, a result that could not measure without a figure, and a schema 1
// result with its own figure and notes.
func TestDescribe(t *testing.T) {
	t.Parallel()
	full := Result{Name: CommitOrderGap, Metrics: map[driver.Metric]float64{
		"runs": 2, "writers": 8, "events_per_writer": 40, "stagger_ms": 4, "catch_up_bound_s": 30, "committed": 640,
		"global_pos_cursor_missed": 64, "global_pos_cursor_runs_with_loss": 2, "watermark_cursor_missed": 0, "watermark_catch_up_max_s": 0.25,
	}}
	p := Describe(full)
	if p.Title != gapText.Title || p.Happens != gapText.Happens || p.UserMust != gapText.UserMust || len(p.Missing) > 0 {
		t.Errorf("Describe(full) = %+v", p)
	}
	if want := "Over 2 runs of 8 writers (640 committed events): paging by global_pos > last missed 64 events (10.00%, in 2 of 2 runs); the (xid, global_pos) watermark cursor missed 0"; p.Figure != want {
		t.Errorf("figure %q, want %q", p.Figure, want)
	}
	if len(p.Notes) != 2 || !strings.Contains(p.Notes[1], "was 0.25 s here (bound 30s)") {
		t.Errorf("notes %q", p.Notes)
	}

	partial := Result{Name: CommitOrderGap, Metrics: map[driver.Metric]float64{"runs": 2}}
	p = Describe(partial)
	if !strings.HasPrefix(p.Figure, "failed: the results file lacks committed, global_pos_cursor_missed, writers") || len(p.Notes) != 0 || p.Title != gapText.Title {
		t.Errorf("Describe(partial) = %+v", p)
	}

	failed := full
	failed.Error = "connection refused"
	if p := Describe(failed); p.Figure != "" || len(p.Notes) != 0 || p.Title != gapText.Title {
		t.Errorf("Describe(failed) = %+v", p)
	}

	old := Result{Name: CommitOrderGap, Title: "old title", Happens: "old", Figure: "12 missed", UserMust: "old", Notes: []string{"a note"}}
	if p := Describe(old); p.Figure != "12 missed" || len(p.Notes) != 1 || p.Title != gapText.Title || p.Happens != gapText.Happens {
		t.Errorf("Describe(schema 1) = %+v", p)
	}
	unknown := Result{Name: "gone-experiment", Title: "Gone", Happens: "h", Figure: "f", UserMust: "u"}
	if p := Describe(unknown); p.Title != "Gone" || p.Happens != "h" || p.Figure != "f" {
		t.Errorf("Describe(unknown schema 1) = %+v", p)
	}
}

// TestLoadRefusesUnknownSchema: a file of a schema this driver does not
// read is refused with a message naming both, never rendered wrong.
func TestLoadRefusesUnknownSchema(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "20260101T000000Z-experiments.json"), []byte(`{"schema_version": 9, "results": []}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if f, _, err := Load(dir); f != nil || err == nil || !strings.Contains(err.Error(), "schema 9, this driver reads 1 to 2") {
		t.Errorf("Load(schema 9) = %v, %v", f, err)
	}
}
