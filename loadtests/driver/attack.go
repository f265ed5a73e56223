package driver

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"net/http"
	"runtime/debug"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/schollz/progressbar/v3"
	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/stats"
)

// Request is one HTTP request of an attack.
type Request struct {
	// Method is the HTTP method; empty means GET.
	Method string
	// URL is the absolute URL.
	URL string
	// Body is sent as application/json when not nil.
	Body []byte
}

// AttackSpec describes one constant-rate attack.
type AttackSpec struct {
	// Name labels the progress bar ("no-rabbitmq 1000/s").
	Name string
	// Rate is the arrival rate in requests per second (> 0).
	Rate float64
	// Duration is how long requests are started for (> 0).
	Duration time.Duration
	// Timeout bounds each request; default 10s.
	Timeout time.Duration
	// MaxWorkers caps the concurrent requests; default 2000. When the cap
	// is reached arrivals queue in the driver, and their wait still counts
	// in Latency (measured from the intended send time).
	MaxWorkers uint64
	// Next returns the n-th request (n from 0). It is called from many
	// goroutines at once and must be safe for that.
	Next func(n uint64) Request
	// Progress reports the attack: a progress bar (rate, errors, elapsed)
	// on a terminal, else one line with its outcome; nil for none.
	Progress *Progress
}

// ClientResult is what the driver saw of one attack.
type ClientResult struct {
	// TargetRate is the requested arrival rate (per second).
	TargetRate float64 `json:"target_rate"`
	// DurationS is the attack's duration in seconds.
	DurationS float64 `json:"duration_s"`
	// Requests counts requests started; OK those answered 2xx; Shed those
	// a service refused under overload (503 with Retry-After, see
	// MAX_IN_FLIGHT: nothing of them was accepted, and they are not
	// failures); Errors the others (transport errors and other non-2xx
	// answers). Results written before sheds were counted load with Shed
	// 0 and their sheds among Errors.
	Requests int64 `json:"requests"`
	OK       int64 `json:"ok"`
	Shed     int64 `json:"shed"`
	Errors   int64 `json:"errors"`
	// Codes counts answers by HTTP status ("0" for transport errors).
	Codes map[string]int64 `json:"codes"`
	// ErrorSamples holds up to five distinct error messages.
	ErrorSamples []string `json:"error_samples,omitempty"`
	// SentRate is Requests / DurationS: how close pacing came to
	// TargetRate.
	SentRate float64 `json:"sent_rate"`
	// Throughput is OK answers per second over the attack's wall time
	// (first intended send to last answer).
	Throughput float64 `json:"throughput"`
	// Latency is measured from each request's intended send time to the
	// end of its answer (coordinated omission corrected).
	Latency Summary `json:"latency"`
	// ServiceTime is vegeta's own latency: from the actual send.
	ServiceTime Summary `json:"service_time"`
	// Late counts a closed loop's operations that completed after its
	// measuring window, within GraceS; they are also counted in Requests
	// and OK or Errors. InFlight counts those still running at the
	// bound, abandoned and counted nowhere else. Both are absent (0) for
	// attacks, which wait for every request up to its timeout, and in
	// results written before Loop counted them (GraceS 0).
	Late     int64   `json:"late,omitempty"`
	InFlight int64   `json:"in_flight,omitempty"`
	GraceS   float64 `json:"grace_s,omitempty"`
}

// IsShed reports whether an answer is a shed: 503 with a Retry-After
// header, what a service answers when MAX_IN_FLIGHT requests are in
// flight. A 503 without it (a backend timeout) is an error.
func IsShed(code uint16, h http.Header) bool {
	return code == http.StatusServiceUnavailable && h.Get("Retry-After") != ""
}

// Summary is one latency distribution in milliseconds, the same shape as a
// service's /stats latencies (it is the kit's type).
type Summary = stats.Summary

func round3(f float64) float64 { return math.Round(f*1000) / 1000 }

// pacer wraps a ConstantPacer to learn when vegeta's attack began: the
// first Pace call receives the time elapsed since then.
type pacer struct {
	vegeta.ConstantPacer
	once  sync.Once
	began atomic.Int64 // unix nanos
}

