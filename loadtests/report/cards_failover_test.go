package report

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/experiments"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

func TestFailoverLineSaysWhatWasLostAndWhatFailed(t *testing.T) {
	f := &experiments.File{Results: []experiments.Result{
		{Name: experiments.RabbitMQLeaderKill, Metrics: map[driver.Metric]float64{"acked": 1000, "acked_lost": 0, "publish_resume_s": 0.2, "publish_resumed": 1}},
		{Name: experiments.RabbitMQLeaderCut, Metrics: map[driver.Metric]float64{"acked": 500, "acked_lost": 0, "publish_resumed": 0}},
		{Name: experiments.KafkaLeaderKill, Error: "no broker answered"},
		{Name: experiments.KafkaLeaderCut, Settings: map[string]string{"cases": "isolate.acks_all,isolate.acks_1"}, Metrics: map[driver.Metric]float64{
			"isolate.acks_all.acked": 800, "isolate.acks_all.appends_resume_s": 29,
			"isolate.acks_1.acked": 2000, "isolate.acks_1.lost": 1260, "isolate.acks_1.appends_resume_s": 26}},
	}}
	files := []experiments.ClusterPart{{File: f}}
	q := failoverText(pairs.Queue, files)
	for _, want := range []string{"RabbitMQ: 0 of 1,500 acknowledged writes lost, 0 phantom, 0 duplicated over 2 faults", "writes back after 0.20 s (after 1 fault: not back within the run)"} {
		if !strings.Contains(q, want) {
			t.Errorf("queue: %q lacks %q", q, want)
		}
	}
	l := failoverText(pairs.Log, files)
	for _, want := range []string{"kafka-leader-kill: failed: no broker answered", "Kafka, acks=all: 0 of 800", "Kafka, acks=1: 1,260 of 2,000 acknowledged writes lost, 0 phantom, 0 duplicated over 1 fault", "a loss these settings allow"} {
		if !strings.Contains(l, want) {
			t.Errorf("log: %q lacks %q", l, want)
		}
	}
	if got := failoverText(pairs.Cache, files); got != "" {
		t.Errorf("cache has no failover experiment, got %q", got)
	}
	if got := failoverText(pairs.Queue, nil); !strings.Contains(got, "not measured") {
		t.Errorf("no file: %q", got)
	}
}

func TestFailoverChartMarksWhatHasNoFigure(t *testing.T) {
	f := &experiments.File{Results: []experiments.Result{
		{Name: experiments.RabbitMQLeaderKill, Metrics: map[driver.Metric]float64{"acked": 1000, "publish_resume_s": 0.2, "publish_resumed": 1}},
		{Name: experiments.RabbitMQLeaderCut, Metrics: map[driver.Metric]float64{"acked": 500, "publish_resumed": 0}},
		{Name: experiments.KafkaLeaderKill, Error: "no broker answered"},
		{Name: experiments.KafkaLeaderCut, Settings: map[string]string{"cases": "cut.acks_all"}, Metrics: map[driver.Metric]float64{"cut.acks_all.acked": 10, "cut.acks_all.appends_resume_s": 15}},
	}}
	path := filepath.Join(t.TempDir(), failoverFile)
	ok, err := failoverChart([]experiments.ClusterPart{{File: f}}, path)
	if err != nil || !ok {
		t.Fatalf("drawn %v, %v", ok, err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"not back", failedMark, "RabbitMQ"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("chart lacks %q", want)
		}
	}
	if ok, err := failoverChart(nil, path); ok || err != nil {
		t.Errorf("no files: drawn %v, %v", ok, err)
	}
}

func TestLoseNothingPricesEachSideOrSaysWhy(t *testing.T) {
	run := []DurabilityPart{{Run: durabilityFixture("15.18"), PGMajor: 15}}
	q := loseNothingText(pairs.Queue, run)
	for _, want := range []string{"Postgres 15, a synchronous standby, acknowledged p99 12 ms, but with no synchronous standby streaming (`synchronous_commit=local`: not measured; no difference is claimed without both)",
		"RabbitMQ, quorum queues, acknowledged p99 not measured"} {
		if !strings.Contains(q, want) {
			t.Errorf("queue: %q lacks %q", q, want)
		}
	}
	if l := loseNothingText(pairs.Log, run); !strings.Contains(l, "Kafka, acks=all, acknowledged p99 failed: kafka is not up on :8083") {
		t.Errorf("log: %q", l)
	}
	if got := loseNothingText(pairs.Queue, []DurabilityPart{{Run: &driver.Run{Aborted: "not measured: the cluster profile is not running"}}}); got != "not measured: the cluster profile is not running" {
		t.Errorf("aborted: %q", got)
	}
	if got := loseNothingText(pairs.Cache, run); got != "" {
		t.Errorf("cache: %q", got)
	}
}

