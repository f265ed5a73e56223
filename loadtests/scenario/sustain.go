package scenario

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
)

// Sustainable throughput (issue 21 item 3). The closed-loop throughput
// points measure how fast a side accepts batches; what it processes
// meanwhile, with senders that outrun its workers, is a backlog draining,
// not a rate it sustains. The sustainable rate is the highest offered
// rate, open loop and batched, at which the backlog stays flat over a
// step and the end-to-end p99 (send→processed, write→delivered) stays
// under SustainSLO.

// The sustainable search's criteria, written once: the report prints
// them from here.
const (
	// SustainSLO bounds a passing step's end-to-end p99 (send→processed,
	// write→delivered). One second: far above this machine's floors (a
	// queue p99 sits near 50 ms on both sides at low rates, a delivery p99
	// near 15 ms), so that the floor never decides a step, and far below
	// the 10–15 s p50 of a draining backlog (the closed-loop points of
	// 1 Dec 2026), so that no backlog passes. A reader who needs tighter
	// latency gets a lower rate than the one printed.
	SustainSLO = time.Second
	// FlatArrivals bounds a flat backlog: over a step's measured window
	// the backlog may grow by at most this many seconds of arrivals at the
	// offered rate (and at least FlatMinBatches batches). A quarter second
	// over a 25 s window lets processing fall 1% behind the offered rate,
	// about the noise of an instantaneous read of the counters (the items
	// in flight are about rate × p50); anything that falls further behind
	// is a backlog growing.
	FlatArrivals = 0.25
	// FlatMinBatches is the least growth bound, in batches: at low rates
	// one batch in flight is already a quarter second of arrivals.
	FlatMinBatches = 2
	// StarvedShare flags a step whose processing during the intake fell
	// under this share of what the side was offered (or of the highest
	// rate it passed in the same search, when lower) while its backlog
	// grew: the workers starved instead of keeping up to their capacity.
	StarvedShare = 0.5
	// OverGoal is the least share of its sustainable rate a side must
	// keep processing while it is offered SustainOver times that rate in
	// batches (issue 21's "no collapse under batch intake").
	OverGoal = 0.8
	// SustainOver is the overload point's multiple of the sustainable
	// rate.
	SustainOver = 2.0
	// earlyFailAfter and earlyFailFactor end a step early, after the
	// warm-up and earlyFailAfter of its window, once its backlog has
	// grown earlyFailFactor times the flat bound: its trend is plain, and
	// every further second only adds backlog to drain.
	earlyFailAfter  = 5 * time.Second
	earlyFailFactor = 4
	// sustainDescents is how many times a search divides the rate by the
	// ladder's factor when its first rate fails.
	sustainDescents = 3
	// SendShare is the least share of the offered rate the driver must
	// send for a step to count (the driver's own limit otherwise).
	SendShare = 0.95
)

// Metric names of the sustainable points. A search's SideResult holds
// the search's outcome and, per step i, "step<i>.<name>" with the step's
// figures (StepMetric).
const (
	// MetricSustainable is the highest offered items/s that passed
	// (absent when none did: the round is failed).
	MetricSustainable = "sustainable_per_s"
	// MetricFirstFail is the lowest offered rate above it that failed
	// (absent when the search stopped at its ladder's top: MetricCapped).
	MetricFirstFail = "first_fail_per_s"
	MetricCapped    = "capped"
	// MetricStarved is 1 when a step of the search starved
	// (StarvedShare), MetricStarvedAt its offered rate and
	// MetricStarvedProcessed what it processed per second meanwhile.
	MetricStarved          = "starved"
	MetricStarvedAt        = "starved_at_per_s"
	MetricStarvedProcessed = "starved_processed_per_s"
	// MetricSteps counts the steps of the search.
	MetricSteps = "steps"
	// MetricOffered is the items/s offered, MetricIntake the items/s
	// processed (or delivered) during the intake after its warm-up,
	// MetricShare MetricIntake ÷ the side's sustainable rate, and
	// MetricDrain the seconds its backlog took to drain after the intake
	// (MetricDrained 0 when it had not within the drain bound).
	MetricOffered = "offered_per_s"
	MetricIntake  = "processed_per_s"
	MetricShare   = "share_of_sustainable"
	MetricDrain   = "drain_s"
	MetricDrained = "drained"
	// MetricCopies is a step's items out per item offered when it is
	// more than 1 (a fan-out's subscribers: each published task becomes
	// one copy per subscriber): its flat bound, backlog and processing
	// count copies while its offered and sent rates count items sent.
	MetricCopies = "copies"
)

func init() { driver.MarkOfferedRate(MetricSustainable) }

// MetricSLO is the end-to-end p99 bound a search's steps are judged by
// (SustainSLO), in milliseconds, recorded beside the search's outcome
// with its batch size (MetricBatch).
const MetricSLO driver.Metric = "slo_ms"

// A step's figures besides MetricOffered, MetricIntake, MetricCopies,
// MetricAccepted and the client's requests, errors, sheds and p99
// (StepJudge reads them): the most the backlog may grow and still count
// as flat (flatBound), the seconds of its window past the warm-up, the
// items the driver sent per second, the backlog at the warm-up's end,
// its growth over the window and its slope, the end-to-end latency's
// observations, p50 and p99 over the step, 1 when the driver ended the
// step early (its backlog had plainly grown), the /stats reads that
// failed during it, and whether it passed (1) or failed (0).
const (
	MetricFlatBound       driver.Metric = "flat_bound"
	MetricWindow          driver.Metric = "window_s"
	MetricSent            driver.Metric = "sent_per_s"
	MetricBacklogAtWarmup driver.Metric = "backlog_at_warmup"
	MetricBacklogGrowth   driver.Metric = "backlog_growth"
	MetricBacklogSlope    driver.Metric = "backlog_slope_per_s"
	MetricEndToEndCount   driver.Metric = "p99_count"
	MetricEndToEndP50     driver.Metric = "p50_ms"
	MetricEndToEndP99     driver.Metric = "p99_ms"
	MetricStoppedEarly    driver.Metric = "stopped_early"
	MetricStatsErrors     driver.Metric = "stats_errors"
	MetricStepPass        driver.Metric = "pass"
)