func (p *pacer) Pace(elapsed time.Duration, hits uint64) (time.Duration, bool) {
	p.once.Do(func() { p.began.Store(time.Now().Add(-elapsed).UnixNano()) })
	return p.ConstantPacer.Pace(elapsed, hits)
}

// constantPacer turns a rate into vegeta's integer Freq per Per.
func constantPacer(rate float64) vegeta.ConstantPacer {
	if rate == math.Trunc(rate) && rate >= 1 {
		return vegeta.ConstantPacer{Freq: int(rate), Per: time.Second}
	}
	return vegeta.ConstantPacer{Freq: int(math.Round(rate * 1000)), Per: 1000 * time.Second}
}

// Attack runs spec and returns what the client saw. It returns early, with
// the requests sent so far, when ctx is cancelled.
func Attack(ctx context.Context, spec AttackSpec) ClientResult {
	if spec.Timeout == 0 {
		spec.Timeout = 10 * time.Second
	}
	if spec.MaxWorkers == 0 {
		spec.MaxWorkers = 2000
	}
	p := &pacer{ConstantPacer: constantPacer(spec.Rate)}
	interval := float64(p.Per.Nanoseconds()) / float64(p.Freq)

	targeter := attackTargeter(spec)
	atk := vegeta.NewAttacker(
		vegeta.Timeout(spec.Timeout),
		vegeta.MaxWorkers(spec.MaxWorkers),
		vegeta.Workers(min(spec.MaxWorkers, 16)),
		vegeta.MaxBody(512), // error messages only; the rest is drained
		vegeta.KeepAlive(true),
	)
	stop := context.AfterFunc(ctx, func() { atk.Stop() })
	defer stop()

	var label string
	if spec.Progress != nil {
		label = spec.Progress.attackStarted()
	}
	bar := attackBar(spec, label)

	t := newTally(spec.Rate, spec.Duration)
	defer lessGC()()
	start := time.Now()
	lastDescribe := start
	// The attack is unnamed: vegeta would send its name in an
	// X-Vegeta-Attack header with every request, for the service to parse.
	for r := range atk.Attack(targeter, p, spec.Duration, "") {
		intended := time.Unix(0, p.began.Load()).Add(time.Duration(float64(r.Seq+1) * interval))
		d := r.End().Sub(intended)
		if d < r.Latency {
			d = r.Latency // sent early (never less than the service time)
		}
		msg := r.Error
		if len(r.Body) > 0 {
			msg += ": " + string(bytes.TrimSpace(r.Body))
		}
		t.add(answer{int(r.Code), IsShed(r.Code, r.Headers), msg, d, r.Latency, r.End()})
		if bar != nil {
			_ = bar.Add(1)
			if now := time.Now(); now.Sub(lastDescribe) > 250*time.Millisecond {
				lastDescribe = now
				el := now.Sub(start).Seconds()
				bar.Describe(fmt.Sprintf("%s %s  rate %.0f/s  shed %d  errors %d  elapsed %.1fs", label, spec.Name, float64(t.res.Requests)/el, t.res.Shed, t.res.Errors, el))
			}
		}
	}
	if bar != nil {
		_ = bar.Finish()
	}
	var began time.Time
	if b := p.began.Load(); b != 0 {
		began = time.Unix(0, b)
	}
	res := t.result(began)
	if spec.Progress != nil {
		spec.Progress.attackEnded(label, spec, res)
	}
	return res
}

// attackTargeter is the attack's targeter: spec.Next's requests in
// sequence, JSON bodies labelled so.
func attackTargeter(spec AttackSpec) vegeta.Targeter {
	var n atomic.Uint64
	return func(t *vegeta.Target) error {
		r := spec.Next(n.Add(1) - 1)
		t.Method, t.URL, t.Body = r.Method, r.URL, r.Body
		if t.Method == "" {
			t.Method = http.MethodGet
		}
		t.Header = http.Header{}
		if r.Body != nil {
			t.Header.Set("Content-Type", "application/json")
		}
		return nil
	}
}

