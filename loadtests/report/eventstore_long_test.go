package report

import (
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/eventstore"
)

// esFixturePoint is a point of one round whose sides answered res.
func esFixturePoint(scenario driver.ScenarioName, name string, sides []string, res map[string]*driver.SideResult) driver.Point {
	p := driver.Point{Scenario: scenario, Name: name, Sides: sides, Rounds: []driver.Round{{Order: sides, Sides: res}}}
	for svc, s := range res {
		s.Service = svc
		if s.Metrics == nil {
			s.Metrics = map[driver.Metric]float64{}
		}
	}
	driver.Summarize(&p)
	return p
}

// longFixture is an eventstore-long run at 2,000 events: Postgres
// measured, KurrentDB not reached, Kafka's paged read failed with a 503
// after one request (its partial figures must not print), its other
// loads measured.
func longFixture() *driver.Run {
	run := driver.NewRun(eventstore.LongCommand, nil, time.Date(2026, 12, 1, 23, 0, 0, 0, time.UTC))
	run.Settings["engines"] = []*eventstore.Engine{{Name: "no-kurrentdb", Backend: "postgres", Up: true},
		{Name: "kurrentdb", Backend: "kurrentdb", Why: "connection refused"},
		{Name: "kafka-eventstore", Backend: "kafka", Label: eventstore.ReferenceLabel, Partitions: 1, Up: true}}
	o := eventstore.DefaultLongOptions()
	o.Sizes, o.Loads = []int{2000}, 1
	run.Settings["options"] = o
	sides := []string{"no-kurrentdb", "kurrentdb", "kafka-eventstore"}
	name := eventstore.SizeName(2000)
	notRun := func() *driver.SideResult {
		return &driver.SideResult{Error: "not measured here: connection refused"}
	}
	run.Points = []driver.Point{
		esFixturePoint(eventstore.LongFillPoint, name, sides, map[string]*driver.SideResult{
			"no-kurrentdb":     {Metrics: map[driver.Metric]float64{"fill_s": 1.25, "event_appends": 3, "event_append_ms": 380, "snapshots": 1, "snapshot_append_ms": 4.5, "snapshot_overhead_pct": 0.39}},
			"kurrentdb":        notRun(),
			"kafka-eventstore": {Metrics: map[driver.Metric]float64{"fill_s": 0.4, "event_appends": 3, "event_append_ms": 120, "snapshots": 1, "snapshot_append_ms": 3.25, "snapshot_overhead_pct": 0.9}},
		}),
		esFixturePoint(eventstore.LongFoldPoint, name, sides, map[string]*driver.SideResult{
			"no-kurrentdb": {Metrics: map[driver.Metric]float64{"read_ms": 812, "requests": 1, "events_folded": 2000, "records_touched": 2001,
				"service_rss_before_mb": 30, "service_rss_after_mb": 41, "service_rss_peak_mb": 44.5, "bench_alloc_mb": 3.5, "bench_rss_peak_mb": 20}},
			"kurrentdb":        notRun(),
			"kafka-eventstore": {Metrics: map[driver.Metric]float64{"read_ms": 10004, "requests": 1}, Error: "read of tank-long-x-2000 from version 0 answered 503: backend timeout"},
		}),
		esFixturePoint(eventstore.LongStatePoint, name, sides, map[string]*driver.SideResult{
			"no-kurrentdb":     {Metrics: map[driver.Metric]float64{"read_ms": 95, "requests": 1, "events_folded": 2000}},
			"kurrentdb":        notRun(),
			"kafka-eventstore": {Metrics: map[driver.Metric]float64{"read_ms": 300, "requests": 1, "events_folded": 2000, "records_scanned": 2001}},
		}),
		esFixturePoint(eventstore.LongSnapshotPoint, name, sides, map[string]*driver.SideResult{
			"no-kurrentdb":     {Metrics: map[driver.Metric]float64{"read_ms": 3.5, "requests": 3, "events_folded": 1000, "tail_events": 1000, "snapshot_version": 999, "records_touched": 1003}},
			"kurrentdb":        notRun(),
			"kafka-eventstore": {Metrics: map[driver.Metric]float64{"read_ms": 45, "requests": 3, "events_folded": 1000, "tail_events": 1000, "snapshot_version": 999, "records_scanned": 6003}},
		}),
	}
	run.Note("kafka-eventstore: service memory not measured: no socket listens on port 8091 on this machine")
	return run
}

