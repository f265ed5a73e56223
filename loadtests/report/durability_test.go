package report

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/resultfile"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/scenario"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// durabilityFixture is a durability run of two configurations on the
// PostgreSQL version (server_version) given: the Postgres queue side
// measured, its search capped; Kafka with acks=all whose fixed point
// failed (its search not run).
func durabilityFixture(version string) *driver.Run {
	run := driver.NewRun(scenario.DurabilityCommand, nil, time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC))
	run.Settings["rate"] = 200.0
	run.Settings[scenario.DurabilityServerSetting] = version
	ok := &driver.SideResult{Service: pairs.NoRabbitMQ, Metrics: map[driver.Metric]float64{
		driver.ClientP50: 4.2, driver.ClientP99: 12, driver.ServerProcessingP50: 30, driver.ServerProcessingP99: 80,
		scenario.MetricCPUPerThousand(scenario.DurabilityServiceGroup): 0.5, scenario.MetricCPUPerThousand("pg2"): 0.1,
		scenario.MetricCPUPerThousand("pg1"): 1.25, scenario.MetricCPUPerThousand("total"): 1.85, scenario.MetricSyncStandbys: 0,
	}, Phases: []driver.Phase{{Name: "send", Client: driver.ClientResult{Requests: 2000, OK: 2000}}}}
	search := &driver.SideResult{Service: pairs.NoRabbitMQ, Metrics: map[driver.Metric]float64{scenario.MetricSustainable: 16000, scenario.MetricCapped: 1}}
	bad := &driver.SideResult{Service: pairs.Kafka, Metrics: map[driver.Metric]float64{}, Error: "kafka is not up on :8083"}
	notRun := &driver.SideResult{Service: pairs.Kafka, Metrics: map[driver.Metric]float64{}, Error: "not run: the fixed point failed"}
	point := func(sc, name string, r *driver.SideResult) driver.Point {
		return driver.Point{Scenario: driver.ScenarioName(sc), Name: name, Sides: []string{r.Service},
			Rounds: []driver.Round{{Order: []string{r.Service}, Sides: map[string]*driver.SideResult{r.Service: r}}}}
	}
	run.Points = []driver.Point{
		point(string(scenario.DurabilityScenarioName(pairs.Queue)), "synchronous_commit=on", ok),
		point(string(scenario.DurabilitySustainName(pairs.Queue)), "synchronous_commit=on", search),
		point(string(scenario.DurabilityScenarioName(pairs.Log)), "KAFKA_ACKS=all", bad),
		point(string(scenario.DurabilitySustainName(pairs.Log)), "KAFKA_ACKS=all", notRun),
	}
	run.Validate()
	return run
}

func TestDurabilitySection(t *testing.T) {
	md := DurabilitySection([]DurabilityPart{{Run: durabilityFixture("15.18"), File: "20261203T120000Z-durability.json", PGMajor: 15}})
	if strings.Contains(md, "#### ") {
		t.Errorf("one run, yet a heading per version:\n%s", md)
	}
	for _, want := range []string{
		"### " + DurabilityTitle,
		"Postgres 15.18, fixed rate 200/s",
		"| queue | no-rabbitmq | `synchronous_commit=on` | 4.20 / 12 ms | 30 / 80 ms | ≥ 16000 (the search's top) | 0.50 | pg1 1.25 · pg2 0.10 | 1.85 |",
		"| log | kafka | `KAFKA_ACKS=all` | failed: kafka is not up on :8083 |",
		"In 1 configuration(s) no synchronous standby was streaming",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("section lacks %q:\n%s", want, md)
		}
	}
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(line, "| log |") && strings.Count(line, " | ")+2 != 10 {
			t.Errorf("a failed row has the wrong number of cells: %s", line)
		}
		if strings.HasPrefix(line, "| queue |") && strings.Contains(line, " 0 ") {
			t.Errorf("a zero where a figure should be: %s", line)
		}
	}
}

// TestDurabilityNotMeasured: no file, and a file without figures, each
// say so and why, never zeros.
func TestDurabilityNotMeasured(t *testing.T) {
	if md := DurabilitySection(nil); !strings.Contains(md, "No results file of the durability scenario") {
		t.Errorf("no file:\n%s", md)
	}
	run := driver.NewRun(scenario.DurabilityCommand, nil, time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC))
	run.Aborted = "not measured: " + errors.New("the cluster profile's kafka not running").Error()
	md := DurabilitySection([]DurabilityPart{{Run: run, File: "x-durability.json"}})
	if !strings.Contains(md, "Not measured (`results/x-durability.json`, 2026-12-03 12:00 UTC): not measured: the cluster profile's kafka not running") || strings.Contains(md, "| queue |") {
		t.Errorf("not measured:\n%s", md)
	}
}

