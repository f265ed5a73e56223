package resultfile_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/experiments"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/raw"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/resultfile"
)

// touch writes an empty JSON object to dir/name.
func touch(t testing.TB, dir, name string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestNames: a file's name is its start in UTC and its kind, and KindOf
// reads the kind back; a name without a start is no results file's.
func TestNames(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 7, 3, 20, 43, 0, time.FixedZone("CET", 3600))
	if got := resultfile.Name(at, "documents"); got != "20261207T022043Z-documents.json" {
		t.Errorf("Name = %q", got)
	}
	for name, want := range map[string]resultfile.Kind{
		"results/20261207T022043Z-documents.json":        "documents",
		"20261206T235220Z-beyond-crud.json":              resultfile.BeyondCRUD,
		"20261206T235220Z-eventstore-log.json":           "eventstore-log",
		"eventstore-append.json":                         "",
		"20261206T235220Z-queue.json.tmp":                "",
		"20261206-queue.json":                            "",
		filepath.Join("x", resultfile.Name(at, "queue")): "queue",
	} {
		got, ok := resultfile.KindOf(name)
		if got != want || ok != (want != "") {
			t.Errorf("KindOf(%q) = %q, %v; want %q", name, got, ok, want)
		}
	}
}

// TestPathsAndNewest: Paths lists a kind's files oldest first and no
// file of a kind whose name ends the same way; Newest is the last.
func TestPathsAndNewest(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if got := resultfile.Newest(dir, "log"); got != "" {
		t.Errorf("Newest(empty dir) = %q", got)
	}
	for _, n := range []string{"20261202T000000Z-log.json", "20261201T000000Z-log.json", "20261203T000000Z-eventstore-log.json", "log.json", "20261204T000000Z-catalog.json"} {
		touch(t, dir, n)
	}
	got := resultfile.Paths(dir, "log")
	want := []string{filepath.Join(dir, "20261201T000000Z-log.json"), filepath.Join(dir, "20261202T000000Z-log.json")}
	if !slices.Equal(got, want) {
		t.Errorf("Paths(log) = %q, want %q", got, want)
	}
	if n := resultfile.Newest(dir, "log"); n != want[1] {
		t.Errorf("Newest(log) = %q, want %q", n, want[1])
	}
	if n := resultfile.Newest(dir, "eventstore-log"); filepath.Base(n) != "20261203T000000Z-eventstore-log.json" {
		t.Errorf("Newest(eventstore-log) = %q", n)
	}
}

// TestSchemaAndRead: Check accepts exactly its range and names the file
// and both bounds; Read refuses a field the value lacks, naming the file.
func TestSchemaAndRead(t *testing.T) {
	t.Parallel()
	s := resultfile.Schema{Oldest: 1, Current: 2}
	for v, ok := range map[int]bool{0: false, 1: true, 2: true, 3: false} {
		err := s.Check("f.json", v)
		if (err == nil) != ok {
			t.Errorf("Check(%d) = %v", v, err)
		}
		if err != nil && !strings.Contains(err.Error(), "f.json: schema") || err != nil && !strings.Contains(err.Error(), "reads 1 to 2") {
			t.Errorf("Check(%d) error %q names neither the file nor the bounds", v, err)
		}
	}
	dir := t.TempDir()
	path, err := resultfile.Write(filepath.Join(dir, "new"), "a.json", map[string]int{"schema": 2, "extra": 1})
	if err != nil {
		t.Fatal(err)
	}
	var v struct{ Schema int }
	if err := resultfile.Read(path, &v); err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "extra") {
		t.Errorf("Read with an unknown field = %v", err)
	}
	var w struct{ Schema, Extra int }
	if err := resultfile.Read(path, &w); err != nil || w.Schema != 2 || w.Extra != 1 {
		t.Errorf("Read = %+v, %v", w, err)
	}
}

// TestCommittedFiles: every file in results/ is a results file of a
// kind its reader reads (the driver's runs, the raw limits, the
// experiments' three kinds), or one of the event store's files written
// before the driver named them (eventstore-<scenario>.json, read by
// eventstore.LoadRuns); and every file of its kind's current schema
// holds figures, statuses and settings only (driver.Prose), whatever
// its kind.
func TestCommittedFiles(t *testing.T) {
	t.Parallel()
	paths, err := filepath.Glob(filepath.Join("..", "..", "results", "*.json"))
	if err != nil || len(paths) < 10 {
		t.Fatalf("committed results files: %d (%v)", len(paths), err)
	}
	current := 0
	for _, path := range paths {
		k, ok := resultfile.KindOf(path)
		if !ok {
			if !strings.HasPrefix(filepath.Base(path), "eventstore-") {
				t.Errorf("%s is no results file's name (<UTC start>-<kind>.json)", path)
			}
			continue
		}
		v, isCurrent, err := readAny(path, k)
		if err != nil {
			t.Errorf("%s (%s): %v", path, k, err)
			continue
		}
		if !isCurrent {
			continue
		}
		current++
		if p, err := driver.Prose(v); err != nil || len(p) > 0 {
			t.Errorf("%s holds sentences (%v):\n%s", path, err, strings.Join(p, "\n"))
		}
	}
	if current == 0 {
		t.Error("no committed file of a current schema")
	}
	t.Logf("%d files, %d of a current schema", len(paths), current)
}

// readAny reads path with the reader of kind k, and says whether it is
// of that kind's current schema.
func readAny(path string, k resultfile.Kind) (v any, current bool, err error) {
	switch {
	case k == resultfile.Raw:
		r, err := raw.Read(path)
		return r, r.Schema == raw.Schema.Current, err
	case slices.Contains(experiments.Kinds(), k):
		f, err := experiments.Read(path)
		if err != nil {
			return nil, false, err
		}
		return f, f.SchemaVersion == experiments.FileSchema.Current, nil
	}
	r, err := driver.ReadRun(path)
	if err != nil {
		return nil, false, err
	}
	return r, r.Schema == driver.RunSchema.Current, nil
}
