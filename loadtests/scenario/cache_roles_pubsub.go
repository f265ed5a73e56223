package scenario

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/stats"
)

// The pub/sub ladders: for each subscriber count and side, subscribers
// on one channel of the side's instance, then open-loop publishes at each
// rate of the ladder, each message carrying its step and the time it was
// made, until a step fails (CacheRolesOptions.Rates), then bisections
// between the last rate passed and the first failed, in every round.
// Every rate is a point; each ladder's highest passing rate is a point of
// its own, its figure the rate 2 of 3 rounds passed.

// rolesSub is one SSE subscriber of the driver: it reads its stream on a
// goroutine of its own and records each message's delivery latency (now
// minus the time the message was made) under the message's step.
type rolesSub struct {
	resp   *http.Response
	cancel context.CancelFunc
	ended  atomic.Bool
	done   chan struct{}

	mu     sync.Mutex
	hists  map[int]*hdrhistogram.Histogram
	counts map[int]int64
}

// subscribe opens a subscription of ch on base and waits for its
// "subscribed" event.
func (r *rolesRun) subscribe(ctx context.Context, base, ch string) (*rolesSub, error) {
	sctx, cancel := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(sctx, http.MethodGet, base+"/channels/"+ch+"/subscribe", nil)
	if err != nil {
		cancel()
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := r.sse.Do(req)
	if err != nil {
		cancel()
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		_ = resp.Body.Close()
		cancel()
		return nil, fmt.Errorf("subscribe: %d", resp.StatusCode)
	}
	s := &rolesSub{resp: resp, cancel: cancel, done: make(chan struct{}), hists: map[int]*hdrhistogram.Histogram{}, counts: map[int]int64{}}
	rd := bufio.NewReaderSize(resp.Body, 64<<10)
	first := make(chan error, 1)
	go s.read(rd, first)
	select {
	case err := <-first:
		if err != nil {
			s.close()
			return nil, err
		}
	case <-time.After(30 * time.Second):
		s.close()
		return nil, fmt.Errorf("subscribe: no subscribed event within 30s")
	}
	return s, nil
}

// read reads the stream until it ends: first reports the "subscribed"
// event (or the failure before it).
func (s *rolesSub) read(rd *bufio.Reader, first chan<- error) {
	defer close(s.done)
	defer s.ended.Store(true)
	subscribed := false
	event := ""
	for {
		line, err := rd.ReadSlice('\n')
		if err != nil {
			if !subscribed {
				first <- fmt.Errorf("subscribe: the stream ended before its subscribed event: %w", err)
			}
			return
		}
		switch {
		case len(line) == 1:
			event = ""
		case bytes.HasPrefix(line, []byte("event: ")):
			event = strings.TrimSpace(string(line[7:]))
			if event == "subscribed" && !subscribed {
				subscribed = true
				first <- nil
			}
			if event == "end" {
				return
			}
		case event == "message" && bytes.HasPrefix(line, []byte("data: ")):
			s.delivered(line[6:], time.Now())
		}
	}
}

// delivered records one message `{"s":<step>,"t":<unix ns>}`.
func (s *rolesSub) delivered(data []byte, now time.Time) {
	d := string(data)
	_, rest, ok := strings.Cut(d, `"s":`)
	if !ok {
		return
	}
	sv, rest, ok := strings.Cut(rest, `,"t":`)
	if !ok {
		return
	}
	step, err1 := strconv.Atoi(sv)
	tv, _, _ := strings.Cut(rest, "}")
	t, err2 := strconv.ParseInt(tv, 10, 64)
	if err1 != nil || err2 != nil {
		return
	}
	s.mu.Lock()
	h := s.hists[step]
	if h == nil {
		h = stats.NewHistogram()
		s.hists[step] = h
	}
	record(h, now.Sub(time.Unix(0, t)))
	s.counts[step]++
	s.mu.Unlock()
}

// merge adds the latencies s received of step to h, under s's lock,
// and returns how many it received.
func (s *rolesSub) merge(step int, h *hdrhistogram.Histogram) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sh := s.hists[step]; sh != nil {
		h.Merge(sh)
	}
	return s.counts[step]
}

func (s *rolesSub) close() {
	s.cancel()
	_ = s.resp.Body.Close()
	<-s.done
}

// ladderStep is one measured step of a ladder.
type ladderStep struct {
	rate float64
	res  *driver.SideResult
	pass bool
}

