package report

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/eventstore"
)

// causalResult is a fixture of the causal experiment: two streams, the
// default four sizes, Kafka's single partition reading in time linear in
// the store (ms per record kafkaMS), the keyed side a quarter of that,
// Postgres flat; failed names engine@size rows that failed.
func causalResult(kafkaMS float64, failed ...string) *eventstore.CausalResult {
	o := eventstore.DefaultCausalOptions()
	o.KeyedPartitions = 8
	c := &eventstore.CausalResult{RunID: "20261201T230000Z-eventstore-causal", At: time.Date(2026, 12, 1, 23, 0, 0, 0, time.UTC), Options: o,
		FillMethod: eventstore.CausalFillMethod, BackendTimeoutS: 25,
		Engines: []*eventstore.Engine{{Name: "no-kurrentdb", Backend: "postgres"},
			{Name: "kafka-eventstore", Backend: "kafka", Label: eventstore.ReferenceLabel, Partitions: 1},
			{Name: eventstore.KeyedName, Backend: "kafka", Label: eventstore.KeyedLabel(8), Partitions: 8}}}
	prev := int64(11_000)
	for _, size := range o.Run() {
		records := max(size, 11_000)
		for _, e := range c.Engines {
			before := prev
			f := eventstore.CausalFill{Engine: e.Name, Size: size, Before: &before, Records: &records, Filled: records - before, FillS: 1.5}
			c.Fills = append(c.Fills, f)
		}
		prev = records
	}
	for _, n := range o.Streams {
		for _, size := range o.Run() {
			for _, e := range c.Engines {
				records := max(size, 11_000)
				r := eventstore.CausalRow{Engine: e.Name, Label: e.Label, Backend: e.Backend, Events: n, Size: size, Records: &records}
				for _, f := range failed {
					if f == fmt.Sprintf("%s@%d", e.Name, size) {
						r.Failed = "read causal-x-read-1000: answered 503: kafka fetch: context deadline exceeded"
					}
				}
				if r.Failed == "" {
					x := float64(records)
					scanned := x
					switch e.Name {
					case "no-kurrentdb":
						r.P50MS, r.P99MS = 3+float64(n)/1000, 4+float64(n)/1000
						scanned = float64(n + 1)
						buffers := int64(n/50 + 4)
						r.Buffers = &buffers
					case "kafka-eventstore":
						r.P50MS, r.P99MS = 5+kafkaMS*x, 6+kafkaMS*x
					default:
						r.P50MS, r.P99MS = 5+kafkaMS*x/8, 6+kafkaMS*x/8
						scanned = x / 8
					}
					s := int64(scanned)
					r.Scanned = &s
					r.ReadsMS = []float64{r.P50MS, r.P99MS}
				}
				c.Rows = append(c.Rows, r)
			}
		}
	}
	return c
}

