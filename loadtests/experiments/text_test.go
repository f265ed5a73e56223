package experiments

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
)

// TestTextsRenderAsTheyWere renders every result of the schema 1 files
// in testdata/schema1, written by `make results` when the sentences were
// still written with the figures, from its figures alone, and compares it
// with the sentences the file holds. The figures the old code wrote only
// into its sentences (a server version, a load's settings) are in each
// file's .added.json beside it, read from those sentences.
func TestTextsRenderAsTheyWere(t *testing.T) {
	t.Parallel()
	// proseRewritten names the experiments whose explanation (Happens)
	// was rewritten on purpose since the files were written, and why:
	// their figures and notes still render as they were.
	proseRewritten := map[string]string{
		"kafka-broker-restart": "the franz-go producer rides out an outage shorter than KAFKA_WRITE_TIMEOUT, which kafka-go did not",
	}
	paths, _ := filepath.Glob(filepath.Join("testdata", "schema1", "*-experiments.json"))
	if len(paths) == 0 {
		t.Fatal("no testdata/schema1/*-experiments.json")
	}
	for _, path := range paths {
		rendered := 0
		for _, c := range schema1Cases(t, path) {
			rendered++
			got := Describe(c.r)
			if len(got.Missing) > 0 {
				t.Errorf("%s: %s: lacks %v", path, c.r.Name, got.Missing)
				continue
			}
			want := c.want
			if why, ok := proseRewritten[c.r.Name]; ok {
				t.Logf("%s: its explanation is compared no more: %s", c.r.Name, why)
				want.Happens = got.Happens
			}
			if got.Title != want.Title || got.Happens != want.Happens || got.UserMust != want.UserMust {
				t.Errorf("%s: title or explanations differ:\ngot  %q\n     %q\n     %q\nwant %q\n     %q\n     %q", c.r.Name, got.Title, got.Happens, got.UserMust, want.Title, want.Happens, want.UserMust)
			}
			if got.Figure != want.Figure {
				t.Errorf("%s: figure differs:\ngot  %s\nwant %s", c.r.Name, got.Figure, want.Figure)
			}
			if !slices.Equal(got.Notes, want.Notes) {
				t.Errorf("%s: notes differ:\ngot  %q\nwant %q", c.r.Name, got.Notes, want.Notes)
			}
		}
		if rendered == 0 {
			t.Errorf("%s holds no measured result", path)
		}
	}
}

// schema1Case is one measured result of a schema 1 file: its sentences,
// and the result as schema 2 holds it (no sentence, the added figures).
type schema1Case struct {
	r    Result
	want Prose
}

// schema1Cases reads the schema 1 file at path and its .added.json.
func schema1Cases(t *testing.T, path string) []schema1Case {
	t.Helper()
	var f File
	readJSON(t, path, &f)
	if f.SchemaVersion != legacySchema {
		t.Fatalf("%s: schema %d, want a schema %d file", path, f.SchemaVersion, legacySchema)
	}
	var added map[string]struct {
		Metrics  map[driver.Metric]float64 `json:"metrics"`
		Settings map[string]string         `json:"settings"`
	}
	readJSON(t, strings.TrimSuffix(path, ".json")+".added.json", &added)
	var cs []schema1Case
	for _, old := range f.Results {
		if old.Error != "" {
			continue
		}
		r := Result{Name: old.Name, AckedLost: old.AckedLost, LossDocumented: old.LossDocumented, DurationS: old.DurationS,
			Metrics: maps.Clone(old.Metrics), Settings: map[string]string{}}
		if r.Metrics == nil {
			r.Metrics = map[driver.Metric]float64{}
		}
		maps.Copy(r.Metrics, added[old.Name].Metrics)
		maps.Copy(r.Settings, added[old.Name].Settings)
		cs = append(cs, schema1Case{r: r, want: Prose{Title: old.Title, Happens: old.Happens, Figure: old.Figure, UserMust: old.UserMust, Notes: old.Notes}})
	}
	return cs
}

// readJSON decodes the JSON file at path into v.
func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
