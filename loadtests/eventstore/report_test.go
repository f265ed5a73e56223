package eventstore

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestLoad reads the files present, leaves a missing scenario nil, and
// refuses a file that does not parse rather than drop it silently.
func TestLoad(t *testing.T) {
	dir := t.TempDir()
	r, err := Load(dir)
	if err != nil || r.Append != nil || r.PointRead != nil || r.CatchUp != nil {
		t.Fatalf("empty folder: %+v, %v", r, err)
	}
	write := func(name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, "eventstore-"+name+".json"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("point-read", `{"source":"s","rows":[{"engine":"no-kurrentdb","matched":3,"measured":true}]}`)
	r, err = Load(dir)
	if err != nil || r.PointRead == nil || r.PointRead.Rows[0].Matched != 3 || r.Append != nil || r.CatchUp != nil {
		t.Fatalf("one file: %+v, %v", r, err)
	}
	write("catch-up", `{"rows": [`)
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "eventstore-catch-up.json") {
		t.Errorf("a broken file: err = %v", err)
	}
}

// TestAppendBenchOnTheDriver runs the append scenario briefly against a
// fake engine and an absent one, then loads its results file: both modes
// are separate series, only read-then-append reads the stream's state
// (blind appends send "any" with no read), and the absent engine's rows
// say not measured. The committed files of the older bench still load.
func TestAppendBenchOnTheDriver(t *testing.T) {
	var states, blindAny, conditional atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/capabilities":
			w.Write([]byte(`{"conditional_append":true}`))
		case strings.HasSuffix(r.URL.Path, "/state"):
			states.Add(1)
			w.Write([]byte(`{"version":3}`))
		case r.Method == http.MethodPost:
			var body struct {
				Expected any `json:"expected_version"`
			}
			_ = json.NewDecoder(r.Body).Decode(&body)
			if body.Expected == "any" {
				blindAny.Add(1)
			} else {
				conditional.Add(1)
			}
			w.WriteHeader(http.StatusCreated)
			w.Write([]byte(`{"position":"1"}`))
		default:
			w.Write([]byte(`{"events":[],"last_version":9}`))
		}
	}))
	defer srv.Close()
	dir := t.TempDir()
	o := Append.Defaults
	o.Targets, o.Out, o.Duration, o.Rounds, o.Workers, o.Streams = "no-kurrentdb="+srv.URL+",kurrentdb=http://127.0.0.1:1", dir, 150*time.Millisecond, 2, 2, 2
	path, err := Bench(context.Background(), "append", o, nil, io.Discard)
	if err != nil || !strings.HasSuffix(path, "-eventstore-append.json") {
		t.Fatalf("Bench: %q, %v", path, err)
	}
	if states.Load() == 0 || conditional.Load() == 0 || blindAny.Load() == 0 {
		t.Errorf("state reads %d, conditional appends %d, blind appends %d: want all > 0", states.Load(), conditional.Load(), blindAny.Load())
	}
	// A read the loop's end interrupts has no append: at most one per
	// worker and read-then-append loop (2 workers × 2 series × 2 rounds).
	if d := states.Load() - conditional.Load(); d < 0 || d > 8 {
		t.Errorf("%d conditional appends for %d state reads: blind appends read first, or reads were lost", conditional.Load(), states.Load())
	}
	r, err := Load(dir)
	if err != nil || r.Append == nil {
		t.Fatalf("Load: %+v, %v", r, err)
	}
	count := map[string]int{}
	for _, row := range r.Append.Rows {
		count[row.Engine+" "+row.Mode+" "+fmt.Sprint(row.Measured)]++
		if row.Measured && (row.Ops == 0 || row.OpsPerSec == 0 || row.EventsPerStream != 10 || !row.Counted || row.InFlight != 0) {
			t.Errorf("row %+v", row)
		}
	}
	// 2 modes × 2 series × 2 rounds per engine.
	for _, k := range []string{"no-kurrentdb read-then-append true", "no-kurrentdb blind true", "kurrentdb read-then-append false", "kurrentdb blind false"} {
		if count[k] != 4 {
			t.Errorf("%s: %d rows, want 4 (%v)", k, count[k], count)
		}
	}
	if len(r.Append.Verdicts) != 2 || !strings.Contains(r.Append.Verdicts[1], "blind") {
		t.Errorf("verdicts %q: want one per mode of the measured engine", r.Append.Verdicts)
	}
	committed, err := Load(filepath.Join("..", "..", "results"))
	if err != nil || committed.Append == nil || committed.PointRead == nil || committed.CatchUp == nil {
		t.Fatalf("committed results: %v", err)
	}
	// Every committed row has a known mode; a row written before the
	// blind mode existed (no mode) reads as read-then-append.
	for _, row := range committed.Append.Rows {
		if _, ok := ModeOf(row.Mode); !ok {
			t.Fatalf("a committed row has the unknown mode %q", row.Mode)
		}
	}
	if m, ok := ModeOf(""); !ok || m != ReadThenAppend {
		t.Errorf("a row without a mode reads as %q, want %q", m.Name, ReadThenAppend.Name)
	}
}

// TestAppendScenarioIsValid checks the declared scenario, and that
// Validate refuses one without the blind mode.
func TestAppendScenarioIsValid(t *testing.T) {
	if err := Append.Validate(); err != nil {
		t.Error(err)
	}
	bad := Append
	bad.Modes = []Mode{ReadThenAppend}
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "blind") {
		t.Errorf("no blind mode: %v", err)
	}
}