// TestCausalSection renders the experiment with the keyed side's read at
// 1 M failed: one table per stream with every engine and size, the
// measured store sizes, the records scanned (Kafka's fetched, Postgres's
// rows and buffers), the failed row as "failed: <reason>" with no
// figure, the fits (the failed size left out and named), the claim with
// its generated rule, and the 5 M step said to be a flag.
func TestCausalSection(t *testing.T) {
	t.Parallel()
	c := causalResult(0.0015, eventstore.KeyedName+"@1000000")
	out := eventStoreSection(eventstore.Results{Causal: c})
	wantContains(t, "causal section", out,
		"## "+eventstore.SectionTitle+"\n",
		"### point read against the store's size: the causal experiment (2026-12-01 23:00 UTC, run 20261201T230000Z-eventstore-causal)",
		"1,000, then 10,000 events", "10,000, 100,000, 300,000, 1,000,000 records", "`BACKEND_TIMEOUT` 25 s",
		"| no-kurrentdb | 100,000 | 11,000 | 89,000 | 1.50 | 100,000 |", "| kafka-eventstore-keyed: Kafka, keyed, 8 partitions | 10,000 | 11,000 | 0 | 1.50 | 11,000 |",
		"#### stream of 1,000 events", "#### stream of 10,000 events",
		"| kafka-eventstore: Kafka, one partition (reference) | 10,000 | 11,000 | 21.5 | 22.5 | 11,000 records fetched | 11× |",
		"| kafka-eventstore: Kafka, one partition (reference) | 1,000,000 | 1,000,000 | 1505 | 1506 | 1,000,000 records fetched | 1000× |",
		"| no-kurrentdb | 300,000 | 300,000 | 4 | 5 | 1,001 rows, 24 buffers (EXPLAIN ANALYZE) | 1.00× |",
		"| kafka-eventstore-keyed: Kafka, keyed, 8 partitions | 1,000,000 | failed: read causal-x-read-1000: answered 503: kafka fetch: context deadline exceeded | | | | |",
		"#### fits: read time against the store's size",
		"| kafka-eventstore: Kafka, one partition (reference) | 1,000 events | 4 | 1500 | ",
		"| kafka-eventstore-keyed: Kafka, keyed, 8 partitions | 1,000 events | 3 (failed: 1000000: failed: read causal-x-read-1000",
		"| no-kurrentdb | 10,000 events | 4 | 0 | 13 | 1.000 | 0.0000 | 0% |",
		"The 5,000,000-record step is not in this run", "-causal-max 5000000",
		"| **holds** |")
	if strings.Contains(out, "| kafka-eventstore-keyed: Kafka, keyed, 8 partitions | 1,000,000 | 1,000,000") {
		t.Error("the failed keyed read has figures")
	}
	if !strings.Contains(out, md(causalRule)) {
		t.Error("the claim's row lacks its rule")
	}
	c.Fills[0].Error, c.Fills[0].Records = "COPY into eventstore_causal_x.events: connection reset", nil
	wantContains(t, "causal section with a failed fill", eventStoreSection(eventstore.Results{Causal: c}),
		"| no-kurrentdb | 10,000 | failed: COPY into eventstore_causal_x.events: connection reset | | | |")
	c.Options.Max = 5_000_000
	if strings.Contains(eventStoreSection(eventstore.Results{Causal: c}), "is not in this run") {
		t.Error("a run with 5 M still says 5 M is missing")
	}
}

// TestCausalClaim decides the claim on the fixture's variants: it holds
// when Kafka's time follows its scan and Postgres stays flat, does not
// hold when Kafka's time does not grow, and is a failed run, naming the
// failed size, when Kafka's fit has fewer than causalMinSizes sizes; the
// rule's text is generated from its thresholds.
func TestCausalClaim(t *testing.T) {
	t.Parallel()
	for _, want := range []string{fmt.Sprintf("≥ %d valid sizes", causalMinSizes), "≥ " + num(causalScanSlopeMin) + " per record stored",
		"≥ " + percent(causalShareMin), "R² ≥ " + num(causalR2Min), "≤ " + num(causalPGSlopeMax) + "×"} {
		if !strings.Contains(causalRule, want) {
			t.Errorf("rule %q lacks %q", causalRule, want)
		}
	}
	cl := CausalClaim(causalResult(0.0015))
	if cl.Verdict != Holds || !strings.Contains(cl.Measured, "1,000-event stream: Kafka scanned 1.000 per record stored, 1500 ms per million records") {
		t.Errorf("linear Kafka: %+v", cl)
	}
	if !strings.Contains(cl.Measured, "Postgres 0 ms per million records (0× Kafka's)") {
		t.Errorf("linear Kafka, Postgres part: %s", cl.Measured)
	}
	if cl := CausalClaim(causalResult(0)); cl.Verdict != DoesNotHold || !strings.Contains(cl.Measured, "(no ratio: Kafka's slope is not positive)") {
		t.Errorf("flat Kafka: %+v", cl)
	}
	cl = CausalClaim(causalResult(0.0015, "kafka-eventstore@300000"))
	if cl.Verdict != FailedRun || !strings.Contains(cl.Why, "kafka-eventstore, 1,000-event stream: 3 valid sizes of 4 needed") || !strings.Contains(cl.Why, "300000: failed: read causal-x-read-1000: answered 503") {
		t.Errorf("a failed Kafka size: %+v", cl)
	}
	// A failed keyed size does not decide the claim, which does not read it.
	if cl := CausalClaim(causalResult(0.0015, eventstore.KeyedName+"@300000")); cl.Verdict != Holds {
		t.Errorf("a failed keyed size: %+v", cl)
	}
}
