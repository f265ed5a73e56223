package report

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/scenario"
)

// scaleOutFixture is a scale-out run with made-up figures: 300/s and a
// batch at 1 and 2 instances, and the kill point, whose rabbitmq side
// failed to start.
func scaleOutFixture() *driver.Run {
	at := time.Date(2026, 1, 2, 5, 0, 0, 0, time.UTC)
	r := driver.NewRun("scaleout", nil, at)
	r.FinishedAt = at.Add(4 * time.Minute)
	r.Settings["workers"], r.Settings["work_ms"], r.Settings["lease_s"], r.Settings["kill_duration_s"] = 8, 20, 5.0, 8.0
	r.Settings["batch_tasks"], r.Settings["batch_size"], r.Settings["senders"] = 4000, 100, 4
	point := func(sc, name string, rate float64, fn func(side string) (map[driver.Metric]float64, error)) {
		sides := scenario.QueuePair.Sides()
		if sc == scenario.ScaleOutGroups || sc == scenario.ScaleOutStopped {
			sides = scenario.LogPair.Sides()
		}
		p := driver.Point{Scenario: driver.ScenarioName(sc), Name: name, Rate: rate, Sides: sides}
		_ = driver.RunPoint(context.Background(), &p, 1, func(_ context.Context, s string, _ int) (*driver.SideResult, error) {
			m, err := fn(s)
			return &driver.SideResult{Metrics: m}, err
		})
		r.Points = append(r.Points, p)
	}
	for _, n := range []int{1, 2} {
		point(scenario.ScaleOutRate, "300/s ×"+string(rune('0'+n)), 300, func(string) (map[driver.Metric]float64, error) {
			m := map[driver.Metric]float64{scenario.MetricScaleProcessed: 299, scenario.MetricScaleP99: 41, scenario.MetricScaleRedelivered: 0, "share.0_pct": 100}
			if n == 2 {
				m["share.0_pct"], m["share.1_pct"] = 61, 39
			}
			return m, nil
		})
		point(scenario.ScaleOutBatch, "4000 tasks ×"+string(rune('0'+n)), 0, func(string) (map[driver.Metric]float64, error) {
			return map[driver.Metric]float64{scenario.MetricScaleProcessed: 390 * float64(n), "share.0_pct": 100 / float64(n)}, nil
		})
	}
	point(scenario.ScaleOutKill, "kill -9 1 of 2", 300, func(side string) (map[driver.Metric]float64, error) {
		if side == "rabbitmq" {
			return nil, context.DeadlineExceeded
		}
		return map[driver.Metric]float64{scenario.MetricKillHeld: 72, scenario.MetricKillP50: 4.2, scenario.MetricKillMax: 5.1, scenario.MetricKillOpen: 0}, nil
	})
	r.Settings["fanout_kind"], r.Settings["fanout_work_ms"], r.Settings["duration_s"] = scenario.FanoutKind, 1, 6.0
	for _, n := range []int{1, 8} {
		point(scenario.ScaleOutFanout, "200/s → "+string(rune('0'+n))+" subscribers", 200, func(side string) (map[driver.Metric]float64, error) {
			if n == 8 && side == "rabbitmq" {
				return nil, errors.New("rabbitmq fan-out: 503")
			}
			return map[driver.Metric]float64{scenario.MetricFanoutSubscribers: float64(n), scenario.MetricFanoutCopies: 200 * float64(n), driver.ClientP99: 3.5, scenario.MetricScaleP99: 12,
				scenario.MetricCPUPerThousand("service"): 0.4, scenario.MetricCPUPerThousand("postgres"): 0.9,
				scenario.MetricFanoutWAL: 410 * float64(n), scenario.MetricFanoutMissing: 0}, nil
		})
	}
	point(scenario.ScaleOutGroups, "500/s → 4 groups", 500, func(side string) (map[driver.Metric]float64, error) {
		m := map[driver.Metric]float64{scenario.MetricGroups: 4, scenario.MetricGroupDelivered: 499, driver.ClientP99: 4.5,
			driver.ServerDeliveryP99: 21, scenario.MetricCPUPerThousand("postgres"): 1.2, scenario.MetricGroupMissing: 0}
		if side == "no-kafka" {
			m[scenario.MetricGroupsSlotBytes] = 1234567
		}
		return m, nil
	})
	r.Settings["stopped_for_s"] = 60.0
	point(scenario.ScaleOutStopped, "500/s → 3 groups, 1 stopped for 60 s", 500, func(side string) (map[driver.Metric]float64, error) {
		if side == "kafka" {
			return nil, errors.New("GET /groups does not list group g2")
		}
		return map[driver.Metric]float64{scenario.MetricGroups: 3, scenario.MetricStoppedFor: 60, scenario.MetricStoppedLagEvents: 30000, scenario.MetricStoppedLagBytes: 41000000,
			scenario.MetricGroupsSlotBytes: 42000000, scenario.MetricGroupDelivered: 500, driver.ServerDeliveryP99: 19,
			scenario.MetricStoppedCatchUp: 3.5, scenario.MetricStoppedAfterBytes: 120000, scenario.MetricStoppedMissing: 0}, nil
	})
	return r
}

