package report

import (
	"os"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/eventstore"
)

// cpu is a CPU cost figure for the card fixtures.
func cpu(v float64) CPUCost {
	return CPUCost{Rate: 1000, Design: Figure{Value: v, Unit: " CPU-s"}, Groups: []string{"service", "postgres"}, Parts: map[string]float64{"service": v / 2, "postgres": v / 2}}
}

// ceilingFixture is a ceiling figure of value with its searches' range.
func ceilingFixture(v, lo, hi float64) Figure {
	return Figure{Value: v, Unit: "/s", Lo: lo, Hi: hi, N: 3}
}

// queueCardFixture is a queue verdict whose Postgres ceiling is 2,800/s
// (2,000–2,800) and RabbitMQ's spec.
func queueCardFixture(spec Figure) Verdict {
	return Verdict{Pair: "queue", Title: "Queue", Specialist: "RabbitMQ", Item: "tasks", SpecConfidence: MeasuredHere,
		PGRate: ceilingFixture(2800, 2000, 2800), SpecRate: spec, RateOp: "sent one per request",
		RateCriterion: "the rule for both sides: server processing p99 < 100 ms, errors and sheds < 1%, backlog flat over 15s steps",
		PGCPU:         cpu(0.5), SpecCPU: cpu(1), CPUAt: 1400,
		PGLatency: Figure{Value: 13, Unit: " ms"}, SpecLatency: Figure{Value: 14, Unit: " ms"}, LatencyWhat: "delivery p99",
		SpecOnly: []string{"routing by pattern (topic and header exchanges)", "many queues"}, Bites: "NOTIFY", Doc: "docs/queue.md", Section: "Queue", Chart: "docs/results/queue-card.svg",
	}
}

// TestCardSaysFailedFiguresInWords renders a card whose figures failed
// or were not measured: each says so in words, never as a number.
func TestCardSaysFailedFiguresInWords(t *testing.T) {
	v := queueCardFixture(Figure{Value: 2000, Unit: "/s"})
	v.PGRate = failedFigure("/s", driver.Status{State: driver.StateFailed, Reason: "every search aborted"})
	v.PGCPU = CPUCost{Design: noFigure(" CPU-s")}
	v.PGLatency = noFigure(" ms")
	c := Card(v)
	for _, want := range []string{"**Use Postgres when**", "**Use RabbitMQ when**", "failed: every search aborted", "Postgres not measured", "docs/results/queue-card.svg", "RabbitMQ measured here"} {
		if !strings.Contains(c, want) {
			t.Errorf("card lacks %q:\n%s", want, c)
		}
	}
	if strings.Contains(c, "up to 0") || strings.Contains(c, "more than 0") {
		t.Errorf("a failed rate printed as a number:\n%s", c)
	}
}

// TestSpecialistThresholdIsItsOwn: "Use RabbitMQ when … more than N/s"
// is said only when RabbitMQ passed more than Postgres in every search
// under the same rule, with RabbitMQ's own figure; when it passed less,
// or the two overlap, rate is said to be no reason (the card once read
// "Use RabbitMQ when … more than 2800 tasks/s (RabbitMQ passed 2000/s)").
func TestSpecialistThresholdIsItsOwn(t *testing.T) {
	for name, c := range map[string]struct {
		spec       Figure
		want, deny []string
	}{
		"specialist lower": {spec: ceilingFixture(1900, 1400, 1900),
			want: []string{"not for its rate: under the same rule RabbitMQ passed 1,900/s (1,400–1,900 over 3 ceiling searches), Postgres more (sent one per request)"},
			deny: []string{"more than 2,800"}},
		"specialist higher": {spec: ceilingFixture(4000, 3300, 4000),
			want: []string{"or more than 2,800 tasks/s sent one per request: RabbitMQ passed 4,000/s (3,300–4,000 over 3 ceiling searches) under the same rule"}},
		// The run the issue quotes: 2,800 (2,000–2,800) against 2,000
		// (1,400–2,000): both passed 2,000 in some search.
		"overlap": {spec: ceilingFixture(2000, 1400, 2000),
			want: []string{"their ceilings overlap"}, deny: []string{"more than", "Postgres more"}},
		"not reached": {spec: Figure{Value: 16000, Unit: "/s", AtLeast: true, N: 3},
			want: []string{"RabbitMQ passed ≥ 16,000/s"}},
		"failed": {spec: failedFigure("/s", driver.Status{State: driver.StateFailed, Reason: "GET /stats refused"}),
			want: []string{"RabbitMQ's single-request ceiling (sent one per request): failed: GET /stats refused"}, deny: []string{"more than"}},
	} {
		b := SpecBullet(queueCardFixture(c.spec))
		for _, w := range c.want {
			if !strings.Contains(b, w) {
				t.Errorf("%s: lacks %q:\n%s", name, w, b)
			}
		}
		for _, d := range c.deny {
			if strings.Contains(b, d) {
				t.Errorf("%s: says %q:\n%s", name, d, b)
			}
		}
	}
}

// TestNotRunSpecialistSaysSo: a specialist that never ran has no rate
// clause ("KurrentDB's rate: not run" read as a figure) but one plain
// sentence saying none of its figures is known.
func TestNotRunSpecialistSaysSo(t *testing.T) {
	v := queueCardFixture(Figure{Unit: "/s", Why: "not run"})
	v.Pair, v.Title, v.Specialist, v.Item, v.SpecConfidence = "eventstore", "Event store", "KurrentDB", "events", NotRunKurrentDB
	v.SpecOnly = []string{"server-side projections"}
	b := SpecBullet(v)
	if strings.Contains(b, "rate: not run") || !strings.Contains(b, "KurrentDB did not run here, so none of its figures is known") {
		t.Errorf("bullet: %s", b)
	}
}

