package report

import (
	"context"
	"errors"
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
		p := driver.Point{Scenario: sc, Name: name, Rate: rate, Sides: scenario.QueuePair.Sides()}
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
			return map[string]float64{scenario.MetricFanoutCopies: 200 * float64(n), driver.ClientP99: 3.5, scenario.MetricScaleP99: 12,
				scenario.MetricCPUPerThousand("service"): 0.4, scenario.MetricCPUPerThousand("postgres"): 0.9,
				scenario.MetricFanoutWAL: 410 * float64(n), scenario.MetricFanoutMissing: 0}, nil
		})
	}
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
	} {
		if !strings.Contains(s, want) {
			t.Errorf("the section lacks %q:\n%s", want, s)
		}
	}
	if ScaleOutSection(nil) != "" || ScaleOutSection(driver.NewRun("queue", nil, time.Now())) != "" {
		t.Error("a missing scale-out run should render nothing")
	}
}
