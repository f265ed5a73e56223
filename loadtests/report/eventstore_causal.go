package report

import (
	"fmt"
	"math"
	"strings"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/eventstore"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/scenario"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// The causal claim's thresholds: each is written here once and the
// rule's prose is generated from them (causalRule).
const (
	// causalMinSizes is the valid sizes every fit the claim reads needs.
	causalMinSizes = 4
	// causalScanSlopeMin is the least slope of the single-partition
	// Kafka read's records scanned against the records stored: a scan of
	// the whole store rises one for one.
	causalScanSlopeMin = 0.9
	// causalShareMin is the least share of the single-partition Kafka
	// read's fitted time at the largest store that its slope puts on the
	// records beyond the smallest store.
	causalShareMin = 0.5
	// causalR2Min is the least R² of that fit: a line that explains
	// little of the times decides nothing.
	causalR2Min = 0.8
	// causalPGSlopeMax is the largest Postgres slope, as a share of the
	// single-partition Kafka slope of the same stream: the same growth of
	// the store costs Postgres at most a tenth of what it costs Kafka.
	causalPGSlopeMax = 0.1
)

// causalClaim is the reference's claim the experiment decides.
const causalClaim = "Kafka scans 64× more records than it needs and reads slower (the reference: which share of the time gap the extra records cause is not measured)"

// causalRule is the claim's rule, generated from its thresholds.
var causalRule = fmt.Sprintf("for every read stream, least squares on linear axes over the store's measured records, each fit on ≥ %d valid sizes: "+
	"Kafka (one partition)'s records scanned per read rise ≥ %s per record stored, and its read p50's slope puts ≥ %s of its fitted read time at the largest store on the records beyond the smallest (R² ≥ %s); "+
	"Postgres's slope is ≤ %s× Kafka's",
	causalMinSizes, num(causalScanSlopeMin), percent(causalShareMin), num(causalR2Min), num(causalPGSlopeMax))

// perMillion converts a slope per record into one per million records.
const perMillion = 1e6

// causalSection renders the causal experiment's part of the event store
// section: its setup, one table per read stream (read time and records
// scanned at each size, per engine), the fits and the claim.
func causalSection(c *eventstore.CausalResult) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	o := c.Options
	w("### point read against the store's size: the causal experiment (%s, run %s)\n\n", c.At.Format("2006-01-02 15:04 UTC"), c.RunID)
	w("The reference measured Kafka scanning 64× the records it returned and reading slower, but not which share of the time the extra records cause. ")
	w("Here the same streams (%s events) are read from stores of growing size, everything else equal, on each engine: an instance of its own (no-kurrentdb, kafka-eventstore with one partition, kafka-eventstore keyed on %d partitions) on a store created empty for the run and deleted after it, with `BACKEND_TIMEOUT` %s s on all three. ",
		streamsText(o.Streams), o.KeyedPartitions, num(c.BackendTimeoutS))
	w("Step by step the store is filled up to %s records (-causal-sizes, up to -causal-max %s) with %s other streams' events. %s\n\n", sizesText(o.Run()), count(o.Max), count(int64(o.FillStreams)), md(c.FillMethod))
	w("At each step the store's records are counted after the fill, before the reads (the smallest step holds the read streams alone, %s records, when they exceed it). ", count(sumInts(o.Streams)))
	w("Each engine then reads each stream once untimed, then %d times timed, the engines' order rotated per read; a read is the contract's GET of the whole stream through the service, timed from the request to the answer's last byte (not the client's JSON decoding). p99 is nearest-rank: with fewer than 100 reads, the slowest. ", o.Reads)
	w("Records scanned: Kafka's `records_scanned` (records fetched to find the stream); Postgres's rows visited by the read's scan nodes and its shared buffers, from one EXPLAIN (ANALYZE, BUFFERS) of the service's read statement per step.\n\n")
	if o.Max < eventstore.CausalLadder[len(eventstore.CausalLadder)-1] {
		w("The %s-record step is not in this run: it does not fit `make results`' time budget on 2 cores; `go run ./loadtests eventstore causal -causal-max %d` runs it.\n\n", count(eventstore.CausalLadder[len(eventstore.CausalLadder)-1]), eventstore.CausalLadder[len(eventstore.CausalLadder)-1])
	}
	if c.Aborted != "" {
		w("The run ended early: %s.\n\n", md(c.Aborted))
	}
	causalFills(&b, c)
	causalStreams(&b, c)
	causalFits(&b, c)
	cl := CausalClaim(c)
	w("\n| claim | rule | measured | verdict |\n|---|---|---|---|\n")
	v := cl.Verdict
	if cl.Why != "" {
		v += ": " + cl.Why
	}
	w("| %s | %s | %s | **%s** |\n\n", md(cl.Claim), md(cl.Rule), md(cl.Measured), md(v))
	for _, n := range c.Notes {
		w("- %s\n", md(n))
	}
	if len(c.Notes) > 0 {
		w("\n")
	}
	return b.String()
}

