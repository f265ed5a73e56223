package report

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/experiments"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/scenario"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// TestEveryClaimEvaluatesOnTheFixture runs each row of claimTable on the
// fixture, which has every scenario the claims read: none may come out
// "not measurable" for lack of data, and with a real MongoDB every claim
// gets a holds / does-not-hold verdict.
func TestEveryClaimEvaluatesOnTheFixture(t *testing.T) {
	pairs := map[string]bool{"queue": true, "log": true, "documents": true, "cache": true}
	for _, s := range claimTable {
		if !pairs[s.pair] || s.short == "" || s.claim == "" || s.rule == "" || s.evaluate == nil {
			t.Errorf("incomplete claim row: %+v", s)
		}
	}
	runs := append(fixture(), withSustain(throughputFixture(), false), scaleOutFixture())
	src := Sources{Raw: notifyFixture(), Experiments: slotFixture(0, 3e6, 3e7)}
	for _, c := range ClaimsFrom(runs, src) {
		if c.Measured == "" || c.Measured == "–" {
			t.Errorf("%s %q: nothing measured on the fixture (%s)", c.Pair, c.Short, c.Why)
		}
		if c.Verdict == NotMeasurable && c.Why != ferretWhy {
			t.Errorf("%s %q: not measurable on the fixture: %s", c.Pair, c.Short, c.Why)
		}
	}
	for _, r := range runs {
		r.Versions.MongoFlavor = ""
	}
	for i, c := range ClaimsFrom(runs, src) {
		if c.Verdict != Holds && c.Verdict != DoesNotHold && c.Verdict != Inconclusive {
			t.Errorf("%s %q with MongoDB: verdict %q (%s)", c.Pair, c.Short, c.Verdict, c.Why)
		}
		if claimTable[i].mongo && c.Measured == "" {
			t.Errorf("%s %q: no measurement against MongoDB", c.Pair, c.Short)
		}
	}
}

// TestClaimsMissOnlyWhatIsMissing gives the claims the queue run alone:
// the queue's claims are decided but those reading the long-lived and
// throughput runs or the raw results, every other one says which scenario
// is missing.
func TestClaimsMissOnlyWhatIsMissing(t *testing.T) {
	fromThroughput := map[string]bool{}
	for _, s := range append(throughputClaims, rawClaims...) {
		fromThroughput[s.short] = true
	}
	fromThroughput[fanoutClaim.short] = true // the scale-out run's
	fromThroughput[designTarget] = true      // decided by the sustainable rate
	for _, c := range Claims(fixture()[:1]) {
		if decided := c.Verdict != NotMeasurable; decided != (c.Pair == "queue" && c.Short != agedShort && !fromThroughput[c.Short]) {
			t.Errorf("%s %q with the queue run only: %s (%s)", c.Pair, c.Short, c.Verdict, c.Why)
		}
	}
}

// TestAgedClaimNeedsAMillionRows: a long-lived run on a smaller history
// (a smoke run's) leaves the claim "not measurable", saying why; over the
// factor it does not hold.
func TestAgedClaimNeedsAMillionRows(t *testing.T) {
	aged := func(runs []*driver.Run) Claim {
		for _, c := range Claims(runs) {
			if c.Short == agedShort {
				return c
			}
		}
		t.Fatal("no aged claim")
		return Claim{}
	}
	runs := fixture()
	runs[3].StartState.HistoryRows = 10_000
	if c := aged(runs); c.Verdict != NotMeasurable || !strings.Contains(c.Why, "10,000 rows of history") {
		t.Errorf("small history: %+v", c)
	}
	runs = fixture()
	for i := range runs[3].Points {
		p := &runs[3].Points[i]
		for _, r := range p.Rounds {
			if s := r.Sides["no-rabbitmq"]; s != nil {
				s.Metrics["server.delivery.p99_ms"] *= 2
			}
		}
		driver.Summarize(p)
	}
	if c := aged(runs); c.Verdict != DoesNotHold || !strings.Contains(c.Measured, "(3×)") {
		t.Errorf("3× slower: %+v", c)
	}
}

