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
)

// logWriter sends an experiment's progress lines to the test log.
type logWriter struct{ t testing.TB }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestAllNamesAreUniqueIDs: every experiment has a Run and a unique
// lowercase-words name, which Select finds and the -only flag accepts.
func TestAllNamesAreUniqueIDs(t *testing.T) {
	t.Parallel()
	id := regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)
	seen := map[string]bool{}
	for _, x := range All() {
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
			return Result{Title: "t", Figure: "f", AckedLost: 0}, nil
		}},
		{Name: "broken", Run: func(context.Context, Env, Size) (Result, error) {
			return Result{Title: "b"}, errors.New("server gone")
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
	if !strings.Contains(out.String(), "experiment broken: could not measure: server gone") {
		t.Errorf("progress:\n%s", out.String())
	}
	dir := t.TempDir()
	if f, path, err := Load(dir); f != nil || path != "" || err != nil {
		t.Errorf("Load(empty) = %v %q %v", f, path, err)
	}
	path, err := Write(dir, f)
	if err != nil || !strings.HasSuffix(path, f.Started.Format("20060102T150405Z")+FileSuffix) {
		t.Fatalf("Write = %q, %v", path, err)
	}
	got, gotPath, err := Load(dir)
	if err != nil || gotPath != path || len(got.Results) != 2 {
		t.Fatalf("Load = %+v %q %v", got, gotPath, err)
	}
	if r, ok := got.Find("broken"); !ok || r.Error != "server gone" {
		t.Errorf("Find(broken) = %+v %v", r, ok)
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
// experiment.
func TestDocsExplainEveryExperiment(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "experiments.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, x := range All() {
		for _, want := range []string{`<a id="` + x.Name + `"></a>`, "| [`" + x.Name + "`](#" + x.Name + ") |"} {
			if !strings.Contains(doc, want) {
				t.Errorf("docs/experiments.md lacks %q", want)
			}
		}
	}
}
