package report

import (
	"context"
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
	} {
		if !strings.Contains(s, want) {
			t.Errorf("the section lacks %q:\n%s", want, s)
		}
	}
	if ScaleOutSection(nil) != "" || ScaleOutSection(driver.NewRun("queue", nil, time.Now())) != "" {
		t.Error("a missing scale-out run should render nothing")
	}
}