func TestFailoverLineKeepsAnAllowedLossApart(t *testing.T) {
	pg := func(name string, lost, phantom float64) experiments.Result {
		return experiments.Result{Name: name, AckedLost: int64(lost), LossDocumented: name == experiments.PGFailoverAsync && lost > 0,
			Metrics: map[driver.Metric]float64{"server_version_num": 150018,
				"queue.acked": 100, "queue.lost": lost, "queue.phantom": phantom, "queue.duplicated": 1, "queue.writes_resume_s": 4}}
	}
	f := &experiments.File{Results: []experiments.Result{pg(experiments.PGSwitchover, 0, 0), pg(experiments.PGFailoverSync, 2, 0), pg(experiments.PGFailoverAsync, 40, 38)}}
	got := failoverText(pairs.Queue, []experiments.ClusterPart{{File: f}})
	want := "Postgres 15: 2 of 200 acknowledged writes lost, 0 phantom, 2 duplicated over 2 faults (switchover; primary killed, synchronous standby promoted), writes back after 4 s; " +
		"40 of 100 acknowledged writes lost, 38 phantom, 1 duplicated over 1 fault (primary killed, asynchronous standby promoted), a loss these settings allow, writes back after 4 s"
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	// The table counts the same way: the 38 phantoms are among the 40
	// lost, never added to them (the 78 a file once said).
	if cell, want := LostCell(f.Results[2]), "**40 lost (documented loss)**; **38 phantom (documented loss)**; 1 duplicated"; cell != want {
		t.Errorf("async cell %q, want %q", cell, want)
	}
	if cell, want := LostCell(f.Results[1]), "**2 lost (a loss that must not happen)**; 0 phantom; 1 duplicated"; cell != want {
		t.Errorf("sync cell %q, want %q", cell, want)
	}
}

// TestRepeatedFaultsReadAsRanges: an experiment run three times
// (experiments.Repeat) is one fault ×3 on the card, its writes-back
// range spanning the runs; the table has a row per run and writes a note
// the runs share once; the chart's bar is the median run, its whiskers
// the fastest and the slowest.
func TestRepeatedFaultsReadAsRanges(t *testing.T) {
	var rs []experiments.Result
	for i, back := range []float64{0.2, 3, 1} {
		rs = append(rs, experiments.Result{Name: experiments.RabbitMQLeaderKill, Round: i + 1,
			Metrics: map[driver.Metric]float64{"acked": 100, "acked_lost": 0, "phantom": 0, "duplicated": 1, "publish_resume_s": back, "publish_resumed": 1}})
	}
	f := &experiments.File{Results: rs}
	parts := []experiments.ClusterPart{{File: f}}
	q := failoverText(pairs.Queue, parts)
	// Notes as a schema 1 file holds them: one the runs share, one of
	// the second run alone.
	tabled := slices.Clone(rs)
	for i := range tabled {
		tabled[i].Notes = []string{"lost = answered 202 and not done"}
	}
	tabled[1].Notes = append(tabled[1].Notes, "the second run's own note")
	if want := "RabbitMQ: 0 of 300 acknowledged writes lost, 0 phantom, 3 duplicated over 3 faults (quorum queue's leader killed ×3), writes back after 0.20–3 s"; q != want {
		t.Errorf("card\n got  %q\n want %q", q, want)
	}
	var b strings.Builder
	experimentsTable(&b, &experiments.File{Results: tabled}, "x-failover.json", "lost")
	table := b.String()
	for _, run := range []string{"(`rabbitmq-quorum-leader-kill`, run 1,", "(`rabbitmq-quorum-leader-kill`, run 3,"} {
		if !strings.Contains(table, run) {
			t.Errorf("table lacks a row %q:\n%s", run, table)
		}
	}
	if n := strings.Count(table, "lost = answered 202 and not done"); n != 1 {
		t.Errorf("the runs' shared note written %d times, want once:\n%s", n, table)
	}
	if !strings.Contains(table, "- `rabbitmq-quorum-leader-kill`, run 2: the second run's own note") {
		t.Errorf("the second run's note is not marked as its own:\n%s", table)
	}
	var runs []failCase
	for _, r := range rs {
		runs = append(runs, failCasesOf(pairs.Queue, []experiments.ClusterPart{{File: &experiments.File{Results: []experiments.Result{r}}}})...)
	}
	if v := failXY(runs, 0); v.y != 1 || v.lo != 0.2 || v.hi != 3 || v.failed != "" {
		t.Errorf("chart point %+v, want the median 1 s from 0.2 to 3 s", v)
	}
	if v := failXY([]failCase{{failed: "down"}, {back: false}}, 0); v.failed != "not back" {
		t.Errorf("one run failed, the other not back: %+v", v)
	}
}