// TestOverloadClaimNotMeasurableWhenTheDriverAteTheMachine: a 5× point
// whose load driver used more than DriverShareLimit of the machine's
// cores is "not measurable here", saying so and keeping what was
// measured; at or under the limit, and on results without CPU figures,
// the 80% rule decides.
func TestOverloadClaimNotMeasurableWhenTheDriverAteTheMachine(t *testing.T) {
	spec := overloadClaim("queue", "no-rabbitmq", "processed")
	for _, tc := range []struct {
		name    string
		driver  float64 // 0: no CPU figures (older results)
		pct     float64
		verdict string
	}{
		{"no cpu figures", 0, 42, DoesNotHold},
		{"at the limit", 0.5, 42, DoesNotHold},
		{"over the limit", 0.9, 42, NotMeasurable},
		{"held although the driver was over the limit", 0.9, 144, Holds},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := driver.Point{Scenario: "queue.overload", Name: "5× ceiling", Sides: []string{"no-rabbitmq", "rabbitmq"}}
			m := map[driver.Metric]float64{"pct_of_ceiling": tc.pct, "throughput": 840, "ceiling_rate": 2000, "offered_rate": 10000}
			if tc.driver > 0 {
				m["cores.driver"], m["cores.machine"] = tc.driver, 2
			}
			_ = driver.RunPoint(context.Background(), &p, 1, func(context.Context, string, int) (*driver.SideResult, error) {
				return &driver.SideResult{Metrics: m}, nil
			})
			r := driver.NewRun("queue", nil, time.Now())
			r.Machine.CPUs = 2
			r.Points = []driver.Point{p}
			o := spec.evaluate(claimInputs{rs: runs{"queue": r}})
			c := Claim{Verdict: verdict(o.holds)}
			if o.unmeasurable != "" {
				c.Verdict = NotMeasurable
			}
			if c.Verdict != tc.verdict {
				t.Fatalf("verdict %q (%s), want %q; measured %s", c.Verdict, o.unmeasurable, tc.verdict, o.measured)
			}
			if tc.driver > 0 && !strings.Contains(o.measured, "driver "+num(tc.driver)+" cores, machine 2 of 2") {
				t.Errorf("measured %q lacks the driver's cores", o.measured)
			}
			if tc.verdict == NotMeasurable && (!strings.Contains(o.unmeasurable, "over 25%") || !strings.HasPrefix(o.measured, "42%")) {
				t.Errorf("why %q, measured %q", o.unmeasurable, o.measured)
			}
		})
	}
}

// TestMissingMetricIsAFailedRun renames the queue run's delivery p99 (a
// metric a claim reads) in every point: the claim becomes a failed run
// naming the metric, never a silent "not measurable".
func TestMissingMetricIsAFailedRun(t *testing.T) {
	runs := fixture()
	q := runs[0]
	if q.Command != "queue" {
		t.Fatalf("the fixture's first run is %s, want queue", q.Command)
	}
	for i := range q.Points {
		for j := range q.Points[i].Metrics {
			if q.Points[i].Metrics[j].Name == driver.ServerDeliveryP99 {
				q.Points[i].Metrics[j].Name = "server.delivered.p99_ms"
			}
		}
	}
	found := false
	for _, c := range Claims(runs) {
		if c.Short != "delivery p99 close to RabbitMQ's" {
			continue
		}
		found = true
		if c.Verdict != FailedRun || !strings.Contains(c.Why, string(driver.ServerDeliveryP99)) {
			t.Errorf("claim on a renamed metric: verdict %q (%s), want %q naming %s", c.Verdict, c.Why, FailedRun, driver.ServerDeliveryP99)
		}
	}
	if !found {
		t.Fatal("no delivery p99 claim")
	}
}

// TestMissingMetricIsAFailedFigure: a verdict card's figure whose metric
// a valid point lacks says which metric failed, never "not measured".
func TestMissingMetricIsAFailedFigure(t *testing.T) {
	p := &driver.Point{Scenario: "queue.rate", Name: "1000/s", Sides: []string{"no-rabbitmq", "rabbitmq"},
		Metrics: []driver.MetricSummary{{Name: driver.ClientP99, Sides: map[string]driver.Agg{"no-rabbitmq": {Median: 1, N: 1}, "rabbitmq": {Median: 2, N: 1}}}}}
	if f := pointFigure(p, driver.ClientP99, "no-rabbitmq", " ms"); !f.OK() || f.Value != 1 {
		t.Errorf("a recorded metric: %+v", f)
	}
	f := pointFigure(p, driver.ServerDeliveryP99, "no-rabbitmq", " ms")
	if f.OK() || !strings.Contains(f.String(), "failed: no metric") || !strings.Contains(f.String(), string(driver.ServerDeliveryP99)) {
		t.Errorf("a missing metric: %q, want a failure naming %s", f.String(), driver.ServerDeliveryP99)
	}
}

// slotFixture is an experiments file whose slot-wal-retention run
// retained bytes[i] at 0, 10,000, 50,000… events.
func slotFixture(bytes ...float64) *experiments.File {
	m := map[driver.Metric]float64{}
	for i, b := range bytes {
		m[driver.Metric(fmt.Sprintf("retained_bytes_at_%d", []int{0, 10000, 50000, 100000}[i]))] = b
	}
	return &experiments.File{Results: []experiments.Result{{Name: slotExperiment, Metrics: m}}}
}