// causalFills writes the table of each step's starting state.
func causalFills(b *strings.Builder, c *eventstore.CausalResult) {
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	if len(c.Fills) > 0 {
		w("Each step's starting state, measured:\n\n| engine | step | records before the fill | added | fill seconds (VACUUM included on Postgres) | records at the reads |\n|---|---|---|---|---|---|\n")
		for _, e := range c.Engines {
			for _, f := range c.Fills {
				if f.Engine != e.Name {
					continue
				}
				if f.Error != "" || f.Records == nil {
					why := f.Error
					if why == "" {
						why = "the store's size was not measured"
					}
					w("| %s | %s | failed: %s | | | |\n", causalEngine(e), count(f.Size), md(why))
					continue
				}
				before := notRecorded
				if f.Before != nil {
					before = count(*f.Before)
				}
				w("| %s | %s | %s | %s | %s | %s |\n", causalEngine(e), count(f.Size), before, count(f.Filled), num(f.FillS), count(*f.Records))
			}
		}
		w("\n")
	}
}

// causalStreams writes one table per stream length: each engine's reads
// at every step.
func causalStreams(b *strings.Builder, c *eventstore.CausalResult) {
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	for _, n := range c.Options.Streams {
		w("#### stream of %s events\n\n", count(int64(n)))
		w("| engine | step | store records (measured) | read p50 (ms) | read p99 (ms) | scanned per read | scanned ÷ matched |\n|---|---|---|---|---|---|---|\n")
		for _, e := range c.Engines {
			for _, r := range c.Rows {
				if r.Engine != e.Name || r.Events != n {
					continue
				}
				if r.Failed != "" {
					w("| %s | %s | failed: %s | | | | |\n", r.Shown(), count(r.Size), md(strings.TrimPrefix(r.Failed, "failed: ")))
					continue
				}
				w("| %s | %s | %s | %s | %s | %s | %s |\n", r.Shown(), count(r.Size), count(*r.Records), num(r.P50MS), num(r.P99MS), scannedText(r), scanRatio(r))
			}
		}
		w("\n")
	}
}

// causalFits writes the fits of read time against the store's size.
func causalFits(b *strings.Builder, c *eventstore.CausalResult) {
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	fits := c.Fits()
	w("#### fits: read time against the store's size\n\n")
	w("Least squares on linear axes, over each engine's valid sizes: read p50 (ms) = intercept + slope × records stored, the slope given per million records; the same for the records scanned per read. The share is the slope's part of the fitted read time at the largest store: slope × (largest − smallest) ÷ fitted time at the largest.\n\n")
	w("| engine | stream | sizes fitted | slope (ms per million records) | intercept (ms) | R² | scanned per record stored | share of the read time due to the records beyond the smallest store |\n|---|---|---|---|---|---|---|---|\n")
	for _, f := range fits {
		if f.Err != "" {
			w("| %s | %s events | failed: %s | | | | | |\n", f.Shown(), count(int64(f.Events)), md(fitFailure(f)))
			continue
		}
		scan := notRecorded
		if f.Scan != nil {
			scan = fmt.Sprintf("%.4f", f.Scan.Slope)
		}
		share := "no share: the fitted time at the largest store is not positive"
		if s := f.GrowthShare(); !math.IsNaN(s) {
			share = percent(s)
		}
		sizes := fmt.Sprint(f.Sizes)
		if len(f.Failed) > 0 {
			sizes += fmt.Sprintf(" (failed: %s)", md(strings.Join(f.Failed, "; ")))
		}
		w("| %s | %s events | %s | %s | %s | %s | %s | %s |\n", f.Shown(), count(int64(f.Events)), sizes, num(f.Time.Slope*perMillion), num(f.Time.Intercept), fmt.Sprintf("%.3f", f.Time.R2), scan, share)
	}
}

// EventStore is the event store's Pair: its section from the bench's
// results, and its claim decided by the causal experiment.
func EventStore() Pair {
	return Pair{Name: pairs.EventStore, Title: eventstore.SectionTitle, runs: eventstore.Commands(), benchSection: EventStoreSection, claims: []string{causalShort},
		card:    pairs.EventStore,
		ceiling: rateSource{EventStoreCeilingCommand, scenario.EventStoreAppendCeiling, "appended one per request"},
		verdict: eventStoreVerdict,
		text: cardText{question: "an append-only table, or KurrentDB (or Kafka)?",
			pgWhen: "appends must check an expected version and events commit with state"},
		findings: &eventStoreFindings}
}

// eventStoreEngines are the event store's services in the order its
// figures are shown: the Postgres side, then KurrentDB, then Kafka.
var eventStoreEngines = []string{pairs.NoKurrentDB, pairs.KurrentDB, pairs.KafkaEventStore}

