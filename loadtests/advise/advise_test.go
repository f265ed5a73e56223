package advise_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/advise"
	// cli registers the project's pairs with the report (its pair table,
	// loadPairs), as the loadtests command does before advise runs.
	_ "github.com/where-postgres-ends/where-postgres-ends/loadtests/cli"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/report"
)

// fixture is a log verdict as the report reads it from results: Postgres
// passed 3000/s, Kafka 1000/s, rates measured up to 4000/s, 70-byte items.
func fixture() []report.Verdict {
	return []report.Verdict{{
		Pair: "log", Specialist: "Kafka", Item: "events", SpecConfidence: report.MeasuredHere,
		PGRate: report.Figure{Value: 3000, Unit: "/s"}, SpecRate: report.Figure{Value: 1000, Unit: "/s"},
		RateCriterion: "server delivery p99 < 100ms", MaxRate: 4000,
		PGCPU:        report.CPUCost{Design: report.Figure{Value: 0.64, Unit: " CPU-s"}, Groups: []string{"service", "postgres"}, Parts: map[string]float64{"service": 0.3, "postgres": 0.34}},
		SpecCPU:      report.CPUCost{Design: report.Figure{Why: "failed: 100% of requests 503"}},
		PayloadBytes: []float64{60}, SpecOnly: []string{"consumer groups", "replay"},
		PGLatency: report.Figure{Value: 1, Unit: " ms"}, SpecLatency: report.Figure{Value: 6, Unit: " ms"}, LatencyWhat: "delivery p95",
	}}
}

func base() advise.Workload {
	return advise.Workload{Pair: "log", Rate: 1000, Growth: 1, PayloadBytes: 100, ConsumerGroups: 1, TeamSize: 2, PostgresInStack: true}
}

func TestAdviseOnFixture(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(*advise.Workload)
		final string
		want  []string
	}{
		{"within everything", func(*advise.Workload) {}, "Postgres", []string{"0.33× of Postgres' 3000/s", "failed: 100% of requests 503"}},
		{"replay needs Kafka", func(w *advise.Workload) { w.Replay = true; w.ConsumerGroups = 3 }, "Kafka (question 1", []string{"3 independent consumer groups"}},
		{"beyond the range", func(w *advise.Workload) { w.Rate = 8000 }, "measure it: question 2", []string{"2× of it", "Nothing is extrapolated"}},
		{"growth beyond the range", func(w *advise.Workload) { w.Growth = 5 }, "measure it: question 2", []string{"5000/s in two years"}},
		{"above both ceilings", func(w *advise.Workload) { w.Rate = 3500 }, "measure it: question 2", []string{"neither side passed it"}},
		{"big team", func(w *advise.Workload) { w.TeamSize = 12 }, "Kafka (question 3", nil},
		{"payload outside", func(w *advise.Workload) { w.PayloadBytes = 2048 }, "measure it: question 6", []string{"34× the largest item measured (60 bytes)"}},
		{"latency met", func(w *advise.Workload) { w.LatencyMS = 5 }, "Postgres", []string{"0.2× your 5 ms target"}},
		{"no Postgres yet", func(w *advise.Workload) { w.PostgresInStack = false }, "Kafka (question 5", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := base()
			c.edit(&w)
			a, err := advise.Advise(w, fixture())
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(a.Final, c.final) {
				t.Errorf("final %q, want prefix %q", a.Final, c.final)
			}
			var all strings.Builder
			advise.Print(&all, w, a)
			for _, s := range c.want {
				if !strings.Contains(all.String(), s) {
					t.Errorf("answers lack %q:\n%s", s, all.String())
				}
			}
			if len(a.Answers) != 6 || a.Answers[0].Question != "Is Postgres' semantics enough?" || a.Answers[4].Question != "Is Postgres already in the stack?" {
				t.Errorf("questions out of the reference's order: %+v", a.Answers)
			}
		})
	}
}

