package stats

import (
	"math"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Histogram range: 1 µs to 1 hour with 3 significant digits (0.1% error).
const (
	minMicros = 1
	maxMicros = int64(time.Hour / time.Microsecond)
	sigFigs   = 3
)

// Info names a service in /stats and in every Prometheus series.
type Info struct {
	// Service is the service's name, e.g. "no-kafka".
	Service string `json:"service"`
	// Pair is the comparison it belongs to, e.g. "log".
	Pair string `json:"pair"`
	// Backend is what it runs on, e.g. "postgres" or "kafka".
	Backend string `json:"backend"`
}

// Recorder holds named latency histograms and counters. All methods are
// safe for concurrent use; Observe and Add cost a mutex and an atomic
// increment, cheap enough for every request.
type Recorder struct {
	info    Info
	started time.Time
	reset   atomic.Int64 // unix nanos of the last reset

	mu       sync.RWMutex
	hists    map[string]*hist
	counters map[string]*atomic.Int64

	reg      *prometheus.Registry
	promLat  *prometheus.HistogramVec
	promCnt  *prometheus.CounterVec
	promHTTP *prometheus.HistogramVec
}

type hist struct {
	mu sync.Mutex
	h  *hdrhistogram.Histogram
}

// New returns a Recorder for the service. The latency and counter names
// listed appear in /stats from the start, at zero, so a client never has to
// guess whether a missing name means "none yet" or "not recorded".
func New(info Info, latencies, counters []string) *Recorder {
	labels := prometheus.Labels{"service": info.Service, "pair": info.Pair, "backend": info.Backend}
	r := &Recorder{
		info:     info,
		started:  time.Now(),
		hists:    map[string]*hist{},
		counters: map[string]*atomic.Int64{},
		reg:      prometheus.NewRegistry(),
		promLat: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:        "wpe_latency_seconds",
			Help:        "Latencies by name, the same observations as GET /stats.",
			ConstLabels: labels,
			Buckets:     prometheus.ExponentialBuckets(0.0001, 2, 18), // 100µs .. ~13s
		}, []string{"name"}),
		promCnt: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name:        "wpe_events_total",
			Help:        "Counters by name, the same as GET /stats (never reset).",
			ConstLabels: labels,
		}, []string{"name"}),
		promHTTP: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:        "wpe_http_request_duration_seconds",
			Help:        "HTTP handler time by method (RFC 9110's, else other), route pattern and status class (2xx).",
			ConstLabels: labels,
			Buckets:     prometheus.ExponentialBuckets(0.0001, 2, 18),
		}, []string{"method", "route", "class"}),
	}
	r.reset.Store(r.started.UnixNano())
	r.reg.MustRegister(r.promLat, r.promCnt, r.promHTTP,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, n := range latencies {
		r.histogram(n)
	}
	for _, n := range counters {
		r.counter(n)
	}
	return r
}

// Info returns the service's names.
func (r *Recorder) Info() Info { return r.info }

func (r *Recorder) histogram(name string) *hist {
	return getOrAdd(&r.mu, r.hists, name, func() *hist { return &hist{h: NewHistogram()} })
}

func (r *Recorder) counter(name string) *atomic.Int64 {
	return getOrAdd(&r.mu, r.counters, name, func() *atomic.Int64 { return new(atomic.Int64) })
}

// getOrAdd returns m[name], adding newV() first if it is missing: a read
// lock for the common case, the write lock only to add.
func getOrAdd[V any](mu *sync.RWMutex, m map[string]*V, name string, newV func() *V) *V {
	mu.RLock()
	v := m[name]
	mu.RUnlock()
	if v != nil {
		return v
	}
	mu.Lock()
	defer mu.Unlock()
	if v = m[name]; v == nil {
		v = newV()
		m[name] = v
	}
	return v
}

// Observe records one latency under name. Values below 1 µs count as 1 µs
// and values above an hour as an hour.
func (r *Recorder) Observe(name string, d time.Duration) {
	us := min(max(d.Microseconds(), minMicros), maxMicros)
	h := r.histogram(name)
	h.mu.Lock()
	_ = h.h.RecordValue(us)
	h.mu.Unlock()
	r.promLat.WithLabelValues(name).Observe(d.Seconds())
}

// Since records time.Since(start) under name.
func (r *Recorder) Since(name string, start time.Time) { r.Observe(name, time.Since(start)) }

// Add adds n to the counter name.
func (r *Recorder) Add(name string, n int64) {
	r.counter(name).Add(n)
	r.promCnt.WithLabelValues(name).Add(float64(n))
}

// Inc adds one to the counter name.
func (r *Recorder) Inc(name string) { r.Add(name, 1) }

// ObserveHTTP records one HTTP request for /metrics; it matches the
// RouterOptions.Observe signature of package httpapi. Every label value
// comes from a closed set, so that no client can grow /metrics by
// inventing values: the method is one of RFC 9110's or "other", the
// status its class ("2xx"), and route must be a registered route pattern
// (httpapi passes chi's pattern, or "unmatched"), never a raw path.
func (r *Recorder) ObserveHTTP(method, route string, status int, d time.Duration) {
	r.promHTTP.WithLabelValues(MethodLabel(method), route, StatusClass(status)).Observe(d.Seconds())
}

// knownMethods are RFC 9110's methods plus PATCH: the method label's
// values besides "other".
var knownMethods = map[string]bool{
	http.MethodGet: true, http.MethodHead: true, http.MethodPost: true,
	http.MethodPut: true, http.MethodPatch: true, http.MethodDelete: true,
	http.MethodConnect: true, http.MethodOptions: true, http.MethodTrace: true,
}

