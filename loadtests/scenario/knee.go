package scenario

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
)

// CeilingOptions parameterize a ceiling search: each side's knee, the
// highest offered rate it takes before any criterion of a step fails,
// found on a ladder of rates and refined by bisection.
type CeilingOptions struct {
	// Start is the first rate tried. The ladder is Start × Factor^i, to
	// two significant digits, up to Max: the first search of a side
	// climbs it until a step fails (past Max: the knee was not reached),
	// then bisects (geometrically) Bisect times between the last pass and
	// the first failure. A side's later searches start on the ladder at
	// or below the median knee of its searches before (the rates under
	// it passed there), so that their steps are spent around the knee.
	Start, Factor, Max float64
	// Bisect is how many bisection steps refine the knee between the
	// last pass and the first failure.
	Bisect int
	// Step is each step's duration.
	Step time.Duration
	// Rounds is how many searches per side (alternating sides, order
	// rotated).
	Rounds int
	// P99 is the server-side latency p99 a step must stay under.
	P99 time.Duration
	// KneeFactor bounds a step's p99 to KneeFactor × the side's own p99
	// at a low rate (its lowest fixed rate, else its first passing step):
	// past it latency has left its low-load level. 0 leaves P99 the only
	// latency bound.
	KneeFactor float64
	// MaxInFlight is the MAX_IN_FLIGHT the services are restarted with
	// for the search: 0 lifts the bound, so that what fails first is the
	// system (its latency, its backlog), not the service's admission
	// limit shedding 503s. LeaveInFlight keeps the services' own bound.
	MaxInFlight int
}

// DefaultKneeFactor is the declared scenarios' CeilingOptions.KneeFactor:
// a p99 five times its low-load level has left it whatever the noise of
// a short step on a shared machine (on this one the queue's p99 sits
// near 50 ms at low rates, so its 100 ms bound binds first; the log's
// near 5-10 ms).
const DefaultKneeFactor = 5

// maxInFlight is the largest MAX_IN_FLIGHT the services accept
// (httpapi.MaxMaxInFlight).
const maxInFlight = 100000

// LeaveInFlight is the CeilingOptions.MaxInFlight that leaves the
// services' own in-flight bound (httpapi's DefaultMaxInFlight unless
// their environment says otherwise).
const LeaveInFlight = -1

// The criteria of a ceiling step, as CeilingStep.Failed records them.
const (
	// CritErrors: at least ErrorShare of the requests sent failed
	// (transport errors and non-2xx answers other than sheds).
	CritErrors = "errors"
	// CritShed: at least ShedShare of the requests sent were shed (503
	// with Retry-After: the service's admission limit refused them).
	CritShed = "shed"
	// CritSent: the driver sent less than SentShare of the rate.
	CritSent = "sent"
	// CritLatency: the service recorded no latency to judge.
	CritLatency = "latency"
	// CritBacklog: the backlog at the end of the step grew past its
	// bound.
	CritBacklog = "backlog"
	// CritP99: the latency's p99 reached P99MS.
	CritP99 = "p99"
	// CritKnee: the latency's p99 passed KneeFactor × the side's
	// low-rate p99.
	CritKnee = "knee"
)

// Criteria are the Crit* keys in the order a step is judged by.
var Criteria = []string{CritErrors, CritShed, CritSent, CritLatency, CritBacklog, CritP99, CritKnee}

// The bounds of a ceiling step besides the options' latency bounds:
// each is written here once, CriteriaText words them.
const (
	stepShedShare  = 0.01
	stepSentShare  = 0.95
	stepBacklogS   = 0.2
	stepBacklogMin = 100
)

// spec is the criteria of o for latency, with the in-flight bound the
// services run with (nil: their own).
func (o CeilingOptions) spec(latency string, inFlight *int) driver.CeilingSpec {
	return driver.CeilingSpec{Latency: latency, StepS: o.Step.Seconds(), ErrorShare: driver.FailShare, ShedShare: stepShedShare,
		SentShare: stepSentShare, BacklogS: stepBacklogS, BacklogMin: stepBacklogMin,
		P99MS: float64(o.P99) / float64(time.Millisecond), KneeFactor: o.KneeFactor, MaxInFlight: inFlight}
}