func TestMainInputs(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"-h"}, 0, "--team-size"},
		{[]string{"--help"}, 0, "items per second (default 1000)"},
		{[]string{"--rate", "-5"}, 2, "rate -5 is negative"},
		{[]string{"--pair", "zoo"}, 2, "unknown pair"},
		{[]string{"--payload", "2XB"}, 2, "cannot parse size"},
		{[]string{"--bogus"}, 2, "flag provided but not defined"},
		{[]string{"--pair", "log", "--results", "../../results", "--rate", "10"}, 0, "Answer: "},
	} {
		var out, errb bytes.Buffer
		if code := advise.Main(c.args, &out, &errb); code != c.code {
			t.Errorf("%v: exit %d, want %d (stderr %q)", c.args, code, c.code, errb.String())
		}
		got := out.String() + errb.String()
		if !strings.Contains(got, c.out) {
			t.Errorf("%v: output lacks %q:\n%s", c.args, c.out, got)
		}
		if c.code == 2 && strings.Count(strings.TrimSpace(errb.String()), "\n") != 0 {
			t.Errorf("%v: error is not one line: %q", c.args, errb.String())
		}
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]float64{"300": 300, "2KB": 2048, "1.5MB": 1.5 * (1 << 20), "512kib": 512 << 10} {
		if got, err := report.ParseSize(in); err != nil || got != want {
			t.Errorf("%q: %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "KB", "2XB", "-1KB", "NaN"} {
		if _, err := report.ParseSize(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// TestUnmeasuredAnswersAreNamed: when the results record no item size, the
// final line says Postgres rests on no measurement for that question.
func TestUnmeasuredAnswersAreNamed(t *testing.T) {
	vs := fixture()
	vs[0].PayloadBytes = nil
	a, err := advise.Advise(base(), vs)
	if err != nil {
		t.Fatal(err)
	}
	if want := "Postgres: no answer is no on this machine's measurements; question(s) 6 rest on no measurement."; a.Final != want {
		t.Errorf("final %q, want %q", a.Final, want)
	}
}

// TestAdviseOnCommittedResults answers from the committed results: the
// reference's example workload needs Kafka (replay, consumer groups).
func TestAdviseOnCommittedResults(t *testing.T) {
	vs, err := advise.Load("../../results")
	if err != nil {
		t.Fatal(err)
	}
	w := base()
	w.Rate, w.PayloadBytes, w.ConsumerGroups, w.Replay = 4000, 2048, 3, true
	a, err := advise.Advise(w, vs)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(a.Final, "Kafka (question 1") {
		t.Errorf("final %q", a.Final)
	}
	if len(vs) != len(advise.Pairs()) {
		t.Errorf("%d verdicts, want one per pair", len(vs))
	}
}

// cacheFixture is a cache verdict whose roles were measured: pub/sub
// ceilings of 1 and 10 subscribers (Postgres 4000/s and 1000/s, Redis
// 16000/s and 8000/s), locks (Postgres 900, Redis 5000 cycles/s); no
// rate limits.
func cacheFixture() []report.Verdict {
	f := func(v float64, unit string) report.Figure { return report.Figure{Value: v, Unit: unit} }
	return []report.Verdict{{
		Pair: "cache", Specialist: "Redis", Item: "reads", SpecConfidence: report.MeasuredHere,
		PGRate: f(3000, "/s"), SpecRate: f(3000, "/s"), MaxRate: 4000, PayloadBytes: []float64{200},
		PGLatency: f(0.3, " ms"), SpecLatency: f(0.3, " ms"), LatencyWhat: "one lookup by key, p50",
		RoleLimits: []report.RoleLimit{
			{Role: report.RolePubSub, Point: "1 subscriber", Subscribers: 1, Ceiling: true, PG: f(4000, "/s"), Spec: f(16000, "/s")},
			{Role: report.RolePubSub, Point: "10 subscribers", Subscribers: 10, Ceiling: true, PG: f(1000, "/s"), Spec: f(8000, "/s")},
			{Role: report.RoleLocks, Point: "16 contenders on 8 names", PG: f(900, " cycles/s"), Spec: f(5000, " cycles/s")},
		},
	}}
}

// TestAdviseRoles: the cache pair's roles answer a seventh question from
// the measured figures: within Postgres' figure yes, within Redis' only
// Redis, beyond what was measured (or a role not measured) "measure it".
func TestAdviseRoles(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(*advise.Workload)
		final string
		want  string
	}{
		{"pub/sub within Postgres", func(w *advise.Workload) { w.PubSubRate, w.Subscribers = 2000, 1 }, "Postgres", "0.5× of what Postgres passed"},
		{"pub/sub to 5 subscribers is judged on 10", func(w *advise.Workload) { w.PubSubRate, w.Subscribers = 2000, 5 }, "Redis (question 7", "at 10 subscribers Postgres passed"},
		{"more subscribers than measured", func(w *advise.Workload) { w.PubSubRate, w.Subscribers = 100, 100 }, "measure it: question 7", "at most 10 subscribers were measured"},
		{"above both", func(w *advise.Workload) { w.PubSubRate, w.Subscribers = 20000, 1 }, "measure it: question 7", "neither side reached"},
		{"locks within Postgres", func(w *advise.Workload) { w.LockRate = 300 }, "Postgres", "closed loop"},
		{"rate limits not measured", func(w *advise.Workload) { w.LockRate, w.TakeRate = 300, 50 }, "measure it: question 7", "rate limits not measured in these results"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := base()
			w.Pair = "cache"
			c.edit(&w)
			a, err := advise.Advise(w, cacheFixture())
			if err != nil {
				t.Fatal(err)
			}
			if len(a.Answers) != 7 {
				t.Fatalf("%d answers, want the six and the roles'", len(a.Answers))
			}
			if !strings.HasPrefix(a.Final, c.final) {
				t.Errorf("final %q, want prefix %q", a.Final, c.final)
			}
			if !strings.Contains(a.Answers[6].Text, c.want) {
				t.Errorf("roles' answer %q lacks %q", a.Answers[6].Text, c.want)
			}
		})
	}
	w := base()
	w.PubSubRate, w.Subscribers = 10, 1
	if _, err := advise.Advise(w, fixture()); err == nil || !strings.Contains(err.Error(), "cache pair's roles") {
		t.Errorf("a pub/sub rate on the log pair: %v, want refused", err)
	}
}