// MethodLabel returns method if it is a standard HTTP method (GET, POST,
// ...), else "other": the method label's closed set.
func MethodLabel(method string) string {
	if knownMethods[method] {
		return method
	}
	return "other"
}

// StatusClass returns the status's class, "1xx" to "5xx", or "other"
// outside 100-599 (a nonstandard 499 is "4xx").
func StatusClass(status int) string {
	if status < 100 || status > 599 {
		return "other"
	}
	return strconv.Itoa(status/100) + "xx"
}

// Reset zeroes every histogram and counter shown by /stats (Prometheus
// series are monotonic and are not reset).
func (r *Recorder) Reset() {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, h := range r.hists {
		h.mu.Lock()
		h.h.Reset()
		h.mu.Unlock()
	}
	for _, c := range r.counters {
		c.Store(0)
	}
	r.reset.Store(time.Now().UnixNano())
}

// Summary is one latency's distribution in milliseconds.
type Summary struct {
	Count  int64   `json:"count"`
	MeanMS float64 `json:"mean_ms"`
	P50MS  float64 `json:"p50_ms"`
	P90MS  float64 `json:"p90_ms"`
	P95MS  float64 `json:"p95_ms"`
	P99MS  float64 `json:"p99_ms"`
	P999MS float64 `json:"p999_ms"`
	MaxMS  float64 `json:"max_ms"`
}

// Snapshot is the body of GET /stats, the same shape for every service.
type Snapshot struct {
	Info
	// StartedAt is when the process started.
	StartedAt time.Time `json:"started_at"`
	// UptimeSeconds is the time since the process started.
	UptimeSeconds float64 `json:"uptime_s"`
	// SinceResetSeconds is the time the numbers below cover: since the
	// last POST /stats/reset, or since start.
	SinceResetSeconds float64 `json:"since_reset_s"`
	// Counters by name.
	Counters map[string]int64 `json:"counters"`
	// Latencies by name.
	Latencies map[string]Summary `json:"latencies"`
}

// Snapshot returns the current numbers.
func (r *Recorder) Snapshot() Snapshot {
	now := time.Now()
	s := Snapshot{
		Info:              r.info,
		StartedAt:         r.started.UTC(),
		UptimeSeconds:     round3(now.Sub(r.started).Seconds()),
		SinceResetSeconds: round3(now.Sub(time.Unix(0, r.reset.Load())).Seconds()),
		Counters:          map[string]int64{},
		Latencies:         map[string]Summary{},
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	for n, c := range r.counters {
		s.Counters[n] = c.Load()
	}
	for n, h := range r.hists {
		h.mu.Lock()
		s.Latencies[n] = Summarize(h.h)
		h.mu.Unlock()
	}
	return s
}

// OrNew is r, or when r is nil a new Recorder of its own that nothing
// serves: what a contract's Options mean by "nil records nothing".
func OrNew(r *Recorder) *Recorder {
	if r == nil {
		return New(Info{}, nil, nil)
	}
	return r
}

// NewHistogram returns a histogram of the shape every latency here uses:
// microseconds, 1 µs to 1 h, 3 significant digits. The load driver records
// its client-side latencies in the same shape, so that both ends of a
// measurement are summarized alike.
func NewHistogram() *hdrhistogram.Histogram {
	return hdrhistogram.New(minMicros, maxMicros, sigFigs)
}

// Summarize returns h's distribution (recorded in microseconds) in
// milliseconds, rounded to the microsecond; all zero when h is empty.
func Summarize(h *hdrhistogram.Histogram) Summary {
	if h.TotalCount() == 0 {
		return Summary{}
	}
	ms := func(us int64) float64 { return round3(float64(us) / 1000) }
	return Summary{
		Count:  h.TotalCount(),
		MeanMS: round3(h.Mean() / 1000),
		P50MS:  ms(h.ValueAtQuantile(50)),
		P90MS:  ms(h.ValueAtQuantile(90)),
		P95MS:  ms(h.ValueAtQuantile(95)),
		P99MS:  ms(h.ValueAtQuantile(99)),
		P999MS: ms(h.ValueAtQuantile(99.9)),
		MaxMS:  ms(h.Max()),
	}
}

func round3(f float64) float64 { return math.Round(f*1000) / 1000 }

// Names returns the latency and counter names, sorted, for tests and docs.
func (r *Recorder) Names() (latencies, counters []string) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for n := range r.hists {
		latencies = append(latencies, n)
	}
	for n := range r.counters {
		counters = append(counters, n)
	}
	sort.Strings(latencies)
	sort.Strings(counters)
	return latencies, counters
}

// StatsHandler serves GET /stats.
func (r *Recorder) StatsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, r.Snapshot())
	})
}

// ResetHandler serves POST /stats/reset: it zeroes the numbers and answers
// with the snapshot taken just before, so a load round can read and reset
// in one call.
func (r *Recorder) ResetHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		s := r.Snapshot()
		r.Reset()
		writeJSON(w, http.StatusOK, s)
	})
}

// MetricsHandler serves GET /metrics in the Prometheus text format.
func (r *Recorder) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{Registry: r.reg})
}

// Registerer lets a service add collectors of its own (a pool's
// statistics, a consumer's lag) to /metrics.
func (r *Recorder) Registerer() prometheus.Registerer { return r.reg }
