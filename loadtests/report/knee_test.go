package report

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/eventstore"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/scenario"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// kneeStep is a ceiling step of the log pair at rate with delivery p99,
// failing the criteria listed (none: it passed).
func kneeStep(rate, p99 float64, failed ...string) driver.CeilingStep {
	return driver.CeilingStep{Rate: rate, Pass: len(failed) == 0, Failed: failed, Why: "fixture",
		Metrics: map[driver.Metric]float64{"client.sent_rate": rate, "client.ok_rate": rate, "throughput": rate, "client.errors": 0,
			"server.delivery.p50_ms": p99 / 4, "server.delivery.p99_ms": p99, "backlog_end": 0, "drained": 1}}
}

// kneeSpec is the log pair's criteria with the in-flight bound inFlight.
func kneeSpec(inFlight *int) *driver.CeilingSpec {
	return &driver.CeilingSpec{Latency: "delivery", StepS: 3, ErrorShare: 0.01, ShedShare: 0.01, SentShare: 0.95, BacklogS: 0.2, BacklogMin: 100,
		P99MS: 100, MaxInFlight: inFlight}
}

// kneeCeiling is side's search of searches, its rate the one a majority
// passed.
func kneeCeiling(side string, sp *driver.CeilingSpec, searches ...driver.CeilingRound) driver.Ceiling {
	c := driver.Ceiling{Scenario: "log.ceiling", Service: side, Spec: sp, Rounds: searches}
	if sp != nil {
		c.Criteria = scenario.CriteriaText(*sp)
	}
	var rates []float64
	for i := range c.Rounds {
		c.Rounds[i].Index = i
		rates = append(rates, c.Rounds[i].Rate)
	}
	c.Rate = driver.RateAgg(rates)
	return c
}

// kneeFixture is a log run whose no-kafka side reached its knee
// (2,800/s median; its 4,000/s step failed its measurement in one search:
// 5% errors and a p99 of 77777 ms) and whose kafka side never failed a
// step up to 16,000/s: its knee was not reached.
func kneeFixture() *driver.Run {
	zero := 0
	bad := kneeStep(4000, 77777, scenario.CritErrors, scenario.CritP99)
	bad.Metrics["client.errors"] = 0.05 * 4000 * 3
	pg := kneeCeiling("no-kafka", kneeSpec(&zero),
		driver.CeilingRound{Rate: 2800, Steps: []driver.CeilingStep{kneeStep(1000, 6), kneeStep(1400, 7), kneeStep(2000, 9), kneeStep(2800, 14),
			kneeStep(4000, 160, scenario.CritBacklog, scenario.CritP99), kneeStep(3300, 140, scenario.CritP99)}},
		driver.CeilingRound{Rate: 3300, Steps: []driver.CeilingStep{kneeStep(2800, 15), kneeStep(4000, 150, scenario.CritP99), kneeStep(3300, 20)}},
		driver.CeilingRound{Rate: 2800, Steps: []driver.CeilingStep{kneeStep(2800, 13), bad, kneeStep(3300, 130, scenario.CritP99)}},
	)
	var ladder []driver.CeilingStep
	for _, r := range []float64{1000, 2000, 4000, 8000, 16000} {
		ladder = append(ladder, kneeStep(r, 10))
	}
	kafka := kneeCeiling("kafka", kneeSpec(&zero),
		driver.CeilingRound{Rate: 16000, Capped: true, Steps: ladder},
		driver.CeilingRound{Rate: 16000, Capped: true, Steps: ladder[4:]},
		driver.CeilingRound{Rate: 16000, Capped: true, Steps: ladder[4:]},
	)
	at := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	r := &driver.Run{Schema: driver.SchemaVersion, ID: "20260102T030000Z-log", Command: "log", StartedAt: at, FinishedAt: at.Add(time.Minute),
		Machine: driver.Machine{CPUs: 2}, Settings: map[string]any{}, Ceilings: []driver.Ceiling{pg, kafka}}
	r.Validate()
	return r
}

