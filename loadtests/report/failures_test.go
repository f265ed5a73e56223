package report

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/experiments"
)

// experimentsFixture is a synthetic experiments run: a clean result, a
// documented loss, an undocumented one, one that writes nothing it
// acknowledges, and one that could not measure.
func experimentsFixture() experiments.File {
	return experiments.File{
		SchemaVersion: experiments.SchemaVersion, Started: time.Date(2026, 1, 2, 3, 40, 0, 0, time.UTC), Size: "full",
		Results: []experiments.Result{
			{Name: "commit-order-gap", Title: "The commit-order gap of a sequence cursor", Happens: "A reader paging by global_pos > last skips events.",
				Figure: "global_pos cursor missed 12 of 16000; watermark cursor missed 0", UserMust: "Read below the xid watermark.",
				Metrics: map[string]float64{"watermark_cursor_missed": 0}, Notes: []string{"20 runs of 8 writers | staggered"}, DurationS: 12.3},
			{Name: "synchronous-commit-off-crash", Title: "synchronous_commit = off loses acknowledged writes on a crash", Happens: "The last commits answered 201 are gone after a crash.",
				Figure: "8 of 3000 answered 201 missing", UserMust: "Use it only where a lost 201 is acceptable.", AckedLost: 8, LossDocumented: true, DurationS: 30},
			{Name: "bad-one", Title: "A loss", Happens: "h", Figure: "f", UserMust: "u", AckedLost: 3, DurationS: 1},
			{Name: "toast-rewrite", Title: "TOAST rewrite amplification", Happens: "h", Figure: "f", UserMust: "u", AckedLost: -1, DurationS: 4},
			{Name: "broker-restart", Title: "Broker restart under load", AckedLost: -1, Error: "rabbitmq: connection refused", DurationS: 0.5},
		},
	}
}

// TestFailureModesSection renders the fixture (written to
// testdata/experiments by -update, read back from there) and compares it
// with the golden testdata/failure-modes.md (rewritten by -update); with
// no file the section is a note, not a failure.
func TestFailureModesSection(t *testing.T) {
	dir := filepath.Join("testdata", "experiments")
	golden := filepath.Join("testdata", "failure-modes.md")
	if *update {
		old, _ := filepath.Glob(filepath.Join(dir, "*"+experiments.FileSuffix))
		for _, f := range old {
			_ = os.Remove(f)
		}
		if _, err := experiments.Write(dir, experimentsFixture()); err != nil {
			t.Fatal(err)
		}
	}
	f, path, err := experiments.Load(dir)
	if err != nil || f == nil {
		t.Fatalf("fixture: %v, %v (run go test -update)", f, err)
	}
	got := FailureModesSection(f, filepath.Base(path))
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("section differs from %s (go test -update rewrites it; check the diff):\n%s", golden, got)
	}
	wantContains(t, "section", got,
		"## "+FailureModesTitle,
		"| [**The commit-order gap of a sequence cursor**](docs/experiments.md#commit-order-gap) (`commit-order-gap`, 12.3s) |",
		"**8 (documented loss)**", "**3 (a loss that must not happen)**",
		"– (writes nothing it acknowledges)", "not measured: rabbitmq: connection refused",
		"20 runs of 8 writers \\| staggered",
	)
	none := FailureModesSection(nil, "")
	if !strings.Contains(none, "## "+FailureModesTitle) || !strings.Contains(none, "No experiments results file") || strings.Contains(none, "| experiment |") {
		t.Errorf("without a file:\n%s", none)
	}
	// An empty folder loads as no file, without an error.
	if f, _, err := experiments.Load(t.TempDir()); f != nil || err != nil {
		t.Errorf("Load(empty) = %v, %v", f, err)
	}
}