// A step's start state (offerSetup, progressStart) and a side's at the
// start of its search (freshSide): the backlog the last step left
// undrained and the seconds its drain was waited for, the pair's
// progress (tasks queued or running, the consumer's lag), no-kafka's
// slot lag in bytes; whether the side was restarted (1) or kept its
// process (0), its tables truncated, the rows they held after the
// start, the pair's other services stopped and emptied, rabbitmq's
// queues deleted, and the slot lag found before no-kafka's slot was
// advanced.
const (
	MetricStartBacklog       driver.Metric = "start.backlog"
	MetricStartWait          driver.Metric = "start.wait_s"
	MetricStartQueued        driver.Metric = "start.queued"
	MetricStartConsumerLag   driver.Metric = "start.consumer_lag"
	MetricStartSlotLag       driver.Metric = "start.slot_lag_bytes"
	MetricStartRestarted     driver.Metric = "start.restarted"
	MetricStartTruncated     driver.Metric = "start.truncated"
	MetricStartRows          driver.Metric = "start.rows"
	MetricStartOthersReset   driver.Metric = "start.others_reset"
	MetricStartQueuesDeleted driver.Metric = "start.queues_deleted"
	MetricStartSlotLagFound  driver.Metric = "start.slot_lag_found_bytes"
)

// The kinds of a pair's sustainable search and of its overload point
// (PairScenarioName).
const (
	KindSustainable     = "sustainable"
	KindOverSustainable = "over_sustainable"
)

// SustainScenarioName is the Point.Scenario of a pair's sustainable
// search ("queue.sustainable"); OverScenarioName that of its overload
// point at SustainOver times the sustainable rate.
func SustainScenarioName(pair string) driver.ScenarioName {
	return PairScenarioName(pair, KindSustainable)
}

// OverScenarioName: see SustainScenarioName.
func OverScenarioName(pair string) driver.ScenarioName {
	return PairScenarioName(pair, KindOverSustainable)
}

// StepMetric is the name of step i's metric name in a search's result.
func StepMetric(i int, name driver.Metric) driver.Metric {
	return StepPrefix(i).Of(string(name))
}

// StepPrefix starts step i's metrics in a search's result: "step<i>.".
func StepPrefix(i int) driver.MetricPrefix {
	return driver.MetricPrefix("step" + strconv.Itoa(i) + ".")
}

// SustainLadder is a pair's rate ladder: the search starts at Start
// items/s and multiplies by Factor while steps pass, up to Max; then
// Bisect bisections refine the boundary between the last pass and the
// first failure.
type SustainLadder struct {
	Start  float64 `json:"start"`
	Factor float64 `json:"factor"`
	Max    float64 `json:"max"`
	Bisect int     `json:"bisect"`
}

// SustainOptions parameterize the sustainable-throughput search.
type SustainOptions struct {
	// Sizes are the batch sizes (items per POST), searched in this order:
	// each size's first search starts from the previous size's bracket.
	Sizes []int
	// Step is each offered rate's duration; the first Warmup of it is
	// left out of the backlog's trend (the pipeline filling), Sample is
	// how often /stats is read meanwhile.
	Step, Warmup, Sample time.Duration
	// Rounds is how many searches per side (sides alternated, order
	// rotated): the run-to-run range. The first search climbs the ladder;
	// each later one starts from the previous bracket (last pass, first
	// failure), checks both ends and searches again only if they moved.
	Rounds int
	// Drain bounds each wait for a backlog to drain, before a step and
	// after the overload point.
	Drain time.Duration
	// OverRounds is how many rounds the overload point runs (0: none);
	// it runs on the scenarios marked Overload, after the search at
	// batch size OverSize (one of Sizes), and at no other size.
	OverRounds int
	// OverSize is the batch size of the overload point.
	OverSize int
	// Ladders are the pairs' ladders, by pair name.
	Ladders map[string]SustainLadder
}

// SustainDefaults are the results' sustainable search: batches of 100,
// 30 s steps (5 s warm-up), three searches per side (the published rate
// is the one two of three passed: driver.PassedInMost, a rate that was
// offered, never a mean of two), two bisections on every ladder, the
// overload point once per side. Batch 100 alone took 11 minutes on 2 cores (2 December);
// batches of 10 and 1000 too (-sustainable-sizes 100,10,1000) took 33
// minutes, which kept make results over an hour, so they are a flag away
// rather than the default. The queue's ladder starts where issue 21's
// open-loop runs saw both sides flat (5,000/s), the log's where they saw
// both flat at 40,000/s, and each later size starts from the previous
// size's bracket.
var SustainDefaults = SustainOptions{
	Sizes: []int{100}, Step: 30 * time.Second, Warmup: 5 * time.Second, Sample: time.Second,
	Rounds: 3, Drain: 30 * time.Second, OverRounds: 1, OverSize: 100,
	Ladders: map[string]SustainLadder{
		"queue": {Start: 5000, Factor: 2, Max: 40000, Bisect: 2},
		"log":   {Start: 40000, Factor: 2, Max: 160000, Bisect: 2},
	},
}

// SustainQuick is a look in about two minutes, at rates any machine
// keeps up with: 4 s steps, one search per side, no bisection. Its
// figures say whether the search runs, not what a side sustains.
var SustainQuick = SustainOptions{
	Sizes: []int{100}, Step: 4 * time.Second, Warmup: time.Second, Sample: 250 * time.Millisecond,
	Rounds: 1, Drain: 10 * time.Second, OverRounds: 1, OverSize: 100,
	Ladders: map[string]SustainLadder{
		"queue": {Start: 500, Factor: 2, Max: 1000},
		"log":   {Start: 500, Factor: 2, Max: 1000},
	},
}

// Validate says what is wrong with o.
func (o SustainOptions) Validate() error {
	var errs []error
	if len(o.Sizes) == 0 {
		errs = append(errs, errors.New("sustainable: no batch size"))
	}
	for _, n := range o.Sizes {
		if n < 1 || n > 1000 {
			errs = append(errs, fmt.Errorf("sustainable: batch size %d (1 to 1000)", n))
		}
	}
	if o.Step <= 0 || o.Warmup < 0 || o.Warmup >= o.Step || o.Sample <= 0 {
		errs = append(errs, fmt.Errorf("sustainable: step %s must be longer than its warm-up %s, sampled every %s > 0", o.Step, o.Warmup, o.Sample))
	}
	if o.Rounds < 1 || o.OverRounds < 0 || o.Drain <= 0 {
		errs = append(errs, errors.New("sustainable: rounds ≥ 1, overload rounds ≥ 0 and a drain bound > 0 are required"))
	}
	if o.OverRounds > 0 && !slices.Contains(o.Sizes, o.OverSize) {
		errs = append(errs, fmt.Errorf("sustainable: the overload point's batch size %d is not one of the searched sizes %v", o.OverSize, o.Sizes))
	}
	for _, s := range Throughputs {
		l, ok := o.Ladders[s.Pair.Name]
		if !ok || l.Start <= 0 || l.Factor <= 1 || l.Max < l.Start || l.Bisect < 0 {
			errs = append(errs, fmt.Errorf("sustainable: the %s ladder %+v cannot climb", s.Pair.Name, l))
		}
	}
	return errors.Join(errs...)
}