// pubsub climbs a ladder per subscriber count, round and side (sides in
// turn, their order rotated per count and round), bisects between each
// ladder's last passing and first failing rate, then records every step
// and each ladder's ceiling as points: one round per round, the ceiling's
// figure the rate 2 of 3 rounds passed (driver.RateAgg).
func (r *rolesRun) pubsub(ctx context.Context, run *driver.Run) error {
	o := r.o
	sides := r.sideNames()
	for k, n := range o.Subscribers {
		// ladders[round][side] are the steps of that round's ladder.
		ladders := make([]map[string][]ladderStep, o.Rounds)
		for round := range o.Rounds {
			ladders[round] = map[string][]ladderStep{}
			for _, side := range driver.Order(sides, k+round) {
				steps, err := r.ladder(ctx, side, n, round)
				ladders[round][side] = steps
				if err != nil && ctx.Err() != nil {
					return err
				}
				if err != nil {
					r.e.logf("cache roles, pub/sub %d subscribers on %s, round %d: %v", n, side, round+1, err)
				}
			}
		}
		run.Points = append(run.Points, r.stepPoints(n, k, ladders)...)
		run.Points = append(run.Points, r.ceilingPoint(n, k, ladders))
	}
	return ctx.Err()
}

// stepPoints are the points of one subscriber count's ladders (number k
// of the counts): one per rate some ladder measured, rising, with a
// round per round that measured it.
func (r *rolesRun) stepPoints(n, k int, ladders []map[string][]ladderStep) []driver.Point {
	o, sides := r.o, r.sideNames()
	var rates []float64
	for _, l := range ladders {
		for _, steps := range l {
			for _, st := range steps {
				if !slices.Contains(rates, st.rate) {
					rates = append(rates, st.rate)
				}
			}
		}
	}
	slices.Sort(rates)
	var out []driver.Point
	for _, rate := range rates {
		p := driver.Point{Scenario: CachePubSubScenario, Name: SubscribersName(n) + ", " + driver.Label(rate),
			DurationS: o.Step.Seconds(), Sides: sides}
		measured := map[string]bool{}
		for round, l := range ladders {
			rd := driver.Round{Index: round, Order: driver.Order(sides, k+round), Sides: map[string]*driver.SideResult{}}
			for _, side := range sides {
				for _, st := range l[side] {
					if st.rate == rate {
						rd.Sides[side] = st.res
						measured[side] = true
					}
				}
			}
			if len(rd.Sides) > 0 {
				p.Rounds = append(p.Rounds, rd)
			}
		}
		for _, side := range sides {
			if !measured[side] {
				p.SkipSide(side, "its ladder stopped at a lower rate in every round")
			}
		}
		driver.Summarize(&p)
		out = append(out, p)
	}
	return out
}

// ceilingPoint is one subscriber count's ceiling (number k of the
// counts): per round and side, the highest rate its ladder passed.
func (r *rolesRun) ceilingPoint(n, k int, ladders []map[string][]ladderStep) driver.Point {
	o, sides := r.o, r.sideNames()
	c := driver.Point{Scenario: CachePubSubCeilingScenario, Name: SubscribersName(n), Sides: sides}
	for round, l := range ladders {
		rd := driver.Round{Index: round, Order: driver.Order(sides, k+round), Sides: map[string]*driver.SideResult{}}
		for _, side := range sides {
			steps := l[side]
			if len(steps) == 0 {
				rd.Sides[side] = &driver.SideResult{Service: side, Error: "no step was measured"}
				continue
			}
			m := map[driver.Metric]float64{MetricSubscribers: float64(n), MetricMaxPublishRate: 0, MetricMaxDeliveriesPerS: 0, MetricLadderCapped: 0}
			for _, st := range steps {
				if st.pass && st.rate >= m[MetricMaxPublishRate] {
					m[MetricMaxPublishRate] = st.rate
					m[MetricMaxDeliveriesPerS] = st.res.Metrics[MetricDeliveriesPerS]
				}
			}
			if m[MetricMaxPublishRate] == o.Rates[len(o.Rates)-1] {
				m[MetricLadderCapped] = 1
			}
			rd.Sides[side] = &driver.SideResult{Service: side, Metrics: m}
		}
		c.Rounds = append(c.Rounds, rd)
	}
	driver.Summarize(&c)
	return c
}

// ladder runs one ladder of round: n subscribers of a channel of its
// own on side, then each rate until a step fails, then Bisect halvings
// between the last passing rate and the failing one (the lowest rate
// failing: the interval's low end is 0).
func (r *rolesRun) ladder(ctx context.Context, side string, n, round int) ([]ladderStep, error) {
	o := r.o
	base := r.url(r.sideIndex(side))
	ch := fmt.Sprintf("roles-%s-%d-%d", r.id, n, round)
	var subs []*rolesSub
	defer func() {
		for _, s := range subs {
			s.close()
		}
	}()
	open := func() error {
		for i, s := range subs {
			if s.ended.Load() {
				s.close()
				ns, err := r.subscribe(ctx, base, ch)
				if err != nil {
					return err
				}
				subs[i] = ns
			}
		}
		for len(subs) < n {
			s, err := r.subscribe(ctx, base, ch)
			if err != nil {
				return err
			}
			subs = append(subs, s)
		}
		return nil
	}
	var steps []ladderStep
	measure := func(rate float64) (bool, error) {
		si := len(steps)
		if err := open(); err != nil {
			return false, fmt.Errorf("%d subscribers at step %d: %w", n, si, err)
		}
		st, err := r.ladderStep(ctx, ladderChannel{side: side, base: base, ch: ch, subs: subs}, si, rate)
		if err != nil {
			return false, err
		}
		steps = append(steps, st)
		return st.pass, ctx.Err()
	}
	lo, hi := 0.0, 0.0
	for _, rate := range o.Rates {
		pass, err := measure(rate)
		if err != nil {
			return steps, err
		}
		if !pass {
			hi = rate
			break
		}
		lo = rate
	}
	for range o.Bisect {
		if hi == 0 {
			break // the ladder's top passed: a lower bound, nothing to bisect
		}
		mid := math.Round((lo + hi) / 2)
		if mid <= lo || mid >= hi {
			break
		}
		pass, err := measure(mid)
		if err != nil {
			return steps, err
		}
		if pass {
			lo = mid
		} else {
			hi = mid
		}
	}
	return steps, ctx.Err()
}

