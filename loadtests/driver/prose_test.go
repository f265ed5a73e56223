package driver

import (
	"slices"
	"testing"
)

// TestProseFindsSentences: a sentence is found wherever it is but in
// a status field (one of statusKeys, or a name ending in "_" and one of
// them: "mongo_status", not "statusline"), and a note is judged by the
// words before its error.
func TestProseFindsSentences(t *testing.T) {
	sentence := "the default mode's point is the fixed-rate point at that rate, measured earlier in this run"
	run := &Run{Settings: map[string]any{"description": sentence, "topic": "topic t, all 8 partitions", "modes": "unlogged: no-redis CACHE_MODE=unlogged CACHE_TABLE=unlogged; redis: redis CACHE_MODE=redis",
		"mongo_status": "not measured: " + sentence, "fault_errors": sentence, "readyz_body": sentence, "statusline": sentence},
		Notes:    []string{"lz4 rewrite points not measured: " + sentence, sentence},
		Ceilings: []Ceiling{{Criteria: "errors < 1% and shed < 1% of the requests sent, sent >= 95% of the rate, backlog at the end of each step"}},
		Points:   []Point{{Name: "stream of 1000 events, store of 300000 records", Status: map[string]Status{"a": {State: "failed", Reason: sentence}}}},
		Aborted:  sentence,
	}
	got, err := Prose(run)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{".ceilings[0].criteria: " + run.Ceilings[0].Criteria, ".notes[1]: " + sentence, ".settings.description: " + sentence, ".settings.statusline: " + sentence}
	if !slices.Equal(got, want) {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
	if n := plainWords("no-redis CACHE_MODE=local 400/s (flat), the side's own"); n != 4 {
		t.Errorf("%d plain words", n)
	}
}
