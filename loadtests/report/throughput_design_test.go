package report

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/scenario"
)

// TestPgoutputBesideWal2json: a throughput run with no-kafka's pgoutput
// design shows, in the log pair's part, no-kafka with wal2json (its
// points of the pair) and with pgoutput side by side at each batch size,
// closed loop with CPU-s per 1,000 events, and sustainable with the
// delivery p50/p99 at that rate; the pair's own tables and claims never
// read the design's points. A design that failed, or a run without it,
// says so in place of its figures.
func TestPgoutputBesideWal2json(t *testing.T) {
	t.Parallel()
	r := throughputFixture()
	d := scenario.LogPgoutputThroughput
	side := d.Pair.A.Name
	closed := driver.Point{Scenario: scenario.DesignScenarioName(scenario.ThroughputScenarioName(d.Pair.Name), d.Design.Name), Name: scenario.BatchLabel(100), DurationS: 3, Sides: []string{side}}
	_ = driver.RunPoint(context.Background(), &closed, 2, func(context.Context, string, int) (*driver.SideResult, error) {
		return &driver.SideResult{Metrics: map[driver.Metric]float64{scenario.MetricAccepted: 77000, scenario.MetricEndToEnd: 99999, "drained": 1, "settle_s": 2,
			"server.delivery.p50_ms": 5, "server.delivery.p99_ms": 55, "cpu.service.per_1k": 0.07, "cpu.postgres.per_1k": 0.9, "cpu.total.per_1k": 0.97}}, nil
	})
	sustain := func(name string, rate float64) driver.Point {
		p := driver.Point{Scenario: driver.ScenarioName(name), Name: scenario.BatchLabel(100), DurationS: 30, Sides: []string{side}}
		_ = driver.RunPoint(context.Background(), &p, 1, func(context.Context, string, int) (*driver.SideResult, error) {
			return &driver.SideResult{Metrics: map[driver.Metric]float64{scenario.MetricSustainable: rate, "at.p50_ms": 6, "at.p99_ms": 61}}, nil
		})
		return p
	}
	r.Points = append(r.Points, closed,
		sustain(string(scenario.SustainScenarioName(d.Pair.Name)), 21000),
		sustain(string(scenario.DesignScenarioName(scenario.SustainScenarioName(d.Pair.Name), d.Design.Name)), 44000))
	r.Settings[scenario.DesignsSetting] = map[string]scenario.DesignOutcome{d.Design.Name: {Side: side, Env: d.Design.Env}}
	s := ThroughputSection(r)
	if os.Getenv("SHOW_REPORT") != "" {
		t.Log(s)
	}
	wantContains(t, "section", s, "### Log: no-kafka's decoding plugin, wal2json vs pgoutput",
		"`SLOT_NAME="+scenario.PgoutputSlot+"` `SLOT_PLUGIN=pgoutput`",
		"| 100, wal2json | no-kafka | 40100 (40000–40200) | 20050 (20000–20100) |",
		"| 100, pgoutput | no-kafka | 77000 | 99999 | 5 / 55 | not recorded / not recorded | 0.070 | 0.90 |",
		"| 100 | wal2json | 21000 |", "| 100 | pgoutput | 44000 |", "| 6 / 61 |")
	if strings.Contains(s, "| 1, pgoutput |") || strings.Contains(s, "failed:") || strings.Contains(s, "not measured: this throughput run") {
		t.Errorf("a batch size the design did not measure shows a row, or a measured design is said missing:\n%s", s)
	}
	// The pair's own figures keep their points: no-kafka's best
	// end-to-end rate is wal2json's, never the design's 99,999.
	if best, _ := bestE2E(runs{"throughput": r}, d.Pair.Name, side, 100); best != 40050 {
		t.Errorf("no-kafka's best end-to-end rate %v, want wal2json's 40050", best)
	}

	r.Settings[scenario.DesignsSetting] = map[string]scenario.DesignOutcome{d.Design.Name: {Side: side, Error: "no-kafka on :8084 needs map[SLOT_PLUGIN:pgoutput] but is running outside the driver"}}
	wantContains(t, "failed design", ThroughputSection(r), "**pgoutput**: failed: no-kafka on :8084 needs")
	older := ThroughputSection(throughputFixture())
	wantContains(t, "older run", older, "**pgoutput**: not measured: this throughput run did not measure it")
	if strings.Contains(older, "| 100, wal2json |") {
		t.Errorf("no design point, yet wal2json's rows are repeated:\n%s", older)
	}
}