// share formats a share as a percentage ("1%", "95%").
func share(v float64) string { return strconv.FormatFloat(100*v, 'g', 4, 64) + "%" }

// ownBoundNotes says of each ceiling searched with the service's own
// in-flight bound although the run asked for MAX_IN_FLIGHT (its Spec has
// none: ceilingServices found it running outside the driver) why.
func ownBoundNotes(run *driver.Run) []string {
	var o struct{ MaxInFlight *int }
	if run.Setting("ceiling", &o) != nil || o.MaxInFlight == nil || *o.MaxInFlight < 0 {
		return nil
	}
	var out []string
	for _, c := range run.Ceilings {
		if c.Spec != nil && c.Spec.MaxInFlight == nil {
			out = append(out, fmt.Sprintf("%s ceiling: %s runs outside the driver, so its search ran with its own in-flight bound, not MAX_IN_FLIGHT=%d",
				strings.TrimSuffix(c.Scenario, ".ceiling"), c.Service, *o.MaxInFlight))
		}
	}
	return out
}

// CriteriaText words spec's criteria, the latency bound last ("...,
// server processing p99 < 100ms").
func CriteriaText(s driver.CeilingSpec) string {
	t := fmt.Sprintf("errors < %s and shed < %s of the requests sent, sent >= %s of the rate, backlog at the end of each %s step <= max(%g, %g s of arrivals) (flat)",
		share(s.ErrorShare), share(s.ShedShare), share(s.SentShare), time.Duration(s.StepS*float64(time.Second)), s.BacklogMin, s.BacklogS)
	if s.KneeFactor > 0 {
		t += fmt.Sprintf(", server %s p99 <= %g× the side's own p99 at a low rate", s.Latency, s.KneeFactor)
	}
	return t + fmt.Sprintf(", server %s p99 < %s", s.Latency, time.Duration(s.P99MS*float64(time.Millisecond)))
}

// Judge returns every criterion of spec that a step at rate, with
// metrics m, failed (in Criteria's order; none: it passed) and the
// first failure's reason in words, or what it passed with.
func Judge(spec driver.CeilingSpec, m map[string]float64, rate float64) (failed []string, why string) {
	add := func(c, format string, args ...any) {
		if len(failed) == 0 {
			why = fmt.Sprintf(format, args...)
		}
		failed = append(failed, c)
	}
	sent := m[driver.ClientSentRate]
	n := sent * spec.StepS
	if e := m[driver.ClientErrors]; sent > 0 && e > 0 && e >= spec.ErrorShare*n {
		add(CritErrors, "errors %.0f", e)
	}
	if sh := m[driver.ClientShed]; sent > 0 && sh > 0 && sh >= spec.ShedShare*n {
		add(CritShed, "shed %.0f (503 + Retry-After)", sh)
	}
	switch {
	case sent <= 0:
		add(CritSent, "nothing sent")
	case sent < spec.SentShare*rate:
		add(CritSent, "driver sent only %.0f/s", sent)
	}
	key := driver.ServerLatency(spec.Latency, driver.SuffixP99)
	p99, has := m[key]
	if !has {
		add(CritLatency, "no %s latency recorded", spec.Latency)
	}
	if b := m["backlog_end"]; b > math.Max(spec.BacklogMin, spec.BacklogS*rate) {
		add(CritBacklog, "backlog %.0f at the end", b)
	}
	if has && p99 >= spec.P99MS {
		add(CritP99, "%s p99 %.1f ms", spec.Latency, p99)
	}
	if has && spec.KneeFactor > 0 && spec.LowP99MS > 0 && p99 > spec.KneeFactor*spec.LowP99MS {
		add(CritKnee, "%s p99 %.1f ms > %g× its %.1f ms at %g/s", spec.Latency, p99, spec.KneeFactor, spec.LowP99MS, spec.LowRate)
	}
	if len(failed) == 0 {
		why = fmt.Sprintf("%s p99 %.1f ms, backlog %.0f", spec.Latency, p99, m["backlog_end"])
	}
	return failed, why
}