// TestScaleOutClaims decides the scale-out claims on the scale-out
// fixture: a Postgres side that served its readers at some N makes "no
// at any load" not hold, saying at which N; served at none, it holds; a
// failed Postgres side is a failed run. The slot claim holds while the
// frozen slot's WAL grows with the events, not when it stays flat.
func TestScaleOutClaims(t *testing.T) {
	find := func(cs []Claim, short string) Claim {
		t.Helper()
		for _, c := range cs {
			if c.Short == short {
				return c
			}
		}
		t.Fatalf("no claim %q", short)
		return Claim{}
	}
	runs := []*driver.Run{scaleOutFixture()}
	cs := ClaimsFrom(runs, Sources{Experiments: slotFixture(0, 3e6, 15e6, 30e6)})
	if c := find(cs, fanoutClaim.short); c.Verdict != DoesNotHold || !strings.Contains(c.Why, "no-rabbitmq served 1, 8 subscribers") ||
		!strings.Contains(c.Measured, "8 subscribers: 200/s each of 200 offered, 0 missing") || strings.Contains(c.Why, "rounds") ||
		!strings.Contains(c.Measured, "1 subscriber: ") || strings.Contains(c.Measured, "1 subscribers") {
		t.Errorf("fan-out served at 1 and 8: %+v", c)
	}
	if c := find(cs, groupsClaim.short); c.Verdict != DoesNotHold || !strings.Contains(c.Why, "no-kafka served 4 groups") ||
		!strings.Contains(c.Measured, "(kafka: 499/s each)") || !strings.Contains(c.Why, "1,000,000 events is not measured") {
		t.Errorf("groups served at 4: %+v", c)
	}
	if c := find(cs, slotClaim.short); c.Verdict != Holds || !strings.Contains(c.Measured, "100,000 events → 30 MB") ||
		!strings.Contains(c.Measured, "4 → 1.23 MB") || !strings.Contains(c.Why, "not in this run") ||
		!strings.Contains(c.Measured, "not consumed for the stopped point's time, no-kafka's slots retained 42 MB (the default group's delivery p99 meanwhile 19 ms)") {
		t.Errorf("slot WAL growing: %+v", c)
	}
	if c := find(ClaimsFrom(runs, Sources{Experiments: slotFixture(0, 3e6, 3e6)}), slotClaim.short); c.Verdict != DoesNotHold {
		t.Errorf("slot WAL flat: %+v", c)
	}
	if c := find(ClaimsFrom(runs, Sources{}), slotClaim.short); c.Verdict != NotMeasurable {
		t.Errorf("no experiment: %+v", c)
	}

	slow := scaleOutFixture()
	for i := range slow.Points {
		p := &slow.Points[i]
		if p.Scenario == scenario.ScaleOutGroups {
			p.Rounds[0].Sides[pairs.NoKafka].Metrics[scenario.MetricGroupDelivered] = 300
			p.Metrics = nil
			driver.Summarize(p)
		}
	}
	if c := find(ClaimsFrom([]*driver.Run{slow}, Sources{}), groupsClaim.short); c.Verdict != Holds || !strings.Contains(c.Measured, "4 groups: 300/s each of 500 offered") {
		t.Errorf("groups short of the offered rate: %+v", c)
	}

	failed := scaleOutFixture()
	for i := range failed.Points {
		if p := &failed.Points[i]; p.Scenario == scenario.ScaleOutFanout {
			p.FailSide(pairs.NoRabbitMQ, "no-rabbitmq fan-out: 503")
		}
	}
	if c := find(ClaimsFrom([]*driver.Run{failed}, Sources{}), fanoutClaim.short); c.Verdict != FailedRun || !strings.Contains(c.Why, "503") {
		t.Errorf("Postgres side failed: %+v", c)
	}
}

// TestClaimsTemplateIsAllRendered checks claims.tmpl against the claims
// declared: every template the file defines is rendered at start, either
// as a claim's "<id> claim" or "<id> rule" or as a part those include
// (template "sustained rule" and the like). A name the code renders that
// the file lacks panics at start (texts), failing every test.
func TestClaimsTemplateIsAllRendered(t *testing.T) {
	if len(claimTextsRendered) < 30 {
		t.Fatalf("%d claims rendered from claims.tmpl, want every claim of the table's", len(claimTextsRendered))
	}
	used := map[string]bool{}
	for id := range claimTextsRendered {
		used[id+" claim"], used[id+" rule"] = true, true
	}
	included := regexp.MustCompile(`\{\{-?\s*template "([^"]+)"`)
	for _, m := range included.FindAllStringSubmatch(claimsTemplateText, -1) {
		used[m[1]] = true
	}
	for _, tm := range claimsTemplate.Templates() {
		if name := tm.Name(); name != claimsTemplate.Name() && !used[name] {
			t.Errorf("claims.tmpl defines %q, which no claim renders", name)
		}
	}
	for _, c := range orderedClaims() {
		if c.claim == "" || c.rule == "" {
			t.Errorf("claim %q (%s) has no claim or rule sentence", c.short, c.pair)
		}
	}
}