// cleanupFixture is an eventstore-cleanup run: the Postgres delete
// measured, Kafka's retention not returning space within its bound, its
// compaction measured.
func cleanupFixture() *driver.Run {
	run := driver.NewRun(eventstore.CleanupCommand, nil, time.Date(2026, 12, 1, 23, 5, 0, 0, time.UTC))
	run.Settings["engines"] = []*eventstore.Engine{{Name: "no-kurrentdb", Backend: "postgres", Up: true}}
	o := eventstore.DefaultCleanupOptions()
	o.StreamEvents, o.Batch = 2000, 500
	run.Settings["options"] = o
	pg := map[driver.Metric]float64{"delete_s": 0.42, "batches": 4, "delete_wal_mb": 1.9, "size_before_mb": 12, "size_after_delete_mb": 12, "size_after_vacuum_mb": 11.5,
		"returned_mb": 0.5, "vacuum_s": 0.2, "vacuum_wal_mb": 0.3, "live_sent": 80, "live_received": 80, "live_failed": 0}
	for _, ph := range []string{"baseline", "delete"} {
		pg[eventstore.CleanupMetric(eventstore.AppendOf, ph, "n")], pg[eventstore.CleanupMetric(eventstore.AppendOf, ph, "p50_ms")], pg[eventstore.CleanupMetric(eventstore.AppendOf, ph, "p99_ms")], pg[eventstore.CleanupMetric(eventstore.AppendOf, ph, "max_ms")] = 40, 1.5, 6, 7
		pg[eventstore.CleanupMetric(eventstore.DeliverOf, ph, "p50_ms")], pg[eventstore.CleanupMetric(eventstore.DeliverOf, ph, "max_ms")] = 2.5, 9
	}
	run.Points = []driver.Point{
		esFixturePoint(eventstore.CleanupPGPoint, eventstore.SizeName(2000), []string{"no-kurrentdb"}, map[string]*driver.SideResult{"no-kurrentdb": {Metrics: pg}}),
		esFixturePoint(eventstore.CleanupKafkaPoint, eventstore.KafkaRetention, []string{eventstore.KafkaSide}, map[string]*driver.SideResult{eventstore.KafkaSide: {
			Metrics: map[driver.Metric]float64{"dir_mb_before": 3, "dir_mb_after": 3, "customer_before": 2000, "customer_after": 2000},
			Error:   "the log directory still held 3.0 of 3.0 MB after 5m30s (the broker checks retention every 5m0s: log.retention.check.interval.ms)"}}),
		esFixturePoint(eventstore.CleanupKafkaPoint, eventstore.KafkaCompaction, []string{eventstore.KafkaSide}, map[string]*driver.SideResult{eventstore.KafkaSide: {
			Metrics: map[driver.Metric]float64{"space_returned_s": 16.5, "first_change_s": 16.5, "dir_mb_before": 3, "dir_mb_after": 0.25, "customer_before": 2000, "customer_after": 0,
				"others_before": 200, "others_after": 10, "partial_views": 0}}}),
	}
	return run
}

// TestEventStoreLongRendering: the long-stream and cleanup runs, written
// and read back as results files, render every figure of a valid side,
// "failed: <reason>" and no figure for a failed one, "not run here" for
// an engine the bench did not reach, what snapshots saved, and that the
// 1,000,000-event size was not run.
func TestEventStoreLongRendering(t *testing.T) {
	dir := t.TempDir()
	for _, run := range []*driver.Run{longFixture(), cleanupFixture()} {
		run.FinishedAt = run.StartedAt.Add(time.Minute)
		if _, err := driver.WriteRun(dir, run); err != nil {
			t.Fatal(err)
		}
	}
	es, err := eventstore.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if es.Long == nil || es.Cleanup == nil {
		t.Fatalf("Load read long %v, cleanup %v", es.Long != nil, es.Cleanup != nil)
	}
	md := eventStoreSection(es)
	wantContains(t, "section", md,
		"### long streams (2026-12-01 23:00 UTC)",
		"The issue's 1,000,000-event stream is not in this run",
		"| no-kurrentdb | 1.25 | 3 | 380 | 1 | 4.50 | 0.39% |",
		"| kurrentdb | not run here | | | | | |",
		"| no-kurrentdb | paged read | 812 | 1 | 2000 | 2001 | 30 → 41 (44.5) | 3.50 (20) |",
		"| no-kurrentdb | from snapshot | 3.50 | 3 | 1000 after the snapshot at version 999 | 1003 |",
		"| kafka-eventstore: Kafka, one partition (reference) | paged read | failed: read of tank-long-x-2000 from version 0 answered 503: backend timeout | | | | | |",
		"| kafka-eventstore: Kafka, one partition (reference) | service fold | 300 | 1 | 2000 | 2001 | not recorded |",
		"| kurrentdb | from snapshot | not run here |",
		"- no-kurrentdb: the load from the snapshot took 3.50 ms against 812 ms for the paged read (232×); writing the snapshots added 0.39% to the stream's append time.",
		"- kafka-eventstore: service memory not measured",
		"### cleanup: deleting one customer's stream (2026-12-01 23:05 UTC)",
		"| 0.42 | 4 | 1.90 | 12 → 12 → 11.5 | 0.50 | 0.20 | 0.30 |",
		"| baseline | 40 | 1.50 | 6 | 7 | 2.50 | 9 |",
		"| vacuum | not recorded (no append completed in this phase) |",
		"The live subscriber received 80 of the 80 appends.",
		"| retention | failed: the log directory still held 3.0 of 3.0 MB after 5m30s",
		"| compaction | 16.5 | 16.5 | 3 → 0.25 | 2000 → 0 | 200 → 10 | 0 |")
	if strings.Contains(md, "10004") {
		t.Errorf("the failed paged read prints its partial time:\n%s", md)
	}
	if strings.Contains(md, "kafka-eventstore: Kafka, one partition (reference): the load from the snapshot") {
		t.Errorf("a saving is computed from a failed paged read:\n%s", md)
	}
	_, retention, _ := strings.Cut(md, "| retention |")
	retention, _, _ = strings.Cut(retention, "\n")
	if strings.Contains(retention, "2000") || strings.Contains(retention, "| 3 ") {
		t.Errorf("the failed retention row prints figures: %s", retention)
	}
}

// TestEventStoreLongAbsent: without the long-stream and cleanup runs the
// section has neither subsection, and a section of them alone renders.
func TestEventStoreLongAbsent(t *testing.T) {
	if s := eventStoreLongSections(eventstore.Results{}); s != "" {
		t.Errorf("no runs rendered %q", s)
	}
	md := eventStoreSection(eventstore.Results{Cleanup: cleanupFixture()})
	if !strings.Contains(md, "## "+eventstore.SectionTitle) || !strings.Contains(md, "### cleanup") || strings.Contains(md, "### long streams") {
		t.Errorf("a cleanup run alone rendered:\n%s", md)
	}
}