// causalShort names the causal claim without figures.
const causalShort = "Kafka's point read slows with the records it scans"

// CausalClaim decides the causal claim (causalRule) on c.
func CausalClaim(c *eventstore.CausalResult) Claim {
	cl := Claim{Pair: pairs.EventStore, Claim: causalClaim, Short: causalShort, Rule: causalRule}
	fits := c.Fits()
	find := func(engine string, events int) *eventstore.CausalFit {
		for i := range fits {
			if fits[i].Engine == engine && fits[i].Events == events {
				return &fits[i]
			}
		}
		return nil
	}
	var failed, parts []string
	holds := true
	for _, n := range c.Options.Streams {
		k, pg := find(pairs.KafkaEventStore, n), find(pairs.NoKurrentDB, n)
		for _, f := range []*eventstore.CausalFit{k, pg} {
			switch {
			case f == nil:
				failed = append(failed, fmt.Sprintf("no fit for the %s-event stream", count(int64(n))))
			case f.Err != "" || f.Sizes < causalMinSizes:
				failed = append(failed, fmt.Sprintf("%s, %s-event stream: %d valid sizes of %d needed (%s)", f.Engine, count(int64(n)), f.Sizes, causalMinSizes, fitFailure(*f)))
			}
		}
		if len(failed) > 0 {
			continue
		}
		share := k.GrowthShare()
		scan := math.NaN()
		if k.Scan != nil {
			scan = k.Scan.Slope
		}
		pgOfKafka := math.Inf(1)
		if k.Time.Slope > 0 {
			pgOfKafka = pg.Time.Slope / k.Time.Slope
		}
		ok := scan >= causalScanSlopeMin && share >= causalShareMin && k.Time.R2 >= causalR2Min && pgOfKafka <= causalPGSlopeMax
		holds = holds && ok
		parts = append(parts, fmt.Sprintf("%s-event stream: Kafka scanned %s per record stored, %s ms per million records (R² %.3f), %s of its %s ms fitted at %s records; Postgres %s ms per million records (%s)",
			count(int64(n)), fmt.Sprintf("%.3f", scan), num(k.Time.Slope*perMillion), k.Time.R2, percentOrNone(share), num(k.Time.At(float64(k.MaxRecords))), count(k.MaxRecords),
			num(pg.Time.Slope*perMillion), ratioOrNone(pgOfKafka)))
	}
	switch {
	case len(c.Options.Streams) == 0:
		cl.Verdict, cl.Why = NotMeasurable, "the experiment read no stream"
	case len(failed) > 0:
		cl.Verdict, cl.Why = FailedRun, strings.Join(failed, "; ")
	default:
		cl.Verdict, cl.Measured = verdict(holds), strings.Join(parts, "; ")
	}
	return cl
}

// fitFailure says why f has too few sizes: its error and its failed
// sizes.
func fitFailure(f eventstore.CausalFit) string {
	var parts []string
	if f.Err != "" {
		parts = append(parts, f.Err)
	}
	parts = append(parts, f.Failed...)
	if len(parts) == 0 {
		return fmt.Sprintf("%d valid sizes", f.Sizes)
	}
	return strings.Join(parts, "; ")
}

// scannedText is what one read of r touched.
func scannedText(r eventstore.CausalRow) string {
	switch {
	case r.Scanned == nil:
		return notRecorded
	case r.Buffers != nil:
		return fmt.Sprintf("%s rows, %s buffers (EXPLAIN ANALYZE)", count(*r.Scanned), count(*r.Buffers))
	}
	return count(*r.Scanned) + " records fetched"
}

// scanRatio is r's scanned ÷ the stream's events.
func scanRatio(r eventstore.CausalRow) string {
	if r.Scanned == nil || r.Events == 0 {
		return notRecorded
	}
	return num(float64(*r.Scanned)/float64(r.Events)) + "×"
}

func percentOrNone(v float64) string {
	if math.IsNaN(v) {
		return "no share (the fitted time at the largest store is not positive)"
	}
	return percent(v)
}

func ratioOrNone(v float64) string {
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return "no ratio: Kafka's slope is not positive"
	}
	return num(v) + "× Kafka's"
}

func streamsText(v []int) string {
	var parts []string
	for _, n := range v {
		parts = append(parts, count(int64(n)))
	}
	return strings.Join(parts, ", then ")
}

func sizesText(v []int64) string {
	var parts []string
	for _, n := range v {
		parts = append(parts, count(n))
	}
	return strings.Join(parts, ", ")
}

func sumInts(v []int) int64 {
	var n int64
	for _, x := range v {
		n += int64(x)
	}
	return n
}

// causalEngine is e's name in a table, with its label (CausalRow.Shown).
func causalEngine(e *eventstore.Engine) string {
	if e.Label == "" {
		return e.Name
	}
	return e.Name + ": " + e.Label
}