// TestDurabilityPartsOnePerVersion: the newest run with figures of each
// PostgreSQL version is shown, lowest version first, under a heading of
// its own; a newer run without figures hides none of them, and is shown
// alone only when no run has figures.
func TestDurabilityPartsOnePerVersion(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, run *driver.Run) {
		t.Helper()
		if _, err := resultfile.Write(dir, name, run); err != nil {
			t.Fatal(err)
		}
	}
	empty := driver.NewRun(scenario.DurabilityCommand, nil, time.Date(2026, 12, 3, 14, 0, 0, 0, time.UTC))
	empty.Aborted = "not measured: the cluster profile's postgres not running"
	write("20261203T140000Z-durability.json", empty)
	if parts, err := LoadDurabilityParts(dir); err != nil || len(parts) != 1 || parts[0].Measured() || parts[0].File != "20261203T140000Z-durability.json" {
		t.Fatalf("only a file without figures: %+v, %v", parts, err)
	}
	old15 := durabilityFixture("15.17")
	old15.Settings["rate"] = 100.0
	write("20261203T100000Z-durability.json", old15)
	write("20261203T110000Z-durability.json", durabilityFixture("18.4"))
	write("20261203T120000Z-durability.json", durabilityFixture("15.18 (Debian 15.18-0+deb12u1)"))
	parts, err := LoadDurabilityParts(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range parts {
		got = append(got, fmt.Sprintf("%d %s", p.PGMajor, p.File))
	}
	if want := []string{"15 20261203T120000Z-durability.json", "18 20261203T110000Z-durability.json"}; !slices.Equal(got, want) {
		t.Fatalf("parts = %q, want %q", got, want)
	}
	md := DurabilitySection(parts)
	i15, i18 := strings.Index(md, "#### PostgreSQL 15"), strings.Index(md, "#### PostgreSQL 18")
	if i15 < 0 || i18 < i15 || strings.Count(md, "| queue | no-rabbitmq |") != 2 || strings.Contains(md, "fixed rate 100/s") || strings.Contains(md, "Not measured") {
		t.Errorf("section:\n%s", md)
	}
	q := loseNothingText(pairs.Queue, parts)
	if !strings.Contains(q, "Postgres 15, a synchronous standby, acknowledged p99 12 ms") || !strings.Contains(q, "Postgres 18, a synchronous standby") ||
		strings.Count(q, "RabbitMQ, quorum queues") != 1 {
		t.Errorf("lose nothing: %q", q)
	}
}

// windowedRun is a durability run of the Postgres queue side under
// synchronous_commit on and local, a window of each per round, with the
// acknowledgement p99s given (on's, local's) per window.
func windowedRun(p99s ...[2]float64) *driver.Run {
	run := driver.NewRun(scenario.DurabilityCommand, nil, time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC))
	run.Settings["rate"] = 200.0
	run.Settings["duration_s"] = 30.0
	run.Settings[scenario.DurabilityServerSetting] = "15.18"
	point := func(name string, k int) driver.Point {
		p := driver.Point{Scenario: scenario.DurabilityScenarioName(pairs.Queue), Name: name, Sides: []string{pairs.NoRabbitMQ}}
		for i, w := range p99s {
			p.Rounds = append(p.Rounds, driver.Round{Index: i, Order: p.Sides, Sides: map[string]*driver.SideResult{pairs.NoRabbitMQ: {
				Service: pairs.NoRabbitMQ, Metrics: map[driver.Metric]float64{driver.ClientP50: 2, driver.ClientP99: w[k],
					scenario.MetricCPUPerThousand("total"): 1 + float64(i), scenario.MetricSyncStandbys: 1},
				Phases: []driver.Phase{{Name: "send", Client: driver.ClientResult{Requests: 6000, OK: 6000}}}}}})
		}
		driver.Summarize(&p)
		return p
	}
	run.Points = []driver.Point{point("synchronous_commit=on", 0), point("synchronous_commit=local", 1)}
	run.Validate()
	return run
}

// TestDurabilityWindows: the table gives medians with the p99's and
// the CPU total's range over the windows, and the card claims a
// difference between two settings only when every window agrees on its
// sign (issue 40: no price read off one window).
func TestDurabilityWindows(t *testing.T) {
	agree := windowedRun([2]float64{14, 10}, [2]float64{20, 11}, [2]float64{12, 9})
	md := DurabilitySection([]DurabilityPart{{Run: agree, File: "x-durability.json", PGMajor: 15}})
	for _, want := range []string{"fixed rate 200/s in 3 windows of 30 s",
		"| queue | no-rabbitmq | `synchronous_commit=on` | 2 / 14 ms (p99 12–20) |",
		"| 2 (1–3) |"} {
		if !strings.Contains(md, want) {
			t.Errorf("section lacks %q:\n%s", want, md)
		}
	}
	q := loseNothingText(pairs.Queue, []DurabilityPart{{Run: agree, PGMajor: 15}})
	if want := "Postgres 15, a synchronous standby, acknowledged p99 14 ms (windows 12–20 ms) (`synchronous_commit=local`: 10 ms (windows 9–11 ms); higher in each of the 3 windows)"; !strings.Contains(q, want) {
		t.Errorf("agreeing windows: %q lacks %q", q, want)
	}
	split := windowedRun([2]float64{14, 10}, [2]float64{8, 11}, [2]float64{12, 9})
	if q := loseNothingText(pairs.Queue, []DurabilityPart{{Run: split, PGMajor: 15}}); !strings.Contains(q, "higher in 2 of 3 windows: no difference is claimed") || strings.Contains(q, "each of") {
		t.Errorf("disagreeing windows: %q", q)
	}
	one := windowedRun([2]float64{14, 10})
	if q := loseNothingText(pairs.Queue, []DurabilityPart{{Run: one, PGMajor: 15}}); !strings.Contains(q, "1 window each: no difference is claimed") {
		t.Errorf("one window: %q", q)
	}
}