// Estimate returns the expected duration of the search on every pair of
// Throughputs. Typical: each search's first rate passes and the next
// fails (later searches check the two ends of the previous bracket), a
// failing step ends earlyFailAfter into its window and its backlog drains
// in a third of a step; each search starts on a freshly started service
// and a 1 s warm-up; the overload point, on a fresh start too, has a
// backlog that takes the drain bound.
// Bound: every search climbs its whole ladder, every step runs to its end
// and every drain to its bound.
func (o SustainOptions) Estimate() Estimate {
	var e Estimate
	for _, s := range Throughputs {
		e = e.Add(o.estimateOf(s))
	}
	return e
}

// estimateOf is Estimate's part of s, on each of its sides.
func (o SustainOptions) estimateOf(s ThroughputScenario) Estimate {
	sides := len(s.sides())
	pass := o.Step + attackOverhead
	drain := min(o.Drain, o.Step/3)
	fail := o.Warmup + earlyFailAfter + 2*attackOverhead + drain
	start := serviceStart + time.Second + 2*attackOverhead
	full := o.Step + attackOverhead + o.Drain
	var e Estimate
	l := o.Ladders[s.Pair.Name]
	ladder := 1
	if l.Factor > 1 && l.Max > l.Start && l.Start > 0 {
		ladder += int(math.Floor(math.Log(l.Max/l.Start) / math.Log(l.Factor)))
	}
	passes := 1 + l.Bisect/2 + (o.Rounds - 1)
	fails := 1 + l.Bisect - l.Bisect/2 + (o.Rounds - 1)
	n := len(o.Sizes) * sides
	perSide := time.Duration(o.Rounds)*start + time.Duration(passes)*pass + time.Duration(fails)*fail
	boundSide := time.Duration(o.Rounds)*(start+time.Duration(ladder+l.Bisect)*full) + full
	e = e.Add(Estimate{Attacks: n * (passes + fails), Typical: time.Duration(n) * perSide, Bound: time.Duration(n) * boundSide})
	if s.Overload && o.OverRounds > 0 {
		k := time.Duration(sides * o.OverRounds)
		e = e.Add(Estimate{Attacks: sides * o.OverRounds, Typical: k * (start + pass + o.Drain), Bound: k * (start + full)})
	}
	return e
}

// StepJudge decides one step from its figures (the "step<i>." metrics
// without their prefix): whether it passed and why, in words. The report
// calls it too, so that the reason is never stored apart from the
// figures it is read from.
func StepJudge(m map[driver.Metric]float64) (bool, string) {
	offered, req := m[MetricOffered], m[driver.ClientRequests]
	bound := m[MetricFlatBound]
	growth := func() (bool, string) {
		return false, fmt.Sprintf("backlog grew %.0f items in %.0f s (flat: ≤ %.0f), processing %.0f/s", m[MetricBacklogGrowth], m[MetricWindow], bound, m[MetricIntake])
	}
	switch {
	case req == 0:
		return false, "nothing sent"
	case m[MetricStoppedEarly] == 1:
		// Ended by the driver once the backlog had plainly grown; the
		// requests it cut off are no failure of the side's.
		return growth()
	case m[driver.ClientErrors] >= driver.FailShare*req:
		return false, fmt.Sprintf("%.0f of %.0f batch requests failed", m[driver.ClientErrors], req)
	case m[driver.ClientShed] >= driver.FailShare*req:
		return false, fmt.Sprintf("%.0f of %.0f batches shed (503 + Retry-After)", m[driver.ClientShed], req)
	case m[MetricSent] < SendShare*offered:
		return false, fmt.Sprintf("the driver sent only %.0f items/s (its own limit, not the side's)", m[MetricSent])
	case m[MetricBacklogGrowth] > bound:
		return growth()
	case m[MetricEndToEndCount] == 0:
		return false, "nothing was processed"
	case m[MetricEndToEndP99] >= float64(SustainSLO.Milliseconds()):
		return false, fmt.Sprintf("p99 %.0f ms ≥ %s", m[MetricEndToEndP99], SustainSLO)
	}
	return true, fmt.Sprintf("flat (grew %.0f ≤ %.0f), p99 %.0f ms", m[MetricBacklogGrowth], bound, m[MetricEndToEndP99])
}

// StepStarved reports whether a step starved: its backlog grew past the
// flat bound while it processed under StarvedShare of the lower of the
// offered rate and ref (the highest rate the side passed before it in
// the same search; 0 for none), times the step's MetricCopies.
func StepStarved(m map[driver.Metric]float64, ref float64) bool {
	base := m[MetricOffered]
	if ref > 0 {
		base = min(base, ref)
	}
	return m[MetricBacklogGrowth] > m[MetricFlatBound] && m[MetricIntake] < StarvedShare*base*max(m[MetricCopies], 1)
}

// flatBound is the most a flat backlog may grow over a window at rate.
func flatBound(rate float64, batch int) float64 {
	return math.Max(FlatMinBatches*float64(batch), FlatArrivals*rate)
}

// bracket is a search's outcome: the highest passing rate, the lowest
// failing rate above it, and whether the ladder's top passed.
type bracket struct {
	lo, hi float64
	capped bool
}

// searchSustainable finds the highest passing rate with try. Without a
// seed (lo 0) it climbs l from l.Start by l.Factor until a step fails
// (or passes l.Max: capped), descending by l.Factor up to
// sustainDescents times when the first fails, then bisects l.Bisect
// times. With a seed it tries the seed's lo, then its hi: when they
// pass and fail again the bracket stands; when one moved it climbs or
// descends from there and bisects.
func searchSustainable(l SustainLadder, seed bracket, try func(float64) (bool, error)) (bracket, error) {
	ls := &ladderSearch{l: l, try: try}
	moved := true
	var err error
	if seed.lo <= 0 {
		err = ls.fresh()
	} else {
		moved, err = ls.reseed(seed)
	}
	if err != nil {
		return ls.b, err
	}
	if ls.b.lo == 0 || ls.b.capped || !moved {
		return ls.b, nil
	}
	err = ls.bisect()
	return ls.b, err
}