// TestScaleOutSection renders the fixture: the figures of valid sides,
// every instance's share, and a failed side in words, never as a figure.
func TestScaleOutSection(t *testing.T) {
	t.Parallel()
	s := ScaleOutSection(scaleOutFixture())
	for _, want := range []string{
		"## " + ScaleOutTitle, "at most 400 tasks/s", "| 300/s ×2 | no-rabbitmq | 299 | 41 | 61% / 39% | 0 |",
		"| 4000 tasks ×2 | rabbitmq | 780 | 50% |", "| kill -9 1 of 2 | no-rabbitmq | 72 | 4.20s | 5.10s | 0 |",
		"| kill -9 1 of 2 | rabbitmq | failed: context deadline exceeded |",
		"200/s such tasks for 6 s", "| 200/s → 8 subscribers | no-rabbitmq | 1600 | 3.50 | 12 | 0.40 | 0.90 | not recorded | 3280 | 0 |",
		"| 200/s → 8 subscribers | rabbitmq | failed: rabbitmq fan-out: 503 |",
		"**Consumer groups** (log pair)", "offered 500/s single `POST /events`",
		"| 500/s → 4 groups | no-kafka | 499 | 4.50 | 21 | not recorded | 1.20 | not recorded | 1234567 | 0 |",
		"| 500/s → 4 groups | kafka | 499 | 4.50 | 21 | not recorded | 1.20 | not recorded | no slots | 0 |",
		"nothing reads it for 60 s of 500/s single `POST /events`",
		"| 500/s → 3 groups, 1 stopped for 60 s | no-kafka | 30000 | 41000000 | 42000000 | 500 | 19 | 3.50 s | 120000 | 0 |",
		"| 500/s → 3 groups, 1 stopped for 60 s | kafka | failed: GET /groups does not list group g2 |",
		"**Takeover** (log pair): not in this run",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("the section lacks %q:\n%s", want, s)
		}
	}
	// A run from before the fan-out and groups points says so, with no
	// setting printed as a Go zero value.
	old := scaleOutFixture()
	old.Points = slices.DeleteFunc(old.Points, func(p driver.Point) bool {
		return p.Scenario == scenario.ScaleOutFanout || p.Scenario == scenario.ScaleOutGroups
	})
	delete(old.Settings, "fanout_kind")
	so := ScaleOutSection(old)
	for _, want := range []string{"**Fan-out**: not in this run", "**Consumer groups** (log pair): not in this run"} {
		if !strings.Contains(so, want) {
			t.Errorf("the section of an older run lacks %q:\n%s", want, so)
		}
	}
	if strings.Contains(so, "%!") || strings.Contains(so, "<nil>") {
		t.Errorf("the section of an older run prints a missing setting:\n%s", so)
	}
	if ScaleOutSection(nil) != "" || ScaleOutSection(driver.NewRun("queue", nil, time.Now())) != "" {
		t.Error("a missing scale-out run should render nothing")
	}
}

