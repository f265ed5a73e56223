package report

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestNewestInputs: the report's default inputs are the newest file of
// each pair with a file of its own and of the long-lived, throughput and
// scale-out runs, in the order of the sections; never an older file of
// the same kind, nor a file of another kind (the experiments, the event
// store's, which eventstore.LoadRuns reads).
func TestNewestInputs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, name := range []string{
		"20261201T000000Z-queue.json", "20261202T000000Z-queue.json", "20261201T000000Z-log.json",
		"20261201T000000Z-throughput.json", "20261201T000000Z-scaleout.json", "20261201T000000Z-longlived.json",
		"20261201T000000Z-experiments.json", "20261201T000000Z-eventstore-append.json", "20261201T000000Z-eventstore-log.json",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for _, f := range NewestInputs(dir) {
		got = append(got, filepath.Base(f))
	}
	want := []string{"20261202T000000Z-queue.json", "20261201T000000Z-log.json",
		"20261201T000000Z-longlived.json", "20261201T000000Z-throughput.json", "20261201T000000Z-scaleout.json"}
	if !slices.Equal(got, want) {
		t.Errorf("NewestInputs = %q, want %q", got, want)
	}
}