// TestStandInNamedByItsName: a stand-in's figure is printed under its own
// name, never as the system it stands in for ("MongoDB 416 ms" was
// FerretDB's).
func TestStandInNamedByItsName(t *testing.T) {
	v := queueCardFixture(ceilingFixture(1, 1, 1))
	v.Pair, v.Title, v.Specialist, v.Item, v.SpecConfidence = "documents", "Documents", "MongoDB", "searches", StandInFerretDB
	v.SpecLatency = Figure{Value: 416, Unit: " ms"}
	c := Card(v)
	if !strings.Contains(c, "FerretDB (standing in for MongoDB) 416 ms") || strings.Contains(c, "MongoDB 416") {
		t.Errorf("card:\n%s", c)
	}
}

// TestBulletsFitTheFirstScreen: both answers of every kind of card stay
// within MaxBulletChars.
func TestBulletsFitTheFirstScreen(t *testing.T) {
	for _, spec := range []Figure{ceilingFixture(2000, 1400, 2000), ceilingFixture(4000, 3300, 4000), ceilingFixture(2400, 2000, 3300)} {
		v := queueCardFixture(spec)
		for _, b := range []string{PGBullet(v), SpecBullet(v)} {
			if n := utf8.RuneCountInString(b); n > MaxBulletChars {
				t.Errorf("%d characters, want at most %d: %s", n, MaxBulletChars, b)
			}
		}
	}
}

// TestPastCeilingSaysFallingBehindOnlyFromABacklog: a fixed-rate point
// where half the requests were shed by the admission limit and the
// backlog stayed flat is no "fell behind"; one whose backlog grew is.
func TestPastCeilingSaysFallingBehindOnlyFromABacklog(t *testing.T) {
	point := func(backlog, shed float64) *driver.Point {
		p := &driver.Point{Scenario: "queue.rate", Name: "5000/s", Rate: 5000, DurationS: 10, Sides: []string{"no-rabbitmq"}}
		for i := range 3 {
			p.Rounds = append(p.Rounds, driver.Round{Index: i, Sides: map[string]*driver.SideResult{"no-rabbitmq": {
				Phases:  []driver.Phase{{Name: "send", Client: driver.ClientResult{Requests: 50000, OK: 50000 - int64(shed), Shed: int64(shed)}}},
				Metrics: map[driver.Metric]float64{"throughput": 5000 - shed/10, "backlog_end": backlog, driver.ClientSentRate: 5000, driver.ClientShed: shed}}}})
		}
		driver.Summarize(p)
		return p
	}
	shed := pastCeiling([]*driver.Point{point(20, 25000)}, "no-rabbitmq", "tasks")
	if strings.Contains(shed, "backlog grows") || strings.Contains(shed, "fell behind") || !strings.Contains(shed, "shed") {
		t.Errorf("sheds with a flat backlog: %q", shed)
	}
	grew := pastCeiling([]*driver.Point{point(30000, 0)}, "no-rabbitmq", "tasks")
	if !strings.Contains(grew, "backlog grows (at 5000/s: 30,000 tasks left") {
		t.Errorf("a growing backlog: %q", grew)
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
		for l := range strings.SplitSeq(card, "\n") {
			if strings.HasPrefix(l, "- ") && utf8.RuneCountInString(l)-2 > MaxBulletChars {
				t.Errorf("%s card: a bullet of %d characters, want at most %d: %s", title, utf8.RuneCountInString(l)-2, MaxBulletChars, l)
			}
		}
	}
	if !strings.Contains(head, "where-postgres-ends") || !strings.Contains(head, "Event store вглубь") {
		t.Error("the first screen does not name the two reference texts")
	}
}

func TestParseSizeUnits(t *testing.T) {
	for in, want := range map[driver.Metric]float64{"70": 70, "70B": 70, "2KB": 2048, "2 KiB": 2048, "1MB": 1 << 20} {
		if got, err := ParseSize(string(in)); err != nil || got != want {
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

// TestEventStoreCostNamesKafkaWhereKurrentDBDidNotRun: the committed
// event-store ceiling ran Postgres and Kafka but not KurrentDB, so the
// card's cost gives Kafka's CPU beside Postgres', both at the highest
// rate both passed, instead of Postgres' alone.
func TestEventStoreCostNamesKafkaWhereKurrentDBDidNotRun(t *testing.T) {
	v := eventStoreVerdict(newInputs(committedRuns(t), eventstore.Results{}))
	if v.SpecCPU.Design.OK() {
		t.Skip("KurrentDB's CPU was measured: the card compares it, not Kafka")
	}
	if v.AltCPU == nil || !v.AltCPU.Design.OK() || !v.PGCPU.Design.OK() {
		t.Fatalf("alt CPU %+v, Postgres CPU %+v: want both measured from the committed ceiling", v.AltCPU, v.PGCPU)
	}
	if v.CPUAt <= 0 || v.AltCPU.Rate != v.CPUAt || v.PGCPU.Rate != v.CPUAt {
		t.Errorf("CPU at %v/s: Postgres' at %v, Kafka's at %v; want both at the common rate", v.CPUAt, v.PGCPU.Rate, v.AltCPU.Rate)
	}
	if s := cpuText(v); !strings.Contains(s, "Kafka (unconditional appends) "+v.AltCPU.String()) {
		t.Errorf("cost %q does not name Kafka's CPU", s)
	}
}