// ladder returns the rates a search climbs: Start × Factor^i to two
// significant digits, up to Max.
func (o CeilingOptions) ladder() []float64 {
	if o.Start <= 0 || o.Factor <= 1 {
		return []float64{o.Start}
	}
	var out []float64
	for i := 0; i < 200; i++ {
		r := roundRate(o.Start * math.Pow(o.Factor, float64(i)))
		if r > o.Max*(1+1e-9) {
			break
		}
		if len(out) == 0 || r > out[len(out)-1] {
			out = append(out, r)
		}
	}
	return out
}

// warmStart is where a side's search after its first starts: the highest
// ladder rate at or below the median knee of its searches before, or
// o.Start when no step of theirs passed.
func warmStart(o CeilingOptions, before []driver.CeilingRound) float64 {
	var rates []float64
	for _, r := range before {
		if r.Rate > 0 {
			rates = append(rates, r.Rate)
		}
	}
	lad := o.ladder()
	if len(rates) == 0 || len(lad) == 0 {
		return o.Start
	}
	m := driver.Aggregate(rates).Median
	start := lad[0]
	for _, r := range lad {
		if r <= m {
			start = r
		}
	}
	return start
}

// search finds the highest passing rate from start: up the ladder until a
// step fails (past its top: Capped), then o.Bisect geometric bisections.
// If the first step fails, it halves the rate up to three times.
func search(ctx context.Context, svc string, o CeilingOptions, start float64, step func(context.Context, string, float64) (driver.CeilingStep, error)) (driver.CeilingRound, error) {
	var cr driver.CeilingRound
	try := func(rate float64) (bool, error) {
		st, err := step(ctx, svc, rate)
		cr.Steps = append(cr.Steps, st)
		if st.Pass && rate > cr.Rate {
			cr.Rate = rate
		}
		return st.Pass, err
	}
	lad := o.ladder()
	i := 0
	for i < len(lad)-1 && lad[i] < start {
		i++
	}
	lo, hi := 0.0, 0.0
	for ; ; i++ {
		if i >= len(lad) {
			cr.Capped = true
			return cr, nil
		}
		ok, err := try(lad[i])
		if err != nil {
			return cr, err
		}
		if !ok {
			hi = lad[i]
			break
		}
		lo = lad[i]
	}
	if lo == 0 {
		for range 3 {
			r := roundRate(hi / 2)
			ok, err := try(r)
			if err != nil {
				return cr, err
			}
			if ok {
				lo = r
				break
			}
			hi = r
		}
		if lo == 0 {
			return cr, nil
		}
	}
	for range o.Bisect {
		mid := roundRate(math.Sqrt(lo * hi))
		if mid <= lo || mid >= hi {
			break
		}
		ok, err := try(mid)
		if err != nil {
			return cr, err
		}
		if ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	return cr, nil
}

// roundRate rounds to two significant digits.
func roundRate(r float64) float64 {
	if r <= 0 {
		return 0
	}
	p := math.Pow(10, math.Floor(math.Log10(r))-1)
	return math.Round(r/p) * p
}

// lowRateP99 is side's median p99 of latency at the lowest fixed rate of
// scenario in run whose every round of the side is valid and recorded
// it, with that rate; 0, 0 when there is none.
func lowRateP99(run *driver.Run, scenario, side, latency string) (rate, p99 float64) {
	key := driver.ServerLatency(latency, driver.SuffixP99)
	for i := range run.Points {
		p := &run.Points[i]
		if p.Scenario != scenario || p.Rate <= 0 || (rate > 0 && p.Rate >= rate) {
			continue
		}
		var vs []float64
		valid := len(p.Rounds) > 0
		for _, r := range p.Rounds {
			sr := r.Sides[side]
			v, ok := 0.0, false
			if sr != nil && driver.RoundStatus(sr).OK() {
				v, ok = sr.Metrics[key]
			}
			if !ok || v <= 0 {
				valid = false
				break
			}
			vs = append(vs, v)
		}
		if valid {
			rate, p99 = p.Rate, driver.Aggregate(vs).Median
		}
	}
	return rate, p99
}

// ceilingServices restarts each side with o.MaxInFlight for the search
// (whatever runs next ensures its own environment) and returns the bound
// each runs with: nil where the driver left the service's own, because
// o says so or because it runs outside the driver (ownBoundNotes).
func (s RateScenario) ceilingServices(ctx context.Context, e *Env, run *driver.Run, o CeilingOptions) (map[string]*int, error) {
	out := map[string]*int{}
	if o.MaxInFlight < 0 {
		return out, nil
	}
	v := strconv.Itoa(o.MaxInFlight)
	envs := map[string]map[string]string{}
	for _, svc := range s.Pair.Services() {
		env := map[string]map[string]string{svc.Name: {"MAX_IN_FLIGHT": v}}
		err := e.Ensure(ctx, []Service{svc}, env, nil)
		switch {
		case errors.Is(err, ErrExternal):
			e.logf("%s ceiling: %s keeps its own in-flight bound: %v", s.Pair.Name, svc.Name, err)
			continue
		case err != nil:
			return nil, err
		}
		n := o.MaxInFlight
		out[svc.Name] = &n
		envs[svc.Name] = env[svc.Name]
	}
	if len(envs) > 0 {
		run.Settings["ceiling_env"] = envs
		s.warmup(ctx, e)
	}
	return out, nil
}

// ceiling runs the ceiling search on both sides of the pair, o.Rounds
// times, alternating sides with the order rotated, with the services'
// in-flight bound set to o.MaxInFlight, and appends one Ceiling per side
// to run: every step with the criteria it failed, the side's knee per
// search and their median.
func (s RateScenario) ceiling(ctx context.Context, e *Env, run *driver.Run, o CeilingOptions) error {
	pair, scenario := s.Pair, s.Pair.Name+".ceiling"
	inFlight, err := s.ceilingServices(ctx, e, run, o)
	if err != nil {
		return err
	}
	specs := map[string]*driver.CeilingSpec{}
	byside := map[string]*driver.Ceiling{}
	for _, svc := range pair.Sides() {
		sp := o.spec(s.CeilingLatency, inFlight[svc])
		if o.KneeFactor > 0 {
			sp.LowRate, sp.LowP99MS = lowRateP99(run, pair.Name+".rate", svc, s.CeilingLatency)
		}
		specs[svc] = &sp
		byside[svc] = &driver.Ceiling{Scenario: scenario, Service: svc, Spec: &sp}
	}
	e.logf("%s %s: search from %g/s (x%g, max %g/s, %d bisections), %s steps, %d rounds, MAX_IN_FLIGHT %d",
		pair.Name, scenario, o.Start, o.Factor, o.Max, o.Bisect, o.Step, o.Rounds, o.MaxInFlight)
	step := func(ctx context.Context, svc string, rate float64) (driver.CeilingStep, error) {
		res, err := s.side(ctx, e, svc, rate, o.Step, 3*e.settle()/2)
		st := driver.CeilingStep{Rate: rate}
		if res != nil {
			st.Metrics = res.Metrics
		}
		if err != nil {
			st.Why = err.Error()
			return st, err
		}
		sp := specs[svc]
		st.Failed, st.Why = Judge(*sp, res.Metrics, rate)
		st.Pass = len(st.Failed) == 0
		if st.Pass && sp.KneeFactor > 0 && sp.LowP99MS == 0 {
			// No fixed rate measured this side: its first passing step
			// is its low-rate p99.
			if v := res.Metrics[driver.ServerLatency(sp.Latency, driver.SuffixP99)]; v > 0 {
				sp.LowRate, sp.LowP99MS = rate, v
			}
		}
		e.logf("  %s %g/s: pass=%v (%s)", svc, rate, st.Pass, st.Why)
		return st, nil
	}
	var first error
	for r := range o.Rounds {
		for _, svc := range driver.Order(pair.Sides(), r) {
			start := o.Start
			if r > 0 {
				start = warmStart(o, byside[svc].Rounds)
			}
			cr, err := search(ctx, svc, o, start, step)
			cr.Index = r
			byside[svc].Rounds = append(byside[svc].Rounds, cr)
			if err != nil && first == nil {
				first = err
			}
			if ctx.Err() != nil {
				break
			}
		}
	}
	for _, svc := range pair.Sides() {
		c := byside[svc]
		var rates []float64
		for _, r := range c.Rounds {
			rates = append(rates, r.Rate)
		}
		if len(rates) > 0 {
			c.Rate = driver.Aggregate(rates)
		}
		run.Ceilings = append(run.Ceilings, *c)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return first
}