// ladderSearch is one searchSustainable: its ladder, its step and the
// bracket found so far.
type ladderSearch struct {
	l   SustainLadder
	try func(float64) (bool, error)
	b   bracket
}

// fresh searches without a seed: it climbs from l.Start, and descends
// from the first failure when nothing passed and the top was not
// reached.
func (ls *ladderSearch) fresh() error {
	if err := ls.climb(ls.l.Start); err != nil {
		return err
	}
	if ls.b.lo == 0 && !ls.b.capped {
		return ls.descend(ls.b.hi)
	}
	return nil
}

// reseed searches from seed: it tries the seed's lo (descending from it
// when it fails), then its hi (climbing on from it when it passes). It
// says whether the boundary moved: false when both ends held, or when
// the seed was capped or had no hi.
func (ls *ladderSearch) reseed(seed bracket) (bool, error) {
	ok, err := ls.try(seed.lo)
	if err != nil {
		return true, err
	}
	if !ok {
		ls.b.hi = seed.lo
		return true, ls.descend(seed.lo)
	}
	ls.b.lo = seed.lo
	if seed.capped || seed.hi <= 0 {
		ls.b.capped = seed.capped
		return false, nil
	}
	ok, err = ls.try(seed.hi)
	if err != nil {
		return true, err
	}
	if !ok {
		ls.b.hi = seed.hi
		return false, nil
	}
	ls.b.lo = seed.hi
	return true, ls.climb(roundRate(seed.hi * ls.l.Factor))
}

// climb tries from, then each l.Factor times the last, until a step
// fails (its rate is the bracket's hi) or the rate passes l.Max
// (capped); each passing rate is the bracket's lo.
func (ls *ladderSearch) climb(from float64) error {
	for r := from; ; r = roundRate(r * ls.l.Factor) {
		if r > ls.l.Max {
			ls.b.capped = true
			return nil
		}
		ok, err := ls.try(r)
		if err != nil {
			return err
		}
		if !ok {
			ls.b.hi = r
			return nil
		}
		ls.b.lo = r
	}
}

// descend tries from divided by l.Factor, again and again, up to
// sustainDescents times, until a step passes (its rate is the bracket's
// lo); each failing rate is the bracket's hi.
func (ls *ladderSearch) descend(from float64) error {
	r := from
	for range sustainDescents {
		r = roundRate(r / ls.l.Factor)
		ok, err := ls.try(r)
		if err != nil {
			return err
		}
		if ok {
			ls.b.lo = r
			return nil
		}
		ls.b.hi = r
	}
	return nil
}

// bisect narrows the bracket l.Bisect times by trying its middle rate,
// stopping early when the middle rounds onto one of its ends.
func (ls *ladderSearch) bisect() error {
	for range ls.l.Bisect {
		mid := roundRate((ls.b.lo + ls.b.hi) / 2)
		if mid <= ls.b.lo || mid >= ls.b.hi {
			break
		}
		ok, err := ls.try(mid)
		if err != nil {
			return err
		}
		if ok {
			ls.b.lo = mid
		} else {
			ls.b.hi = mid
		}
	}
	return nil
}

// RunSustainable runs the pair's sustainable search at every batch size
// of o (one point <pair>.sustainable per size, o.Rounds searches per
// side), then, when s.Overload, the overload point at SustainOver times
// each side's median sustainable rate (<pair>.over_sustainable).
func (s ThroughputScenario) RunSustainable(ctx context.Context, e *Env, run *driver.Run, o SustainOptions) error {
	if err := o.Validate(); err != nil {
		return err
	}
	if err := e.Ensure(ctx, s.services(), nil, s.SustainEnv); err != nil {
		return err
	}
	if len(s.SustainEnv) > 0 {
		run.Settings["sustain_env"] = s.SustainEnv
	}
	l := o.Ladders[s.Pair.Name]
	// Each side's last bracket seeds its next search, across batch sizes
	// too: a size's first search checks the previous size's bracket
	// first instead of climbing the ladder again (searchSustainable).
	seeds := map[string]bracket{}
	for _, size := range o.Sizes {
		body := s.Body(size)
		e.logf("%s sustainable: batch %d, %s steps from %g/s (×%g, max %g/s, %d bisections), %d rounds, %s p99 < %s",
			s.Pair.Name, size, o.Step, l.Start, l.Factor, l.Max, l.Bisect, o.Rounds, s.EndToEnd, SustainSLO)
		p := driver.Point{Scenario: s.pointScenario(SustainScenarioName(s.Pair.Name)), Name: BatchLabel(size), DurationS: o.Step.Seconds(), Sides: s.sides(), Env: s.pointEnv()}
		found := map[string][]float64{}
		err := driver.RunPoint(ctx, &p, o.Rounds, func(ctx context.Context, svc string, _ int) (*driver.SideResult, error) {
			res, b, err := s.search(ctx, sideLoad{e: e, svc: svc, size: size, body: body, o: o}, l, seeds[svc])
			if b.lo > 0 {
				seeds[svc] = b
				found[svc] = append(found[svc], b.lo)
			}
			return res, err
		})
		run.Points = append(run.Points, p)
		if err != nil {
			return err
		}
		if !s.Overload || o.OverRounds < 1 || size != o.OverSize {
			continue
		}
		e.logf("%s at %g× each side's sustainable rate: batch %d, %s, %d round(s)", s.Pair.Name, SustainOver, size, o.Step, o.OverRounds)
		q := driver.Point{Scenario: s.pointScenario(OverScenarioName(s.Pair.Name)), Name: BatchLabel(size), DurationS: o.Step.Seconds(), Sides: s.sides()}
		err = driver.RunPoint(ctx, &q, o.OverRounds, func(ctx context.Context, svc string, _ int) (*driver.SideResult, error) {
			if len(found[svc]) == 0 {
				return nil, errors.New("no sustainable rate was measured for this side")
			}
			return s.over(ctx, sideLoad{e: e, svc: svc, size: size, body: body, o: o}, driver.Median(found[svc]))
		})
		run.Points = append(run.Points, q)
		if err != nil {
			return err
		}
	}
	return nil
}