// attackBar is the attack's progress bar when spec.Progress draws bars,
// or nil.
func attackBar(spec AttackSpec, label string) *progressbar.ProgressBar {
	if !spec.Progress.Bars() {
		return nil
	}
	return progressbar.NewOptions64(int64(spec.Rate*spec.Duration.Seconds()),
		progressbar.OptionSetWriter(spec.Progress.w),
		progressbar.OptionSetDescription(label+" "+spec.Name),
		progressbar.OptionSetWidth(20),
		progressbar.OptionShowCount(),
		progressbar.OptionSetPredictTime(false),
		progressbar.OptionThrottle(200*time.Millisecond),
		progressbar.OptionClearOnFinish(),
	)
}

// tally counts the answers of one attack or loop.
type tally struct {
	res      ClientResult
	lat, svc *hdrhistogram.Histogram
	samples  map[string]bool
	lastEnd  time.Time
}

func newTally(rate float64, d time.Duration) *tally {
	return &tally{
		res:     ClientResult{TargetRate: rate, DurationS: d.Seconds(), Codes: map[string]int64{}},
		lat:     stats.NewHistogram(),
		svc:     stats.NewHistogram(),
		samples: map[string]bool{},
	}
}

// answer is one answer the tally counts: its status (0 for a transport
// error), whether it was shed (a 503 with Retry-After: counted apart from
// errors), the error message kept as a sample when it is neither a 2xx
// nor shed, its latency and service time, and when it ended.
type answer struct {
	code             int
	shed             bool
	msg              string
	latency, service time.Duration
	end              time.Time
}

// add counts one answer.
func (t *tally) add(a answer) {
	code, shed, msg, latency, service, end := a.code, a.shed, a.msg, a.latency, a.service, a.end
	t.res.Requests++
	_ = t.lat.RecordValue(max(latency.Microseconds(), 1))
	_ = t.svc.RecordValue(max(service.Microseconds(), 1))
	t.res.Codes[strconv.Itoa(code)]++
	switch {
	case code >= 200 && code < 300:
		t.res.OK++
	case shed:
		t.res.Shed++
	default:
		t.res.Errors++
		if len(t.samples) < 5 && !t.samples[msg] {
			t.samples[msg] = true
			t.res.ErrorSamples = append(t.res.ErrorSamples, msg)
		}
	}
	if end.After(t.lastEnd) {
		t.lastEnd = end
	}
}

// result is the tally's ClientResult; throughput counts from began (zero:
// not known) to the last answer.
func (t *tally) result(began time.Time) ClientResult {
	res := t.res
	sort.Strings(res.ErrorSamples)
	if res.DurationS > 0 {
		res.SentRate = round3(float64(res.Requests) / res.DurationS)
	}
	if !began.IsZero() && t.lastEnd.After(began) {
		res.Throughput = round3(float64(res.OK) / t.lastEnd.Sub(began).Seconds())
	}
	res.Latency, res.ServiceTime = stats.Summarize(t.lat), stats.Summarize(t.svc)
	return res
}

// DefaultLoopGrace is how long, after a closed loop's Duration, Loop
// waits for the operations still running (LoopSpec.Grace's default).
const DefaultLoopGrace = 30 * time.Second

// LoopSpec describes a closed-model load: Workers goroutines each run Op
// again as soon as it returns, for Duration. Unlike an Attack's arrivals,
// the load follows the service: a slower answer means fewer operations.
// It is the shape of the event-store bench's appends, where each
// operation may read the stream before it appends.
type LoopSpec struct {
	// Name labels the progress line ("no-kurrentdb append").
	Name string
	// Workers is how many operations run at once (> 0).
	Workers int
	// Duration is how long operations are started for (> 0): the
	// measuring window.
	Duration time.Duration
	// Grace bounds the wait, after the window, for the operations still
	// running; 0 means DefaultLoopGrace. An operation that completes
	// within it is counted as usual and as late; one still running at the
	// bound has its ctx cancelled and is counted as in flight (its answer,
	// if any, is not counted).
	Grace time.Duration
	// Op performs one operation of worker w (n counts the worker's
	// operations from 0) and returns the status that decides it (0 with
	// err for a transport error); a 2xx counts as OK. Its ctx ends at
	// Duration + Grace, or with the caller's ctx.
	Op func(ctx context.Context, w int, n uint64) (status int, err error)
	// Progress reports the loop as one line once it ends; nil for none.
	Progress *Progress
}