// fanoutSearchFixture adds to r the fan-out search's settings and
// points with made-up figures: at 1 subscriber no-rabbitmq passed 6,000
// published/s and failed 8,000 (its backlog of copies grew), rabbitmq
// passed the ladder's top; at 8 subscribers rabbitmq's search found no
// rate; the cursors design at 1 subscriber, on no-rabbitmq only.
func fanoutSearchFixture(r *driver.Run) {
	r.Settings["workers"] = 8
	r.Settings[scenario.FanoutSustainSetting] = scenario.FanoutSustainDefaults.Settings()
	r.Settings[scenario.FanoutSustainWorkSetting] = 0
	step := func(m map[driver.Metric]float64, i int, offered, copies float64, pass bool) {
		for k, v := range map[driver.Metric]float64{scenario.MetricOffered: offered, scenario.MetricCopies: copies, driver.ClientRequests: offered * 8 / 100,
			"sent_per_s": offered, "flat_bound": copies * 0.25 * offered, "window_s": 8, "p99_count": 100, "p99_ms": 35} {
			m[scenario.StepMetric(i, k)] = v
		}
		if !pass {
			m[scenario.StepMetric(i, "backlog_growth")] = copies * offered
			m[scenario.StepMetric(i, "stopped_early")] = 1
			m[scenario.StepMetric(i, scenario.MetricIntake)] = copies * offered * 0.7
		}
	}
	search := func(name string, sides []string, fn func(side string) (map[driver.Metric]float64, error)) {
		p := driver.Point{Scenario: scenario.ScaleOutFanoutSustain, Name: name, DurationS: 10, Sides: sides}
		_ = driver.RunPoint(context.Background(), &p, 1, func(_ context.Context, s string, _ int) (*driver.SideResult, error) {
			m, err := fn(s)
			return &driver.SideResult{Metrics: m}, err
		})
		r.Points = append(r.Points, p)
	}
	search("1 subscriber", scenario.QueuePair.Sides(), func(side string) (map[driver.Metric]float64, error) {
		m := map[driver.Metric]float64{scenario.MetricFanoutSubscribers: 1, scenario.MetricSteps: 3, "at." + scenario.MetricIntake: 5990, "at.p99_ms": 35}
		if side == "rabbitmq" {
			m[scenario.MetricSustainable], m[scenario.MetricCapped] = 16000, 1
			return m, nil
		}
		m[scenario.MetricSustainable], m[scenario.MetricFirstFail], m[scenario.MetricCapped] = 6000, 8000, 0
		step(m, 0, 4000, 1, true)
		step(m, 1, 8000, 1, false)
		step(m, 2, 6000, 1, true)
		return m, nil
	})
	search("1 subscriber, cursors", []string{"no-rabbitmq"}, func(string) (map[driver.Metric]float64, error) {
		return map[driver.Metric]float64{scenario.MetricFanoutSubscribers: 1, scenario.MetricSteps: 2, scenario.MetricSustainable: 4000,
			scenario.MetricFirstFail: 8000, scenario.MetricCapped: 0, "at." + scenario.MetricIntake: 3995, "at.p99_ms": 20}, nil
	})
	r.Points[len(r.Points)-1].Env = map[string]map[string]string{"no-rabbitmq": {"FANOUT_DESIGN": "cursors"}}
	search("8 subscribers", scenario.QueuePair.Sides(), func(side string) (map[driver.Metric]float64, error) {
		if side == "rabbitmq" {
			return map[driver.Metric]float64{scenario.MetricSteps: 4}, errors.New("no offered rate down to 63 items/s kept the backlog flat")
		}
		return map[driver.Metric]float64{scenario.MetricFanoutSubscribers: 8, scenario.MetricSteps: 2, scenario.MetricSustainable: 750,
			scenario.MetricFirstFail: 1000, scenario.MetricCapped: 0, "at." + scenario.MetricIntake: 5998, "at.p99_ms": 41}, nil
	})
}

// TestScaleOutFanoutSearch renders the fan-out search's part: the
// criteria and the copies ladder from the run's settings, per number of
// subscribers, side and design (in a table against N too: a side a
// point lacks is "not run") the sustainable published rate (≥ when
// the ladder's top passed), the copies processed and their p99 at it,
// the failing step's reason read from its figures, a search that found
// no rate as "failed: <reason>", never as a figure; and a run without
// the search's points (every run before it) says it is not in the run.
func TestScaleOutFanoutSearch(t *testing.T) {
	t.Parallel()
	r := scaleOutFixture()
	fanoutSearchFixture(r)
	s := ScaleOutSection(r)
	for _, want := range []string{
		"**Fan-out: sustainable published rate**: per number of subscribers", "under 1,000 ms", "(8 workers of 1 ms)", "in batches of 100 tasks",
		"from 2,000 copies/s ×2 up to 32,000 copies/s, 2 bisection(s)", "(8 workers of 0 ms,", "fall up to 3% behind",
		"| 1 subscriber | no-rabbitmq | 6000 | 5990 | 35 | round 0: 6000, 8000 failed (backlog grew 8000 items in 8 s (flat: ≤ 2000), processing 5600/s) |",
		"| 1 subscriber | rabbitmq | ≥ 16000 (the ladder's top passed) | 5990 | 35 | round 0: 16000+ |",
		"| 1 subscriber, cursors | no-rabbitmq | 4000 | 3995 | 20 | round 0: 4000, 8000 failed |",
		"Rows named \", cursors\" are no-rabbitmq with `FANOUT_DESIGN=cursors`, searched the same way.",
		"| 8 subscribers | no-rabbitmq | 750 | 5998 | 41 |",
		"| 8 subscribers | rabbitmq | failed: no offered rate down to 63 items/s kept the backlog flat |",
		"| subscribers | no-rabbitmq | rabbitmq | no-rabbitmq, cursors |",
		"| 1 subscriber | 6000 | ≥ 16000 (the ladder's top passed) | 4000 |",
		"| 8 subscribers | 750 | failed: no offered rate down to 63 items/s kept the backlog flat | not run |",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("the section lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "%!") {
		t.Errorf("a verb without its value:\n%s", s)
	}
	// Without the search's settings (a hand-made run), the intro says so
	// instead of printing zero values.
	delete(r.Settings, scenario.FanoutSustainSetting)
	if s := ScaleOutSection(r); !strings.Contains(s, "from not recorded copies/s") || strings.Contains(s, "%!") {
		t.Errorf("a run without the search's settings:\n%s", s)
	}
	old := ScaleOutSection(scaleOutFixture())
	if !strings.Contains(old, "**Fan-out: sustainable published rate**: not in this run (`results/") || strings.Contains(old, "| 1 subscriber |") {
		t.Errorf("a run without the search's points:\n%s", old)
	}
}