// sideLoad is one side of a sustain search or overload point and what
// each of its steps sends: the side's service, the batches it posts,
// the steps' options and the side's state from one step to the next.
type sideLoad struct {
	// e is the run's environment (logging, workers, progress).
	e *Env
	// svc is the side's service.
	svc string
	// size is the items per batch, body one batch of them.
	size int
	body []byte
	// o bounds each step: its length, sampling, warm-up and drain.
	o SustainOptions
	// st is what the steps target and carry; search and over start
	// their own.
	st *sideState
}

// stepOffer is what one step offers: rate items/s, and whether it ends
// early once its backlog has plainly grown past bound (items out).
type stepOffer struct {
	rate  float64
	early bool
	bound float64
}

// search runs one search on sl's service: a fresh start (restarted, its
// tables emptied: freshSide), a 1 s warm-up, then the steps
// searchSustainable asks for, each recorded as "step<i>.*" metrics.
func (s ThroughputScenario) search(ctx context.Context, sl sideLoad, l SustainLadder, seed bracket) (*driver.SideResult, bracket, error) {
	res, err := s.freshLoad(ctx, &sl)
	if err != nil {
		return res, bracket{}, err
	}
	b, err := s.searchAt(ctx, sl, l, seed, res)
	if errors.Is(err, ErrPrecondition) {
		// Invalid, not failed: its figures are not the system's.
		res.Precondition = err.Error()
		return res, b, nil
	}
	return res, b, err
}

// freshLoad starts sl's service afresh for a search or an overload
// point (freshSide, on the scenario's SustainEnv), recording the start's
// figures in the result it returns (even on error), and points sl.st at
// the started service with a new sideState.
func (s ThroughputScenario) freshLoad(ctx context.Context, sl *sideLoad) (*driver.SideResult, error) {
	res := &driver.SideResult{Metrics: map[driver.Metric]float64{}}
	if err := sl.e.freshSide(ctx, s.Pair, sl.svc, s.SustainEnv, res.Metrics); err != nil {
		return res, err
	}
	sl.st = &sideState{base: sl.e.URL(sl.svc)}
	return res, nil
}

// searchAt is a search's warm-up and steps on the side sl.st targets,
// started already: a 1 s warm-up, then the steps searchSustainable asks
// for, each recorded in res as "step<i>.*" metrics, and the search's
// outcome; it leaves no backlog behind (up to sl.o.Drain).
func (s ThroughputScenario) searchAt(ctx context.Context, sl sideLoad, l SustainLadder, seed bracket, res *driver.SideResult) (bracket, error) {
	e, svc, size, st, o := sl.e, sl.svc, sl.size, sl.st, sl.o
	s.warmSide(ctx, sl)
	res.Metrics[MetricSLO] = float64(SustainSLO.Milliseconds())
	res.Metrics[MetricBatch] = float64(size)
	var best float64
	starvedAt := math.Inf(1)
	n := 0
	stepsByRate := map[float64]map[driver.Metric]float64{}
	try := func(rate float64) (bool, error) {
		m, _, err := s.offer(ctx, sl, rate, true)
		if m == nil {
			m = map[driver.Metric]float64{}
		}
		pass, why := false, ""
		if err == nil {
			pass, why = StepJudge(m)
		} else {
			why = err.Error()
		}
		m[MetricStepPass] = b2f(pass)
		if err == nil && StepStarved(m, best) {
			m[MetricStarved] = 1
			if rate < starvedAt {
				starvedAt = rate
				res.Metrics[MetricStarved] = 1
				res.Metrics[MetricStarvedAt] = rate
				res.Metrics[MetricStarvedProcessed] = m[MetricIntake]
			}
		}
		for k, v := range m {
			res.Metrics[StepMetric(n, k)] = v
		}
		n++
		if pass && rate > best {
			best = rate
			stepsByRate[rate] = m
		}
		e.logf("  %s %g/s (batch %d): pass=%v (%s)", svc, rate, size, pass, why)
		return pass, err
	}
	b, err := searchSustainable(l, seed, try)
	res.Metrics[MetricSteps] = float64(n)
	res.Metrics[MetricStarved] = b2f(res.Metrics[MetricStarved] == 1)
	res.Metrics[MetricCapped] = b2f(b.capped)
	// Leave no backlog to the next search (rabbitmq's stays in the
	// broker across a restart).
	if _, _, derr := s.drainSide(ctx, st.base, st, o.Drain); err == nil && derr != nil {
		err = derr
	}
	if err != nil {
		return b, err
	}
	if b.lo <= 0 {
		return b, fmt.Errorf("no offered rate down to %g items/s kept the backlog flat with %s p99 under %s", roundRate(l.Start/math.Pow(l.Factor, sustainDescents)), s.EndToEnd, SustainSLO)
	}
	res.Metrics[MetricSustainable] = b.lo
	if b.hi > 0 {
		res.Metrics[MetricFirstFail] = b.hi
	}
	if m := stepsByRate[b.lo]; m != nil {
		for _, k := range []driver.Metric{MetricEndToEndP99, MetricEndToEndP50, MetricIntake, MetricBacklogGrowth} {
			res.Metrics[MetricAt(k)] = m[k]
		}
	}
	return b, nil
}

// over offers sl's service SustainOver times its sustainable rate ref,
// in batches, for a whole step, and measures what it processes during
// the intake (after the warm-up) as a share of ref, then how long its
// backlog takes to drain. The step's client phase is recorded, so that
// failed requests (sheds apart) fail the point.
func (s ThroughputScenario) over(ctx context.Context, sl sideLoad, ref float64) (*driver.SideResult, error) {
	res, err := s.freshLoad(ctx, &sl)
	if err != nil {
		return res, err
	}
	st := sl.st
	s.warmSide(ctx, sl)
	rate := math.Round(SustainOver * ref)
	m, c, err := s.offer(ctx, sl, rate, false)
	for k, v := range m {
		res.Metrics[k] = v
	}
	if c.Requests > 0 {
		res.Phases = append(res.Phases, driver.Phase{Name: s.Phase, Client: c})
	}
	if err != nil {
		return res, err
	}
	res.Metrics[MetricSustainable] = ref
	res.Metrics[MetricShare] = math.Round(m[MetricIntake]/ref*1000) / 1000
	res.Metrics[MetricStarved] = b2f(StepStarved(m, ref))
	t0 := time.Now()
	left, _, err := s.drainSide(ctx, st.base, st, sl.o.Drain)
	res.Metrics[MetricDrain] = math.Round(time.Since(t0).Seconds()*10) / 10
	res.Metrics[MetricDrained] = b2f(left <= 0)
	return res, err
}