// TestKafkaPhantomIsNeverDocumented: acks=1 documents the loss of a
// write the leader acknowledged alone, never a phantom (consumers read
// only up to the high watermark): the cell marks one as a loss that must
// not happen.
func TestKafkaPhantomIsNeverDocumented(t *testing.T) {
	r := experiments.Result{Name: experiments.KafkaLeaderCut, AckedLost: 5, LossDocumented: true,
		Settings: map[string]string{"cases": "isolate.acks_1"},
		Metrics:  map[driver.Metric]float64{"isolate.acks_1.acked": 100, "isolate.acks_1.lost": 5, "isolate.acks_1.phantom": 1}}
	if cell, want := LostCell(r), "**5 lost (documented loss)**; **1 phantom (a loss that must not happen)**; 0 duplicated"; cell != want {
		t.Errorf("cell %q, want %q", cell, want)
	}
}

// TestWrapLabelsBreaksAtSpaces: the failover chart's fault names break at
// spaces into lines of about the width, a long word whole on its line.
func TestWrapLabelsBreaksAtSpaces(t *testing.T) {
	got := wrapLabels([]string{"switchover", "primary killed, synchronous standby promoted"}, 11)
	want := []string{"switchover", "primary\nkilled,\nsynchronous\nstandby\npromoted"}
	if !slices.Equal(got, want) {
		t.Errorf("wrapLabels = %q, want %q", got, want)
	}
}

// TestPartitionedPrimaryPhantomIsAllowedBefore17: a primary cut off from
// its standbys (pg-auto-isolate) decodes for its logical slot commits no
// standby has, before PostgreSQL 17: no-kafka's consumer on it delivers
// writes the promoted standby never had. Those phantoms are a loss the
// settings allow on 15 (the cell and the card say so); on 17 one is not,
// nor is a lost acknowledged write on any version.
func TestPartitionedPrimaryPhantomIsAllowedBefore17(t *testing.T) {
	isolate := func(version, lost, phantom float64) experiments.Result {
		return experiments.Result{Name: experiments.PGAutoIsolate, AckedLost: int64(lost),
			Metrics: map[driver.Metric]float64{"server_version_num": version,
				"log.acked": 500, "log.lost": lost, "log.phantom": phantom, "log.duplicated": 6, "log.writes_resume_s": 59}}
	}
	r := isolate(150018, 0, 50)
	if cell, want := LostCell(r), "0 lost; **50 phantom (documented loss)**; 6 duplicated"; cell != want {
		t.Errorf("15: cell %q, want %q", cell, want)
	}
	if why := experiments.PhantomAllowed(r); !strings.Contains(why, "synchronized_standby_slots") {
		t.Errorf("15: the reason %q does not name what closes it", why)
	}
	if got := failoverText(pairs.Log, []experiments.ClusterPart{{File: &experiments.File{Results: []experiments.Result{r}}}}); !strings.Contains(got, "50 phantom") || !strings.Contains(got, "a loss these settings allow") {
		t.Errorf("15: card %q does not call the phantoms allowed", got)
	}
	if cell, want := LostCell(isolate(170002, 0, 50)), "0 lost; **50 phantom (a loss that must not happen)**; 6 duplicated"; cell != want {
		t.Errorf("17: cell %q, want %q", cell, want)
	}
	lost := isolate(150018, 2, 50)
	if got := failoverText(pairs.Log, []experiments.ClusterPart{{File: &experiments.File{Results: []experiments.Result{lost}}}}); strings.Contains(got, "a loss these settings allow") {
		t.Errorf("15 with 2 acknowledged writes lost: card %q calls the loss allowed", got)
	}
	if cell := LostCell(lost); !strings.Contains(cell, "2 lost (a loss that must not happen)") {
		t.Errorf("15 with 2 lost: cell %q", cell)
	}
}

// TestNoStallIsNotARecoveryTime: a fault that stopped no write (a
// standby cut off from a quorum of two: the longest gap 0.04 s, ending
// 20.6 s after the fault) reads as writes back at once, not after 20.6 s.
func TestNoStallIsNotARecoveryTime(t *testing.T) {
	r := experiments.Result{Name: experiments.PGAutoStandbyCut,
		Metrics: map[driver.Metric]float64{"server_version_num": 150018,
			"queue.acked": 100, "queue.writes_resume_s": 20.65, "queue.writes_stall_s": 0.04}}
	got := failoverText(pairs.Queue, []experiments.ClusterPart{{File: &experiments.File{Results: []experiments.Result{r}}}})
	if strings.Contains(got, "20.6") || !strings.Contains(got, "writes back after 0.04") {
		t.Errorf("card %q: a gap of 0.04 s is no recovery after 20.6 s", got)
	}
}
