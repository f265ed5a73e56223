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
	point := func(sc, name string, rate float64, fn func(side string) (map[string]float64, error)) {
		sides := scenario.QueuePair.Sides()
		if sc == scenario.ScaleOutGroups || sc == scenario.ScaleOutStopped {
			sides = scenario.LogPair.Sides()
		}
		p := driver.Point{Scenario: sc, Name: name, Rate: rate, Sides: sides}
		_ = driver.RunPoint(context.Background(), &p, 1, func(_ context.Context, s string, _ int) (*driver.SideResult, error) {
			m, err := fn(s)
			return &driver.SideResult{Metrics: m}, err
		})
		r.Points = append(r.Points, p)
	}
	for _, n := range []int{1, 2} {
		point(scenario.ScaleOutRate, "300/s ×"+string(rune('0'+n)), 300, func(string) (map[string]float64, error) {
			m := map[string]float64{scenario.MetricScaleProcessed: 299, scenario.MetricScaleP99: 41, scenario.MetricScaleRedelivered: 0, "share.0_pct": 100}
			if n == 2 {
				m["share.0_pct"], m["share.1_pct"] = 61, 39
			}
			return m, nil
		})
		point(scenario.ScaleOutBatch, "4000 tasks ×"+string(rune('0'+n)), 0, func(string) (map[string]float64, error) {
			return map[string]float64{scenario.MetricScaleProcessed: 390 * float64(n), "share.0_pct": 100 / float64(n)}, nil
		})
	}
	point(scenario.ScaleOutKill, "kill -9 1 of 2", 300, func(side string) (map[string]float64, error) {
		if side == "rabbitmq" {
			return nil, context.DeadlineExceeded
		}
		return map[string]float64{scenario.MetricKillHeld: 72, scenario.MetricKillP50: 4.2, scenario.MetricKillMax: 5.1, scenario.MetricKillOpen: 0}, nil
	})
	r.Settings["fanout_kind"], r.Settings["fanout_work_ms"], r.Settings["duration_s"] = scenario.FanoutKind, 1, 6.0
	for _, n := range []int{1, 8} {
		point(scenario.ScaleOutFanout, "200/s → "+string(rune('0'+n))+" subscribers", 200, func(side string) (map[string]float64, error) {
			if n == 8 && side == "rabbitmq" {
				return nil, errors.New("rabbitmq fan-out: 503")
			}
			return map[string]float64{scenario.MetricFanoutSubscribers: float64(n), scenario.MetricFanoutCopies: 200 * float64(n), driver.ClientP99: 3.5, scenario.MetricScaleP99: 12,
				scenario.MetricCPUPerThousand("service"): 0.4, scenario.MetricCPUPerThousand("postgres"): 0.9,
				scenario.MetricFanoutWAL: 410 * float64(n), scenario.MetricFanoutMissing: 0}, nil
		})
	}
	point(scenario.ScaleOutGroups, "500/s → 4 groups", 500, func(side string) (map[string]float64, error) {
		m := map[string]float64{scenario.MetricGroups: 4, scenario.MetricGroupDelivered: 499, driver.ClientP99: 4.5,
			driver.ServerDeliveryP99: 21, scenario.MetricCPUPerThousand("postgres"): 1.2, scenario.MetricGroupMissing: 0}
		if side == "no-kafka" {
			m[scenario.MetricGroupsSlotBytes] = 1234567
		}
		return m, nil
	})
	r.Settings["stopped_for_s"] = 60.0
	point(scenario.ScaleOutStopped, "500/s → 3 groups, 1 stopped for 60 s", 500, func(side string) (map[string]float64, error) {
		if side == "kafka" {
			return nil, errors.New("GET /groups does not list group g2")
		}
		return map[string]float64{scenario.MetricGroups: 3, scenario.MetricStoppedFor: 60, scenario.MetricStoppedLagEvents: 30000, scenario.MetricStoppedLagBytes: 41000000,
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
