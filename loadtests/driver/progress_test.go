package driver

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// TestProgressWritesOneLinePerAttackWithoutBars runs two short attacks
// with a Progress that is not on a terminal: the output must be the step
// line then one line per attack, labelled with the step, the attack's
// number and the time left, and hold no carriage return.
func TestProgressWritesOneLinePerAttackWithoutBars(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusAccepted) }))
	defer srv.Close()
	var out bytes.Buffer
	p := NewProgress(&out, false, []Step{{Name: "queue", Attacks: 2, Planned: 4 * time.Second}, {Name: "log", Attacks: 1, Planned: time.Minute}})
	p.Begin("queue")
	for _, name := range []string{"no-rabbitmq    50/s", "rabbitmq    50/s"} {
		Attack(context.Background(), AttackSpec{Name: name, Rate: 50, Duration: 500 * time.Millisecond, Progress: p,
			Next: func(uint64) Request { return Request{URL: srv.URL} }})
	}
	s := out.String()
	if strings.Contains(s, "\r") {
		t.Errorf("output holds carriage returns: %q", s)
	}
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("got %d lines, want a step line and 2 attack lines:\n%s", len(lines), s)
	}
	if !strings.HasPrefix(lines[0], "== step 1/2: queue (") {
		t.Errorf("step line %q", lines[0])
	}
	// How many requests 500 ms at 50/s sends, and the time left (scaled
	// by how long the attacks took), depend on the machine's load: the
	// pattern checks the line's shape, not those figures.
	for i, want := range []string{`^\[queue 1/2 · ~[0-9hms.]+ left\] no-rabbitmq 50/s 500ms: [1-9][0-9]* sent, 100% ok, p99 .+ ms$`,
		`^\[queue 2/2 · ~[0-9hms.]+ left\] rabbitmq 50/s 500ms: [1-9][0-9]* sent, 100% ok, p99 .+ ms$`} {
		if !regexp.MustCompile(want).MatchString(lines[i+1]) {
			t.Errorf("attack line %d = %q, want it to match %s", i+1, lines[i+1], want)
		}
	}
}

// TestProgressLeftFollowsThePlanAndTheClock checks the time left: the
// planned time not done before anything ran, then scaled by how long the
// done part took against its plan.
func TestProgressLeftFollowsThePlanAndTheClock(t *testing.T) {
	var out bytes.Buffer
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := NewProgress(&out, false, []Step{{Name: "a", Attacks: 4, Planned: 40 * time.Second}, {Name: "b", Attacks: 1, Planned: 60 * time.Second}})
	p.now, p.start = func() time.Time { return now }, now
	p.Begin("a")
	if got := p.left(); got != 100*time.Second {
		t.Errorf("left at the start = %s, want 1m40s", got)
	}
	// Two of a's four attacks done (20 s planned) in 40 s: twice slower
	// than planned, so the 80 s left are read as 160 s.
	p.n, now = 2, now.Add(40*time.Second)
	if got := p.left(); got != 160*time.Second {
		t.Errorf("left after a slow half of a = %s, want 2m40s", got)
	}
	// b begins after 50 s: a's whole plan counts as done however many
	// attacks it reported.
	now = now.Add(10 * time.Second)
	p.Begin("b")
	if got := p.left(); got != 75*time.Second {
		t.Errorf("left when b begins = %s, want 1m15s (60 s × 50/40)", got)
	}
	if !strings.Contains(out.String(), "== step 2/2: b (50s elapsed, ~1m15s left)") {
		t.Errorf("step line missing in %q", out.String())
	}
}

// TestHumanRoundsForAReader checks the precision of each range.
func TestHumanRoundsForAReader(t *testing.T) {
	for d, want := range map[time.Duration]string{
		1500 * time.Millisecond:         "1.5s",
		12600 * time.Millisecond:        "13s",
		4*time.Minute + 10*time.Second:  "4m10s",
		24*time.Minute + 40*time.Second: "25m",
		time.Hour + 5*time.Minute + 1e9: "1h5m",
	} {
		if got := Human(d); got != want {
			t.Errorf("Human(%s) = %q, want %q", d, got, want)
		}
	}
}

// TestOutcomeClipsLongErrors keeps an attack's line short when the server
// answers with a long error body.
func TestOutcomeClipsLongErrors(t *testing.T) {
	r := ClientResult{Requests: 10, OK: 4, Errors: 6, ErrorSamples: []string{"503 Service Unavailable: " + strings.Repeat("x", 300)}}
	got := Outcome(AttackSpec{Name: "mongodb  search 5/s", Duration: 10 * time.Second}, r)
	if !strings.HasPrefix(got, "mongodb search 5/s 10s: 10 sent, 40% ok, p99 0.0 ms, e.g. 503 Service Unavailable: xx") || !strings.HasSuffix(got, "x…") {
		t.Errorf("outcome %q", got)
	}
	if n := utf8.RuneCountInString(got); n > 160 {
		t.Errorf("outcome is %d runes long", n)
	}
}

// TestProgressDrawsBarsOnATerminal checks the terminal mode: the bar is
// labelled with the step and the attack's number, and no outcome line is
// written.
func TestProgressDrawsBarsOnATerminal(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusAccepted) }))
	defer srv.Close()
	var out bytes.Buffer
	p := NewProgress(&out, true, []Step{{Name: "log", Attacks: 1, Planned: time.Second}})
	p.Begin("log")
	Attack(context.Background(), AttackSpec{Name: "kafka 50/s", Rate: 50, Duration: 500 * time.Millisecond, Progress: p,
		Next: func(uint64) Request { return Request{URL: srv.URL} }})
	s := out.String()
	if !strings.Contains(s, "\r") || !strings.Contains(s, "[log 1/1 · ~") {
		t.Errorf("no labelled bar in %q", s)
	}
	if strings.Contains(s, "sent, ") {
		t.Errorf("an outcome line was written under a bar: %q", s)
	}
}
