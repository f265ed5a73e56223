// Area: concurrency. Expected versions; concurrent conditional appends
// with exactly one winner and conflicts answering the actual version; a
// side without conditional appends refuses them with a 422 and writes
// nothing; concurrent unconditional appends keep every event, with
// contiguous versions.

package conformance

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// runConcurrency checks expected versions and concurrent appends.
func runConcurrency(t *testing.T, newSide func(testing.TB) side) {
	runTests(t, newSide, []test{
		{"WrongExpectedVersionIs409WithActualVersion", testExpectedVersion},
		{"ConcurrentConditionalAppendsExactlyOneWins", testConditionalRace},
		{"ConditionalAppendRefusedWith422", testConditionalRefused},
		{"ConcurrentAnyAppendsLoseNothing", testAnyRace},
	})
}

func conflictBody(t testing.TB, status int, b []byte) (int64, bool) {
	t.Helper()
	if status != http.StatusConflict {
		return 0, false
	}
	var e struct {
		Error         string `json:"error"`
		ActualVersion *int64 `json:"actual_version"`
	}
	decode(t, b, &e)
	if e.Error == "" || e.ActualVersion == nil {
		t.Errorf("409 without error or actual_version: %s", b)
		return 0, false
	}
	return *e.ActualVersion, true
}

func testExpectedVersion(t *testing.T, tg side) {
	if !tg.Features.ConditionalAppend {
		t.Skip("capability conditional_append is false: this engine cannot refuse an append on a wrong expected version (see ConditionalAppendRefusedWith422)")
	}
	s := streamName(t, 1)
	if status, b := appendEvents(t, tg.URL(), s, 0, added(1)); status != 409 {
		t.Errorf("expected 0 on a stream without events: %d %s, want 409", status, b)
	} else if a, _ := conflictBody(t, status, b); a != -1 {
		t.Errorf("actual_version %d for a stream without events, want -1", a)
	}
	r := mustAppend(t, tg.URL(), s, "no_stream", registered())
	if r.FirstVersion == nil || *r.FirstVersion != 0 || *r.LastVersion != 0 {
		t.Errorf("first append: versions %v..%v, want 0..0", r.FirstVersion, r.LastVersion)
	}
	for _, exp := range []any{"no_stream", 5} {
		status, b := appendEvents(t, tg.URL(), s, exp, added(1))
		if a, ok := conflictBody(t, status, b); !ok || a != 0 {
			t.Errorf("expected %v on a stream at version 0: %d %s, want 409 actual_version 0", exp, status, b)
		}
	}
	r = mustAppend(t, tg.URL(), s, 0, added(10), consumed(2))
	if *r.FirstVersion != 1 || *r.LastVersion != 2 {
		t.Errorf("append at 0: versions %d..%d, want 1..2", *r.FirstVersion, *r.LastVersion)
	}
	r = mustAppend(t, tg.URL(), s, "any", added(1))
	if *r.FirstVersion != 3 {
		t.Errorf("append any: first version %d, want 3", *r.FirstVersion)
	}
	got, _ := readStream(t, tg.URL(), s, "")
	if len(got.Events) != 4 {
		t.Errorf("stream holds %d events, want 4 (refused appends must write nothing)", len(got.Events))
	}
}

func testConditionalRace(t *testing.T, tg side) {
	if !tg.Features.ConditionalAppend {
		t.Skip("capability conditional_append is false: concurrent writers cannot be serialized by expected version on this engine")
	}
	s := streamName(t, 1)
	mustAppend(t, tg.URL(), s, "no_stream", registered(), added(100))
	const writers = 8
	statuses := make([]int, writers)
	actual := make([]int64, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			status, b := appendEvents(t, tg.URL(), s, 1, consumed(float64(i+1)))
			statuses[i] = status
			if a, ok := conflictBody(t, status, b); ok {
				actual[i] = a
			}
		})
	}
	wg.Wait()
	wins := 0
	for i, st := range statuses {
		switch st {
		case http.StatusCreated:
			wins++
		case http.StatusConflict:
			if actual[i] != 2 {
				t.Errorf("loser %d: actual_version %d, want 2", i, actual[i])
			}
		default:
			t.Errorf("writer %d: status %d", i, st)
		}
	}
	if wins != 1 {
		t.Errorf("%d writers with expected_version 1 succeeded, want exactly 1", wins)
	}
	if r, _ := readStream(t, tg.URL(), s, ""); len(r.Events) != 3 {
		t.Errorf("stream holds %d events, want 3", len(r.Events))
	}
}

func testConditionalRefused(t *testing.T, tg side) {
	if tg.Features.ConditionalAppend {
		t.Skip("capability conditional_append is true: the engine checks expected versions (see WrongExpectedVersionIs409WithActualVersion)")
	}
	s := streamName(t, 1)
	for _, exp := range []any{0, 7, "no_stream"} {
		status, b := appendEvents(t, tg.URL(), s, exp, added(1))
		var e struct{ Error string }
		decode(t, b, &e)
		if status != http.StatusUnprocessableEntity || !strings.Contains(e.Error, "conditional_append") {
			t.Errorf("expected_version %v: %d %s; want 422 naming conditional_append", exp, status, b)
		}
	}
	if r, _ := readStream(t, tg.URL(), s, ""); len(r.Events) != 0 {
		t.Errorf("a refused conditional append wrote %d events", len(r.Events))
	}
	r := mustAppend(t, tg.URL(), s, "any", registered())
	if r.FirstVersion != nil && *r.FirstVersion != 0 {
		t.Errorf("first version %d", *r.FirstVersion)
	}
	if r := mustAppend(t, tg.URL(), s, nil, added(1)); r.Position == "" {
		t.Error("an append without expected_version (default any) failed")
	}
}

func testAnyRace(t *testing.T, tg side) {
	s := streamName(t, 1)
	const writers, each = 8, 5
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				status, b := appendEvents(t, tg.URL(), s, "any", ev("OxygenAdded", fmt.Sprintf(`{"liters":1,"writer":%d,"i":%d}`, w, i)))
				if status != http.StatusCreated {
					t.Errorf("writer %d append %d: %d %s", w, i, status, b)
				}
			}
		})
	}
	wg.Wait()
	r, _ := readStream(t, tg.URL(), s, "")
	if len(r.Events) != writers*each {
		t.Fatalf("stream holds %d events, want %d", len(r.Events), writers*each)
	}
	seen := map[string]bool{}
	for i, e := range r.Events {
		if e.Version == nil || *e.Version != int64(i) {
			t.Errorf("event %d has version %v: versions must be contiguous", i, e.Version)
		}
		seen[string(e.Data)] = true
	}
	if len(seen) != writers*each {
		t.Errorf("%d distinct events, want %d", len(seen), writers*each)
	}
}