// ladderChannel is the channel a pub/sub ladder's steps publish to: the
// side, its base URL, the channel's name and its subscribers now.
type ladderChannel struct {
	side, base, ch string
	subs           []*rolesSub
}

// ladderStep publishes at rate for Step to lc.ch, whose subscribers are
// lc.subs, waits up to rolesDrain for the deliveries and measures the
// step (number si of the ladder).
func (r *rolesRun) ladderStep(ctx context.Context, lc ladderChannel, si int, rate float64) (ladderStep, error) {
	side, base, ch, subs := lc.side, lc.base, lc.ch, lc.subs
	o, n := r.o, len(subs)
	if err := driver.ResetStats(ctx, base); err != nil {
		return ladderStep{}, err
	}
	res := &driver.SideResult{Service: side, StartedAt: time.Now().UTC(), Metrics: map[driver.Metric]float64{}}
	set := r.costs[side]
	before := set.Sample()
	c := driver.Attack(ctx, driver.AttackSpec{
		Name: fmt.Sprintf("%-8s publish %d subs %g/s", side, n, rate), Rate: rate, Duration: o.Step,
		MaxWorkers: r.e.MaxWorkers, Progress: r.e.Progress,
		Next: func(uint64) driver.Request {
			return driver.Request{Method: http.MethodPost, URL: base + "/channels/" + ch + "/messages",
				Body: fmt.Appendf(nil, `{"s":%d,"t":%d}`, si, time.Now().UnixNano())}
		},
	})
	want := c.OK * int64(n)
	h, got, ended := collect(subs, si)
	for wait := time.Now().Add(rolesDrain); got < want && time.Now().Before(wait) && ctx.Err() == nil; {
		time.Sleep(20 * time.Millisecond)
		h, got, ended = collect(subs, si)
	}
	used := set.Sample().Sub(before)
	m := res.Metrics
	m[MetricSubscribers], m[MetricPublishRate] = float64(n), rate
	m[MetricPublishedPerS], m[MetricPublishErrors] = c.Throughput, float64(c.Errors+c.Shed)
	m[driver.ClientSentRate] = c.SentRate
	m[driver.ClientP50], m[driver.ClientP99] = c.Latency.P50MS, c.Latency.P99MS
	m[MetricDeliveriesPerS] = math.Round(float64(got)/max(c.DurationS, o.Step.Seconds())*10) / 10
	m[MetricDeliveryP50], m[MetricDeliveryP99], m[MetricDeliveryMax] = ms(h, 50), ms(h, 99), ms(h, 100)
	m[MetricMissed], m[MetricEnded] = float64(max(want-got, 0)), float64(ended)
	addCPU(m, used, got, MetricCPUPerKDeliveries)
	// The pairs' absolute rule (Judge): under driver.FailShare errors and
	// shed, SendShare of the rate sent, the p99 within the bound; and every subscriber got
	// every message, no subscription ended.
	pass := got > 0 && ms(h, 99) <= float64(o.P99Bound.Milliseconds()) && want == got && ended == 0 &&
		float64(c.Errors+c.Shed) < driver.FailShare*float64(max(c.Requests, 1)) && c.SentRate >= SendShare*rate
	m[MetricPass] = 0
	if pass {
		m[MetricPass] = 1
	}
	if st, err := driver.GetStats(ctx, base); err == nil {
		res.Stats = st
	}
	r.e.logf("cache roles, pub/sub %s, %d subscribers, %g/s: %d of %d delivered, p99 %g ms, pass %v", side, n, rate, got, want, ms(h, 99), pass)
	return ladderStep{rate: rate, res: res, pass: pass}, nil
}

// collect merges what subs received of step si: the latencies, how many,
// and how many subscriptions ended.
func collect(subs []*rolesSub, si int) (*hdrhistogram.Histogram, int64, int) {
	h := stats.NewHistogram()
	var got int64
	ended := 0
	for _, s := range subs {
		got += s.merge(si, h)
		if s.ended.Load() {
			ended++
		}
	}
	return h, got, ended
}
