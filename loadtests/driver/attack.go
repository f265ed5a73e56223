package driver

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

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

	var n atomic.Uint64
	targeter := func(t *vegeta.Target) error {
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
	atk := vegeta.NewAttacker(
		vegeta.Timeout(spec.Timeout),
		vegeta.MaxWorkers(spec.MaxWorkers),
		vegeta.Workers(min(spec.MaxWorkers, 16)),
		vegeta.MaxBody(512), // error messages only; the rest is drained
		vegeta.KeepAlive(true),
	)
	stop := context.AfterFunc(ctx, func() { atk.Stop() })
	defer stop()

	var bar *progressbar.ProgressBar
	var label string
	if spec.Progress != nil {
		label = spec.Progress.attackStarted()
	}
	if spec.Progress.Bars() {
		bar = progressbar.NewOptions64(int64(spec.Rate*spec.Duration.Seconds()),
			progressbar.OptionSetWriter(spec.Progress.w),
			progressbar.OptionSetDescription(label+" "+spec.Name),
			progressbar.OptionSetWidth(20),
			progressbar.OptionShowCount(),
			progressbar.OptionSetPredictTime(false),
			progressbar.OptionThrottle(200*time.Millisecond),
			progressbar.OptionClearOnFinish(),
		)
	}

	lat, svc := stats.NewHistogram(), stats.NewHistogram()
	res := ClientResult{TargetRate: spec.Rate, DurationS: spec.Duration.Seconds(), Codes: map[string]int64{}}
	samples := map[string]bool{}
	var lastEnd time.Time
	start := time.Now()
	lastDescribe := start
	for r := range atk.Attack(targeter, p, spec.Duration, spec.Name) {
		res.Requests++
		intended := time.Unix(0, p.began.Load()).Add(time.Duration(float64(r.Seq+1) * interval))
		d := r.End().Sub(intended)
		if d < r.Latency {
			d = r.Latency // sent early (never less than the service time)
		}
		_ = lat.RecordValue(max(d.Microseconds(), 1))
		_ = svc.RecordValue(max(r.Latency.Microseconds(), 1))
		res.Codes[strconv.Itoa(int(r.Code))]++
		switch {
		case r.Code >= 200 && r.Code < 300:
			res.OK++
		case IsShed(r.Code, r.Headers):
			res.Shed++
		default:
			res.Errors++
			msg := r.Error
			if len(r.Body) > 0 {
				msg += ": " + string(bytes.TrimSpace(r.Body))
			}
			if len(samples) < 5 && !samples[msg] {
				samples[msg] = true
				res.ErrorSamples = append(res.ErrorSamples, msg)
			}
		}
		if e := r.End(); e.After(lastEnd) {
			lastEnd = e
		}
		if bar != nil {
			_ = bar.Add(1)
			if now := time.Now(); now.Sub(lastDescribe) > 250*time.Millisecond {
				lastDescribe = now
				el := now.Sub(start).Seconds()
				bar.Describe(fmt.Sprintf("%s %s  rate %.0f/s  shed %d  errors %d  elapsed %.1fs", label, spec.Name, float64(res.Requests)/el, res.Shed, res.Errors, el))
			}
		}
	}
	if bar != nil {
		_ = bar.Finish()
	}
	sort.Strings(res.ErrorSamples)
	if res.DurationS > 0 {
		res.SentRate = round3(float64(res.Requests) / res.DurationS)
	}
	if b := p.began.Load(); b != 0 && lastEnd.After(time.Unix(0, b)) {
		res.Throughput = round3(float64(res.OK) / lastEnd.Sub(time.Unix(0, b)).Seconds())
	}
	res.Latency, res.ServiceTime = stats.Summarize(lat), stats.Summarize(svc)
	if spec.Progress != nil {
		spec.Progress.attackEnded(label, spec, res)
	}
	return res
}