// kafkaReached replaces r's kafka search with one whose knee, 1,900/s,
// was reached, with the in-flight bound inFlight and the criterion crit
// failing above it.
func kafkaReached(r *driver.Run, inFlight *int, crit string) {
	var rounds []driver.CeilingRound
	for range 3 {
		rounds = append(rounds, driver.CeilingRound{Rate: 1900, Steps: []driver.CeilingStep{kneeStep(1000, 20), kneeStep(1900, 60), kneeStep(2800, 150, crit)}})
	}
	r.Ceilings[1] = kneeCeiling("kafka", kneeSpec(inFlight), rounds...)
	r.Ceilings[1].Status = nil
	r.Validate()
}

// ratioLine is the knee comparison line of KneeSection.
func ratioLine(t *testing.T, section string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^no-kafka ÷ kafka ceiling: .*$`).FindString(section)
	if m == "" {
		t.Fatalf("no comparison line in:\n%s", section)
	}
	return m
}

// timesRE matches a ratio figure ("1.47×").
var timesRE = regexp.MustCompile(`\d×`)

// TestKneeNotReachedIsNoRatioNorBar: a side whose every step passed has
// no knee, so no ratio, no bar and no knee line is drawn from its
// search's top rate; the side that reached its knee has all three; a
// step whose measurement failed is a "failed" mark at its rate, its
// figures (77777 ms) printed and drawn nowhere.
func TestKneeNotReachedIsNoRatioNorBar(t *testing.T) {
	r := kneeFixture()
	sec := KneeSection(r)
	wantContains(t, "knee section", sec,
		"In-flight bound during the searches: MAX_IN_FLIGHT=0 (no bound)",
		"| no-kafka | 2800 (2800–3300) | 2800 3300 2800 | 2800 (2800–3300) | 2800 (2800–3300) | p99 over 100 ms (3 of 3 ceiling searches) |",
		"| kafka | not reached: every step passed up to 16000/s |",
		"#### no-kafka: delivery latency against offered rate",
		"| 4000 | 3 | failed: 5% of the requests failed | failed | failed | 0 of 3 |",
		"| 3300 | 3 | 32.5 (5–35) | 130 (20–140) | 3300 | 1 of 3 | p99 over 100 ms (2) |",
	)
	line := ratioLine(t, sec)
	if !strings.Contains(line, "no ratio: the Kafka side's ceiling is not reached") || timesRE.MatchString(line) {
		t.Errorf("comparison: %s", line)
	}
	if strings.Contains(sec, "77777") || strings.Contains(sec, "19444") {
		t.Errorf("a failed step's figures are printed:\n%s", sec)
	}
	in := newInputs([]*driver.Run{r}, eventstore.Results{})
	if l := ceilingLine(in, "log", "no-kafka", "kafka"); !strings.Contains(l, "no ratio") || timesRE.MatchString(strings.ReplaceAll(l, "5×", "")) {
		t.Errorf("README ceiling line: %s", l)
	}
	if f := ceilingFig(in.rs.ceilingOf("log", "log.ceiling", "kafka")); !f.AtLeast || f.Value != 16000 || !strings.Contains(f.String(), "≥ 16000") {
		t.Errorf("kafka's card figure: %+v", f)
	}

	// The curve: the 4,000/s point is a mark, not a value.
	for _, cp := range kneeCurve(&r.Ceilings[0], "delivery") {
		if cp.rate == 4000 && (cp.invalid == "" || cp.p99.valid(true) || cp.p50.valid(true)) {
			t.Errorf("the failed 4000/s step is drawable: %+v", cp)
		}
		if cp.rate == 2800 && (cp.invalid != "" || cp.p99.y != 14) {
			t.Errorf("2800/s: %+v", cp)
		}
	}

	dir := t.TempDir()
	charts, err := Charts([]*driver.Run{r}, Sources{}, dir)
	if err != nil {
		t.Fatal(err)
	}
	read := func(key string) string {
		t.Helper()
		f, ok := charts[key]
		if !ok {
			t.Fatalf("no %s chart: %v", key, charts)
		}
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	bars := read("ceilings")
	if !strings.Contains(bars, ">not reached<") || strings.Contains(bars, ">16000<") || !strings.Contains(bars, ">2800<") {
		t.Errorf("ceilings chart: want no-kafka's 2800 bar and kafka's \"not reached\" mark, no 16000 bar")
	}
	curve := read("log-rate")
	if !strings.Contains(curve, ">no-kafka ceiling 2800/s") || strings.Contains(curve, ">kafka ceiling") || !strings.Contains(curve, ">kafka p99 (ceiling not reached)<") {
		t.Errorf("latency chart: want no-kafka's knee line only, kafka's series saying its knee was not reached")
	}
	if !strings.Contains(curve, ">"+failedMark+"<") || strings.Contains(curve, "77777") {
		t.Errorf("latency chart: the failed step is not marked, or drawn")
	}
	for _, p := range textProblems(t, filepath.Join(dir, charts["log-rate"])) {
		t.Errorf("log-rate: %s", p)
	}
}

// TestKneeRatioNeedsTheSameCriteria: two reached knees are compared as a
// ratio only when their searches ran to the same criteria; with the
// in-flight bound lifted on one side only, or a step of another length,
// the section prints both figures and says why there is no ratio; a knee
// the admission limit set (503 sheds above it) is no figure either.
func TestKneeRatioNeedsTheSameCriteria(t *testing.T) {
	zero := 0
	r := kneeFixture()
	kafkaReached(r, &zero, scenario.CritP99)
	if got := kneeRatio(r, &r.Ceilings[0], &r.Ceilings[1]); got != "1.47×" {
		t.Errorf("same criteria: %q, want 1.47×", got)
	}
	wantContains(t, "same criteria", ratioLine(t, KneeSection(r)), "1.47×")

	kafkaReached(r, nil, scenario.CritP99)
	sec := KneeSection(r)
	line := ratioLine(t, sec)
	wantContains(t, "in-flight bound differs", line, "no ratio: the two sides were not measured to the same criteria", "in-flight bound")
	if timesRE.MatchString(strings.ReplaceAll(line, "5×", "")) {
		t.Errorf("a ratio across criteria: %s", line)
	}
	wantContains(t, "in-flight bound differs", sec, "| no-kafka | 2800 (2800–3300) |", "| kafka | 1900 |")

	kafkaReached(r, &zero, scenario.CritP99)
	r.Ceilings[1].Spec.StepS = 4
	if got := kneeRatio(r, &r.Ceilings[0], &r.Ceilings[1]); !strings.Contains(got, "step of 3s for no-kafka, 4s for kafka") {
		t.Errorf("steps differ: %q", got)
	}

	kafkaReached(r, &zero, scenario.CritShed)
	if got := kneeRatio(r, &r.Ceilings[0], &r.Ceilings[1]); !strings.Contains(got, "admission limit") || timesRE.MatchString(got) {
		t.Errorf("admission-bound knee: %q", got)
	}
	dir := t.TempDir()
	charts, err := Charts([]*driver.Run{r}, Sources{}, dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, charts["ceilings"]))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), ">admission limit<") || strings.Contains(string(b), ">1900<") {
		t.Errorf("ceilings chart: an admission-bound knee drawn as a bar")
	}

	// An older file: no figures of the criteria, the binding step's
	// reason in words. Its sheds make the knee the admission limit's.
	old := kneeFixture()
	for i := range old.Ceilings {
		old.Ceilings[i].Spec, old.Ceilings[i].Criteria = nil, "fixture criteria"
	}
	old.Ceilings[1] = driver.Ceiling{Scenario: "log.ceiling", Service: "kafka", Criteria: "fixture criteria",
		Rounds: []driver.CeilingRound{{Rate: 1000, Steps: []driver.CeilingStep{{Rate: 1000, Pass: true}, {Rate: 2000, Why: "shed 186 (503 + Retry-After)"}}}},
		Rate:   driver.Aggregate([]float64{1000})}
	old.Validate()
	if got := kneeRatio(old, &old.Ceilings[0], &old.Ceilings[1]); !strings.Contains(got, "admission limit") {
		t.Errorf("old file, shed-bound kafka: %q", got)
	}
}

// TestKeptUpUsesTheCeilingCriteria: a fixed rate at which a side shed
// more than 1% in one round, or whose p99 was over the ceilings' bound,
// is not one it kept up with, though it processed the rate.
func TestKeptUpUsesTheCeilingCriteria(t *testing.T) {
	p := &driver.Point{Scenario: "queue.rate", Name: "2000/s", Rate: 2000, DurationS: 5, Sides: []string{"no-rabbitmq", "rabbitmq"}}
	for i, shed := range []float64{0, 257, 0} {
		p.Rounds = append(p.Rounds, driver.Round{Index: i, Sides: map[string]*driver.SideResult{
			"no-rabbitmq": {Metrics: map[driver.Metric]float64{"throughput": 1998, "client.sent_rate": 2000, "client.shed": 0, "server.processing.p99_ms": 64}},
			"rabbitmq":    {Metrics: map[driver.Metric]float64{"throughput": 1990, "client.sent_rate": 2000, "client.shed": shed, "server.processing.p99_ms": 60}},
		}})
	}
	driver.Summarize(p)
	if !sideKeptUp(p, "no-rabbitmq") {
		t.Errorf("no-rabbitmq kept up: %q", keptUpMiss(p, "no-rabbitmq"))
	}
	if sideKeptUp(p, "rabbitmq") || !strings.Contains(keptUpMiss(p, "rabbitmq"), "shed 2.6% of the requests sent in round 1") {
		t.Errorf("rabbitmq shed 2.6%% in round 1: %q", keptUpMiss(p, "rabbitmq"))
	}
	for i := range p.Rounds {
		p.Rounds[i].Sides["rabbitmq"].Metrics["client.shed"] = 0
		p.Rounds[i].Sides["no-rabbitmq"].Metrics["server.processing.p99_ms"] = 117
	}
	p.Metrics = nil
	driver.Summarize(p)
	if sideKeptUp(p, "no-rabbitmq") || !strings.Contains(keptUpMiss(p, "no-rabbitmq"), "processing p99 117 ms, over the ceilings' 100 ms bound") {
		t.Errorf("p99 over the bound: %q", keptUpMiss(p, "no-rabbitmq"))
	}
	if !sideKeptUp(p, "rabbitmq") {
		t.Errorf("rabbitmq kept up: %q", keptUpMiss(p, "rabbitmq"))
	}
}

// TestSLOCeilingBoundsTheAnswerToo: a search whose spec bounds the
// request's answer (AckLatency) is read at a tighter SLO with both p99s
// under it: a step whose delivery kept up while its write answered
// slower than the SLO does not count at that SLO, and a file without the
// field is read by its delivery alone.
func TestSLOCeilingBoundsTheAnswerToo(t *testing.T) {
	step := func(rate, delivery, write float64) driver.CeilingStep {
		st := kneeStep(rate, delivery)
		st.Metrics["server.write.p99_ms"] = write
		return st
	}
	round := driver.CeilingRound{Rate: 3600, Steps: []driver.CeilingStep{step(2000, 20, 10), step(2800, 30, 60), step(3600, 45, 90)}}
	sp := kneeSpec(nil)
	sp.AckLatency = "write"
	c := kneeCeiling(pairs.Kafka, sp, round, round, round)
	for slo, want := range map[float64]float64{25: 2000, 50: 2000, 100: 3600} {
		if a, ok := sloCeiling(&c, slo); !ok || a.Median != want {
			t.Errorf("p99 < %g ms with the write judged: %+v (ok %v), want %g", slo, a, ok, want)
		}
	}
	old := kneeSpec(nil)
	c = kneeCeiling(pairs.Kafka, old, round, round, round)
	if a, ok := sloCeiling(&c, 50); !ok || a.Median != 3600 {
		t.Errorf("p99 < 50 ms, delivery alone (a file before AckLatency): %+v, want 3600", a)
	}
	if got := ruleText(sp); !strings.Contains(got, "server delivery and write p99 < 100 ms") {
		t.Errorf("rule %q does not name both latencies", got)
	}
}