// sideState is the side a search's steps target and what carries from
// one step to the next on it. base is the URL its steps post to and read
// /stats from; copies is how many items out each item sent becomes (a
// fan-out's subscribers; 0 and 1 both mean one); carry is the backlog
// its counters do not show: a step resets /stats, and what was left then
// is processed after the reset without having been counted in.
type sideState struct {
	base   string
	copies int
	carry  int64
}

// perItem is the items out per item sent (MetricCopies).
func (st *sideState) perItem() float64 { return float64(max(st.copies, 1)) }

// backlog is the side's backlog now, from counters read since the last
// reset.
func (s ThroughputScenario) backlog(st *sideState, x *driver.ServerStats) int64 {
	return st.carry + s.Pair.backlog(x)
}

// drainSide waits, up to bound, for the side's backlog to drain, and
// returns what is left and how long it waited.
func (s ThroughputScenario) drainSide(ctx context.Context, base string, st *sideState, bound time.Duration) (int64, time.Duration, error) {
	t0 := time.Now()
	for {
		x, err := driver.GetStats(ctx, base)
		if err != nil {
			return 0, time.Since(t0), err
		}
		left := s.backlog(st, x)
		if left <= 0 || time.Since(t0) >= bound {
			return max(left, 0), time.Since(t0), nil
		}
		select {
		case <-ctx.Done():
			return left, time.Since(t0), ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// warmSide sends 1 s of batches at 10 per second and lets them drain,
// recording nothing: a freshly started service fills its pools (a Kafka
// consumer joins its group) before its first step.
func (s ThroughputScenario) warmSide(ctx context.Context, sl sideLoad) {
	e, svc, body, st := sl.e, sl.svc, sl.body, sl.st
	base := st.base
	if err := driver.ResetStats(ctx, base); err != nil {
		e.logf("warm-up of %s: %v", svc, err)
		return
	}
	st.carry = 0
	driver.Attack(ctx, driver.AttackSpec{Rate: 10, Duration: time.Second, MaxWorkers: e.MaxWorkers,
		Next: func(uint64) driver.Request {
			return driver.Request{Method: http.MethodPost, URL: base + s.Path, Body: body}
		}})
	if _, _, err := s.drainSide(ctx, base, st, sl.o.Drain); err != nil {
		e.logf("warm-up of %s: %v", svc, err)
	}
}

// sample is one read of a side's counters during a step.
type sample struct {
	t       float64 // seconds since the step began
	backlog int64
	out     int64
}

// offer runs one step on sl's side: it waits for the last step's backlog
// to drain (bounded by o.Drain; what is left is the step's declared
// "start.backlog"), records the start state (start.*), resets /stats,
// offers rate items/s as batches of size, open loop, for o.Step while
// reading /stats every o.Sample, and returns the step's figures. With
// early it ends the step once its backlog has plainly grown
// (earlyFailFactor × the flat bound, earlyFailAfter into the window).
func (s ThroughputScenario) offer(ctx context.Context, sl sideLoad, rate float64, early bool) (map[driver.Metric]float64, driver.ClientResult, error) {
	size, st := sl.size, sl.st
	base := st.base
	m := map[driver.Metric]float64{MetricOffered: rate, MetricBatch: float64(size)}
	if err := s.offerSetup(ctx, sl, m); err != nil {
		return m, driver.ClientResult{}, err
	}
	// The backlog and the processing count items out: copies, when each
	// item sent becomes several.
	bound := flatBound(rate, size) * st.perItem()
	if st.copies > 1 {
		m[MetricCopies] = st.perItem()
	}
	m[MetricFlatBound] = bound
	c, w := s.offerLoad(ctx, sl, stepOffer{rate: rate, early: early, bound: bound}, m)
	end, err := driver.GetStats(ctx, base)
	if err != nil {
		return m, c, err
	}
	s.offerMeasure(m, sl, c, w, end)
	return m, c, nil
}

// offerSetup is a step's setup: it waits for the last step's backlog to
// drain (bounded by o.Drain), records what is left and the start state
// (start.*) in m, and resets /stats, carrying the backlog at the reset
// in sl.st.
func (s ThroughputScenario) offerSetup(ctx context.Context, sl sideLoad, m map[driver.Metric]float64) error {
	e, svc, st, o := sl.e, sl.svc, sl.st, sl.o
	base := st.base
	left, waited, err := s.drainSide(ctx, base, st, o.Drain)
	if err != nil {
		return err
	}
	m[MetricStartBacklog] = float64(left)
	m[MetricStartWait] = math.Round(waited.Seconds()*10) / 10
	for k, v := range e.progressStart(ctx, s.Pair, svc, base) {
		m[k] = v
	}
	if lag := m[MetricStartSlotLag]; lag > SlotLagBound {
		// The slot reads the whole cluster's WAL: wait for it as for a
		// backlog, then refuse to measure from a contaminated start.
		if why := e.startState(ctx, s.Pair, svc, o.Drain); why != "" {
			return fmt.Errorf("%w: %s", ErrPrecondition, why)
		}
	}
	// The backlog at the reset is carried: the counters restart at 0.
	before, err := driver.GetStats(ctx, base)
	if err != nil {
		return err
	}
	if err := driver.ResetStats(ctx, base); err != nil {
		return err
	}
	st.carry = max(s.backlog(st, before), 0)
	return nil
}

// stepWindow is what a step's sampling saw: when the step began, its
// first state (the carried backlog), the sample at o.Warmup (nil when
// the step ended before it) and every sample from then on.
type stepWindow struct {
	t0     time.Time
	first  sample
	warm   *sample
	window []sample
}

// offerLoad is a step's load: it offers so.rate items/s as batches of
// sl.size, open loop, for o.Step, reading /stats every o.Sample
// (counting failed reads in m as "stats_errors"), and returns what the
// client saw and the samples. With so.early it ends the step once the
// backlog has grown earlyFailFactor × so.bound, earlyFailAfter past the
// warm-up ("stopped_early").
func (s ThroughputScenario) offerLoad(ctx context.Context, sl sideLoad, so stepOffer, m map[driver.Metric]float64) (driver.ClientResult, stepWindow) {
	e, svc, size, body, st, o := sl.e, sl.svc, sl.size, sl.body, sl.st, sl.o
	rate, early, bound := so.rate, so.early, so.bound
	base := st.base
	url := base + s.Path
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan driver.ClientResult, 1)
	w := stepWindow{t0: time.Now()}
	go func() {
		done <- driver.Attack(actx, driver.AttackSpec{
			Name: fmt.Sprintf("%-12s %g items/s ×%d", svc, rate, size), Rate: rate / float64(size), Duration: o.Step,
			MaxWorkers: e.MaxWorkers, Progress: e.Progress,
			Next: func(uint64) driver.Request { return driver.Request{Method: http.MethodPost, URL: url, Body: body} },
		})
	}()
	w.first = sample{backlog: st.carry}
	tick := time.NewTicker(o.Sample)
	defer tick.Stop()
	for {
		select {
		case c := <-done:
			return c, w
		case <-tick.C:
			x, err := driver.GetStats(ctx, base)
			if err != nil {
				m[MetricStatsErrors]++
				continue
			}
			smp := sample{t: time.Since(w.t0).Seconds(), backlog: s.backlog(st, x), out: counterSum(x, s.Pair.Out)}
			if w.warm == nil && smp.t >= o.Warmup.Seconds() {
				warm := smp
				w.warm = &warm
			}
			if w.warm != nil {
				w.window = append(w.window, smp)
				if early && smp.t-w.warm.t >= earlyFailAfter.Seconds() && float64(smp.backlog-w.warm.backlog) > earlyFailFactor*bound && m[MetricStoppedEarly] == 0 {
					m[MetricStoppedEarly] = 1
					cancel()
				}
			}
		}
	}
}

// offerMeasure records a step's figures in m from what the client saw
// (c), the samples (w) and /stats at its end: the window past the
// warm-up, the client's counts, the backlog's growth and slope over the
// window, the intake (items through per second) and the end-to-end
// latency.
func (s ThroughputScenario) offerMeasure(m map[driver.Metric]float64, sl sideLoad, c driver.ClientResult, w stepWindow, end *driver.ServerStats) {
	size, st := sl.size, sl.st
	last := sample{t: time.Since(w.t0).Seconds(), backlog: s.backlog(st, end), out: counterSum(end, s.Pair.Out)}
	warm := w.warm
	if warm == nil {
		warm = &w.first
	}
	window := append(w.window, last)
	span := last.t - warm.t
	m[MetricWindow] = math.Round(span*10) / 10
	m[driver.ClientRequests] = float64(c.Requests)
	m[driver.ClientErrors] = float64(c.Errors)
	m[driver.ClientShed] = float64(c.Shed)
	m[driver.ClientP99] = c.Latency.P99MS
	m[MetricSent] = math.Round(c.SentRate * float64(size))
	m[MetricAccepted] = round1(float64(c.OK*int64(size)) / max(c.DurationS, 1e-9))
	m[MetricBacklogAtWarmup] = float64(warm.backlog)
	m[MetricBacklogEnd] = float64(last.backlog)
	m[MetricBacklogGrowth] = float64(last.backlog - warm.backlog)
	m[MetricBacklogSlope] = round1(slope(window))
	if span > 0 {
		m[MetricIntake] = round1(float64(last.out-warm.out) / span)
	}
	if l, ok := end.Latencies[s.Latency]; ok {
		m[MetricEndToEndCount] = float64(l.Count)
		if l.Count > 0 {
			m[MetricEndToEndP99], m[MetricEndToEndP50] = l.P99MS, l.P50MS
		}
	}
}

// slope is the least-squares slope of the samples' backlog over time, in
// items per second (0 for fewer than two samples).
func slope(xs []sample) float64 {
	if len(xs) < 2 {
		return 0
	}
	var st, sb float64
	for _, x := range xs {
		st += x.t
		sb += float64(x.backlog)
	}
	n := float64(len(xs))
	mt, mb := st/n, sb/n
	var num, den float64
	for _, x := range xs {
		num += (x.t - mt) * (float64(x.backlog) - mb)
		den += (x.t - mt) * (x.t - mt)
	}
	if den == 0 {
		return 0
	}
	return num / den
}

// progressStart reads the progress endpoint of svc's side at base
// before a step: the queue's waiting and running tasks ("start.queued":
// the broker's or the table's own count, which the counters of a fresh
// process do not know), the log consumer's lag ("start.consumer_lag", in the side's
// unit) and, for no-kafka, its slot's lag ("start.slot_lag_bytes").
func (e *Env) progressStart(ctx context.Context, p Pair, svc, base string) map[driver.Metric]float64 {
	m := map[driver.Metric]float64{}
	if raw, err := driver.GetRaw(ctx, base+p.Progress); err == nil {
		var v map[string]any
		if json.Unmarshal(raw, &v) == nil {
			q, _ := v["queued"].(float64)
			r, _ := v["running"].(float64)
			if _, ok := v["queued"]; ok {
				m[MetricStartQueued] = q + r
			}
			if lag, ok := v["lag"].(float64); ok {
				m[MetricStartConsumerLag] = lag
			}
		}
	}
	if svc == LogPair.A.Name {
		if lag, ok := e.slotLag(ctx, svc); ok {
			m[MetricStartSlotLag] = lag
		}
	}
	return m
}

// slotLag is the WAL between the current position and the confirmed
// position of svc's replication slot, in bytes.
func (e *Env) slotLag(ctx context.Context, svc string) (float64, bool) {
	if e.PostgresURL == "" {
		return 0, false
	}
	conn, err := e.connect(ctx)
	if err != nil {
		return 0, false
	}
	defer conn.Close(context.Background())
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var lag int64
	err = conn.QueryRow(cctx, `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), coalesce(confirmed_flush_lsn, restart_lsn))::bigint
		FROM pg_replication_slots WHERE slot_name = $1`, e.ServiceVar(svc, "SLOT_NAME", "no_kafka")).Scan(&lag)
	return float64(lag), err == nil
}

// freshSide gives svc a declared, reset start, with startEnv set on it
// (ThroughputScenario.SustainEnv): when the driver can
// restart it, it stops it, empties its tables (TRUNCATE, freshly: see
// truncate), moves no-kafka's slot to the current WAL position (what it
// was behind is recorded as start.slot_lag_found_bytes) and starts it
// again. Either way it records into m start.restarted, start.truncated
// and the rows its tables hold (start.rows), also when it fails. A service
// the driver did not start keeps its process and tables: start.restarted
// is 0.
func (e *Env) freshSide(ctx context.Context, p Pair, svc string, startEnv map[string]string, m map[driver.Metric]float64) error {
	m[MetricStartRestarted], m[MetricStartTruncated] = 0, 0
	var service Service
	for _, x := range p.Services() {
		if x.Name == svc {
			service = x
		}
	}
	schemas := e.SchemasOf([]Service{service})
	ours := e.Launcher != nil && e.Launcher.Running(svc) != nil
	// A service nobody runs yet is started by Ensure: fresh too.
	absent := e.Launcher != nil && !ours && e.Start != StartNever && e.Probe(ctx, svc, service.Port+e.PortOffset) != nil
	if ours || absent {
		if ours {
			if err := e.Launcher.Stop(svc, 30*time.Second); err != nil {
				return err
			}
		}
		m[MetricStartRestarted] = 1
		if err := e.resetTables(ctx, p, svc, schemas, m); err != nil {
			e.logf("%s: tables not reset (%v); the step records what they held", svc, err)
		}
		e.resetOthers(ctx, p, svc, m)
	}
	if err := e.Ensure(ctx, []Service{service}, nil, startEnv); err != nil {
		return err
	}
	if e.PostgresURL != "" && len(schemas) > 0 {
		if ts, err := e.ReadState(ctx, schemas); err == nil {
			var rows int64
			for _, t := range ts {
				rows += t.Rows
			}
			m[MetricStartRows] = float64(rows)
		}
	}
	return nil
}

// rabbitMQDefaultQueue is the rabbitmq service's RABBITMQ_QUEUE default
// (its DefaultQueue).
const rabbitMQDefaultQueue = "tasks"

// resetOthers stops the pair's other services the driver runs and
// empties their tables too, counted as start.others_reset: a side's
// search must not pay for the other side's last one (the autovacuum of
// the hundreds of thousands of records a search updates, a backlog the
// other side's workers still drain). Each side is started again, fresh,
// by its own next search.
func (e *Env) resetOthers(ctx context.Context, p Pair, svc string, m map[driver.Metric]float64) {
	m[MetricStartOthersReset] = 0
	for _, x := range p.Services() {
		if x.Name == svc || e.Launcher == nil || e.Launcher.Running(x.Name) == nil {
			continue
		}
		if err := e.Launcher.Stop(x.Name, 30*time.Second); err != nil {
			e.logf("%s: not stopped (%v); its tables keep what they held", x.Name, err)
			continue
		}
		if err := e.resetTables(ctx, p, x.Name, e.SchemasOf([]Service{x}), map[driver.Metric]float64{}); err != nil {
			e.logf("%s: tables not reset (%v)", x.Name, err)
			continue
		}
		m[MetricStartOthersReset]++
	}
}

// resetTables truncates schemas and, for no-kafka, advances its slot
// (the service is stopped, its slot inactive).
func (e *Env) resetTables(ctx context.Context, p Pair, svc string, schemas []string, m map[driver.Metric]float64) error {
	if e.PostgresURL == "" {
		return errors.New("no Postgres URL")
	}
	ctx, conn, done, err := e.connectWithin(ctx, stateTimeout)
	if err != nil {
		return err
	}
	defer done()
	if err := truncate(ctx, conn, schemas); err != nil {
		return err
	}
	m[MetricStartTruncated] = 1
	if svc == QueuePair.B.Name {
		// The broker holds the rabbitmq side's messages apart from its
		// tables: a queue left with messages whose records were just
		// emptied would give the next start stale deliveries to drain.
		// The service declares its queues again when it starts.
		url := e.ServiceVar(svc, "RABBITMQ_URL", rabbitMQURL())
		if err := deleteQueues(firstURL(url), e.ServiceVar(svc, "RABBITMQ_QUEUE", rabbitMQDefaultQueue)); err != nil {
			return err
		}
		m[MetricStartQueuesDeleted] = 1
	}
	if svc != LogPair.A.Name {
		return nil
	}
	if lag, ok := e.slotLag(ctx, svc); ok {
		m[MetricStartSlotLagFound] = lag
	}
	_, err = e.advanceSlot(ctx, conn, p)
	return err
}

// SustainSetting is the run setting that holds the sustainable search's
// options and criteria (a SustainSettings).
const SustainSetting = "sustainable"

// SustainSettings are the sustainable search's options and criteria as
// a run records them, so that its report states the criteria the run
// was judged by.
type SustainSettings struct {
	Sizes          []int                    `json:"batch_sizes"`
	StepS          float64                  `json:"step_s"`
	WarmupS        float64                  `json:"warmup_s"`
	SampleS        float64                  `json:"sample_s"`
	Rounds         int                      `json:"rounds"`
	DrainS         float64                  `json:"drain_s"`
	OverRounds     int                      `json:"over_rounds"`
	OverSize       int                      `json:"over_batch_size,omitempty"`
	Over           float64                  `json:"over"`
	OverGoal       float64                  `json:"over_goal"`
	SLOMS          float64                  `json:"slo_ms"`
	FlatArrivalsS  float64                  `json:"flat_arrivals_s"`
	FlatMinBatches float64                  `json:"flat_min_batches"`
	StarvedShare   float64                  `json:"starved_share"`
	EarlyFailAfter float64                  `json:"early_fail_after_s"`
	EarlyFailBy    float64                  `json:"early_fail_factor"`
	Ladders        map[string]SustainLadder `json:"ladders"`
}

// Settings returns o and the search's criteria as a run records them.
func (o SustainOptions) Settings() SustainSettings {
	return SustainSettings{
		Sizes: o.Sizes, StepS: o.Step.Seconds(), WarmupS: o.Warmup.Seconds(), SampleS: o.Sample.Seconds(),
		Rounds: o.Rounds, DrainS: o.Drain.Seconds(), OverRounds: o.OverRounds, OverSize: o.OverSize, Over: SustainOver, OverGoal: OverGoal,
		SLOMS: float64(SustainSLO.Milliseconds()), FlatArrivalsS: FlatArrivals, FlatMinBatches: FlatMinBatches,
		StarvedShare: StarvedShare, EarlyFailAfter: earlyFailAfter.Seconds(), EarlyFailBy: earlyFailFactor, Ladders: o.Ladders,
	}
}