// Loop runs spec and returns what the client saw, as Attack does:
// Requests counts operations, Latency and ServiceTime are both each
// operation's own duration (a closed loop has no intended send time), and
// Throughput is OK operations per second of the loop's wall time.
// No operation is dropped silently: one still running when the window
// ends is waited for, up to spec.Grace, and counted in Late when it
// completes, or in InFlight when the bound (or ctx) abandons it.
// DurationS is the wall time, window and wait for the late ones.
func Loop(ctx context.Context, spec LoopSpec) ClientResult {
	var label string
	if spec.Progress != nil {
		label = spec.Progress.attackStarted()
	}
	grace := spec.Grace
	if grace <= 0 {
		grace = DefaultLoopGrace
	}
	t := newTally(0, spec.Duration)
	var mu sync.Mutex
	start := time.Now()
	windowEnd := start.Add(spec.Duration)
	opCtx, cancelOps := context.WithDeadline(ctx, windowEnd.Add(grace))
	defer cancelOps()
	var late, inFlight atomic.Int64
	var wg sync.WaitGroup
	for w := range spec.Workers {
		wg.Go(func() {
			// The clock, not a timer's ctx, ends the window: a timer
			// fires late on a busy machine.
			for n := uint64(0); ctx.Err() == nil && time.Now().Before(windowEnd); n++ {
				t0 := time.Now()
				code, err := spec.Op(opCtx, w, n)
				end := time.Now()
				if err != nil && opCtx.Err() != nil {
					// Abandoned at the bound (or by the caller): no
					// answer to count.
					inFlight.Add(1)
					return
				}
				if end.After(windowEnd) {
					late.Add(1)
				}
				msg := ""
				if err != nil {
					code, msg = 0, err.Error()
				} else if code < 200 || code >= 300 {
					msg = strconv.Itoa(code) + " " + http.StatusText(code)
				}
				mu.Lock()
				t.add(answer{code, false, msg, end.Sub(t0), end.Sub(t0), end})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	t.res.DurationS = round3(time.Since(start).Seconds())
	t.res.Late, t.res.InFlight = late.Load(), inFlight.Load()
	t.res.GraceS = grace.Seconds()
	res := t.result(start)
	if spec.Progress != nil {
		spec.Progress.loopEnded(label, AttackSpec{Name: spec.Name, Duration: spec.Duration}, res)
	}
	return res
}

// AttackGCPercent is the driver's GOGC while an attack runs. The driver
// shares the machine with the servers it measures, and at thousands of
// requests per second the garbage collector was a fifth of its CPU
// (profiled at 10,000/s): collecting four times less often costs a few
// tens of megabytes of heap and leaves that CPU to the servers.
const AttackGCPercent = 400

var (
	gcMu    sync.Mutex
	gcUsers int
	gcPrev  int
)

// lessGC sets AttackGCPercent for the attacks running and returns the
// function that restores the previous setting when the last one ends.
func lessGC() func() {
	gcMu.Lock()
	defer gcMu.Unlock()
	if gcUsers == 0 {
		gcPrev = debug.SetGCPercent(AttackGCPercent)
		if gcPrev < 0 || gcPrev > AttackGCPercent {
			// GC off, or already rarer: leave it as it was.
			debug.SetGCPercent(gcPrev)
		}
	}
	gcUsers++
	return func() {
		gcMu.Lock()
		defer gcMu.Unlock()
		if gcUsers--; gcUsers == 0 {
			debug.SetGCPercent(gcPrev)
		}
	}
}
