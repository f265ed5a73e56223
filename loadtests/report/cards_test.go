package report

import (
	"os"
	"strings"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
)

// TestCardSaysFailedFiguresInWords renders a card whose figures failed
// or were not measured: each says so in words, never as a number, and
// the card fits on one screen.
func TestCardSaysFailedFiguresInWords(t *testing.T) {
	v := Verdict{Pair: "queue", Title: "Queue", Specialist: "RabbitMQ", Item: "tasks", SpecConfidence: MeasuredHere,
		PGRate:    failedFigure("/s", driver.Status{State: driver.StateFailed, Reason: "every search aborted"}),
		SpecRate:  Figure{Value: 2000, Unit: "/s"},
		PGCPU:     noFigure(" CPU-s"),
		SpecCPU:   Figure{Value: 1.5, Unit: " CPU-s"},
		PGLatency: noFigure(" ms"), SpecLatency: Figure{Value: 5, Unit: " ms"}, LatencyWhat: "delivery p99",
		MaxRate: 4000, SpecOnly: []string{"fan-out"}, Bites: "NOTIFY", Doc: "docs/queue.md", Section: "Queue", Chart: "docs/results/queue-card.svg",
	}
	c := Card(v)
	for _, want := range []string{"**Use Postgres when**", "**Use RabbitMQ when**", "failed: every search aborted", "Postgres not measured", "docs/results/queue-card.svg", "RabbitMQ measured here"} {
		if !strings.Contains(c, want) {
			t.Errorf("card lacks %q:\n%s", want, c)
		}
	}
	if strings.Contains(c, "up to 0") || strings.Contains(c, "more than 0") {
		t.Errorf("a failed rate printed as a number:\n%s", c)
	}
	if n := strings.Count(c, "\n"); n > 12 {
		t.Errorf("card has %d lines, want at most 12:\n%s", n, c)
	}
}

// TestCardSetsBatchedBesideSingleRequestRates: with a sustainable
// search, the card's single-request rates say so, and the batched rates
// of both sides follow, a failed side in words.
func TestCardSetsBatchedBesideSingleRequestRates(t *testing.T) {
	v := Verdict{Pair: "queue", Title: "Queue", Specialist: "RabbitMQ", Item: "tasks", SpecConfidence: MeasuredHere,
		PGRate: Figure{Value: 700, Unit: "/s"}, SpecRate: Figure{Value: 1000, Unit: "/s"}, RateCriterion: "p99 < 100 ms",
		PGCPU: noFigure(" CPU-s"), SpecCPU: noFigure(" CPU-s"), PGLatency: noFigure(" ms"), SpecLatency: noFigure(" ms"),
		LatencyWhat: "delivery p99", SpecOnly: []string{"fan-out"}, Bites: "NOTIFY",
	}
	if c := Card(v); strings.Contains(c, "one per request (") || strings.Contains(c, "Sent in batches") {
		t.Errorf("no sustainable search, yet the card speaks of batches:\n%s", c)
	}
	v.PGSustained, v.SustainedAt = Figure{Value: 12000, Unit: "/s"}, "batch 100"
	v.SpecSustained = failedFigure("/s", driver.Status{State: driver.StateFailed, Reason: "every round aborted"})
	c := Card(v)
	for _, want := range []string{"up to 700 tasks/s one per request", "more than 700 tasks/s one per request",
		"Sent in batches (batch 100, open loop; backlog flat, end-to-end p99 < 1,000 ms) Postgres sustained 12000/s, RabbitMQ failed: every round aborted"} {
		if !strings.Contains(c, want) {
			t.Errorf("card lacks %q:\n%s", want, c)
		}
	}
}

// TestCommittedREADMEShowsEveryCardFirst checks the committed README's
// first screen: a card per pair, each with "Use Postgres when" and
// "Use <specialist> when", in its first 60 lines.
func TestCommittedREADMEShowsEveryCardFirst(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Skip("no README.md:", err)
	}
	lines := strings.Split(string(b), "\n")
	head := strings.Join(lines[:min(60, len(lines))], "\n")
	for title, spec := range map[string]string{"Queue": "RabbitMQ", "Log": "Kafka", "Documents": "MongoDB", "Event store": "KurrentDB", "Cache": "Redis"} {
		_, card, ok := strings.Cut(head, "\n### "+title+": ")
		if !ok {
			t.Errorf("no %s card in README.md's first 60 lines", title)
			continue
		}
		card, _, _ = strings.Cut(card, "\n### ")
		for _, want := range []string{"**Use Postgres when**", "**Use " + spec + " when**"} {
			if !strings.Contains(card, want) {
				t.Errorf("%s card lacks %q in the first 60 lines", title, want)
			}
		}
	}
}

func TestParseSizeUnits(t *testing.T) {
	for in, want := range map[string]float64{"70": 70, "70B": 70, "2KB": 2048, "2 KiB": 2048, "1MB": 1 << 20} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("%q: %v, %v", in, got, err)
		}
	}
	if _, err := ParseSize("many"); err == nil {
		t.Error("\"many\" parsed")
	}
}

// TestCommittedREADMEIsShort keeps the README to about one read: the
// cards, the quick start, one service, the layout and the tests, with
// everything else in docs/ (issue 22: at most about 300 lines).
func TestCommittedREADMEIsShort(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Skip("no README.md:", err)
	}
	const most = 320
	if n := strings.Count(string(b), "\n"); n > most {
		t.Errorf("README.md has %d lines, want at most %d: move the detail to docs/", n, most)
	}
	for _, want := range []string{"make deps", "make up", `eval "$(make -s env)"`, "make test", "make run-no-kafka", "go run ./services/no-kafka -h", "## Layout", "## Tests",
		"docs/queue.md", "docs/log.md", "docs/documents.md", "docs/cache.md", "docs/eventstore.md", "docs/loadtests.md", "docs/security.md", "docs/experiments.md"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("README.md lacks %q", want)
		}
	}
}

// TestFigureShowsTheRoundsRange: a median of rounds that disagree is
// printed with their range, never alone; one that agrees, or a failed
// figure, is printed as before.
func TestFigureShowsTheRoundsRange(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		f    Figure
		want string
	}{
		{Figure{Value: 10000, Unit: "/s", Lo: 5000, Hi: 15000}, "10000/s (5000–15000 across rounds)"},
		{Figure{Value: 7500, Unit: "/s", Lo: 7500, Hi: 7500}, "7500/s"},
		{Figure{Value: 7500, Unit: "/s"}, "7500/s"},
		{Figure{Unit: "/s", Why: "failed: no search", Lo: 1, Hi: 2}, "failed: no search"},
	} {
		if got := c.f.String(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.f, got, c.want)
		}
	}
}
