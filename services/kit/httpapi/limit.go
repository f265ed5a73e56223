package httpapi

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Defaults of the in-flight bound (ServerConfig.MaxInFlight and
// MaxInFlightWait).
const (
	// DefaultMaxInFlight is MAX_IN_FLIGHT's default: well above what a
	// side needs at its ceiling (Little's law: a few thousand requests per
	// second times a few milliseconds each), well below the thousands of
	// goroutines an open-loop overload would otherwise pile up in front of
	// a 16-connection pool or a broker client.
	DefaultMaxInFlight = 128
	// MaxMaxInFlight is MAX_IN_FLIGHT's largest accepted value; 0 turns
	// the bound off.
	MaxMaxInFlight = 100000
	// DefaultMaxInFlightWait is MAX_IN_FLIGHT_WAIT's default: how long a
	// request may wait for a free slot before it is shed, so that a burst
	// shorter than that is queued rather than refused.
	DefaultMaxInFlightWait = 10 * time.Millisecond
	// ShedRetryAfter is the Retry-After a shed request is answered with.
	ShedRetryAfter = time.Second
)

// unboundedPaths are never shed nor counted: probes, scrapes and the
// progress endpoints a load driver reads during an overload must answer
// while the service sheds, and the contracts' static documents cost
// nothing.
var unboundedPaths = map[string]bool{
	"/healthz": true, "/readyz": true, "/metrics": true, "/stats": true, "/stats/reset": true,
	"/queue": true, "/consumer": true, "/openapi.yaml": true, "/capabilities": true, "/backend": true,
	"/subscribe": true,
}

// Unbounded reports whether a request bypasses the in-flight bound: the
// probes and scrapes (/healthz, /readyz, /metrics, /stats), the progress
// endpoints (/queue, /consumer), static documents, and every request that
// mostly waits rather than works: long polls (a path ending in /wait) and
// the Server-Sent Events stream (/subscribe). A long poll holds no
// backend resource while it waits, and counting it would let idle waiters
// shed the work they wait for. Only the path decides: a header (Accept:
// text/event-stream on a POST, say) must not let a client past the bound.
func Unbounded(r *http.Request) bool {
	p := r.URL.Path
	return unboundedPaths[p] || strings.HasSuffix(p, "/wait")
}

// Limiter bounds the requests a service handles at once. A request that
// finds every slot taken waits up to its wait for one, and is then shed:
// answered 503 with Retry-After and an {"error": ...} body, without
// reaching its handler, so that nothing it carried was accepted. Requests
// for which Unbounded is true pass without a slot. Its methods are safe for
// concurrent use.
type Limiter struct {
	slots chan struct{}
	wait  time.Duration
	// body is the shed answer's JSON, made once: under overload a shed
	// is most of what the service does, and it must cost next to nothing.
	body   []byte
	onShed func()
	logger *slog.Logger
	shed   atomic.Int64
	logged atomic.Int64 // unix nanos of the last shed warning
}

// NewLimiter returns a Limiter of the given slots (0 or less: unbounded) whose
// requests wait up to wait for one. onShed, if set, is called once per
// shed request (the service counts it in /stats); logger, if set, gets at
// most one warning a second while requests are shed (one line per shed
// would itself be a load).
func NewLimiter(slots int, wait time.Duration, onShed func(), logger *slog.Logger) *Limiter {
	l := &Limiter{wait: max(wait, 0), onShed: onShed, logger: logger}
	if slots > 0 {
		l.slots = make(chan struct{}, slots)
		b, _ := json.Marshal(map[string]string{"error": fmt.Sprintf(
			"overloaded: %d requests in flight (MAX_IN_FLIGHT); nothing of this request was accepted, retry after %v",
			slots, ShedRetryAfter)})
		l.body = append(b, '\n')
	}
	return l
}

// Shed returns how many requests were shed since the Limiter was made.
func (l *Limiter) Shed() int64 { return l.shed.Load() }

// InFlight returns how many bounded requests hold a slot now.
func (l *Limiter) InFlight() int { return len(l.slots) }

// Middleware applies the bound to next.
func (l *Limiter) Middleware(next http.Handler) http.Handler {
	if l.slots == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if Unbounded(r) {
			next.ServeHTTP(w, r)
			return
		}
		if !l.acquire(r) {
			l.reject(w)
			return
		}
		defer func() { <-l.slots }()
		next.ServeHTTP(w, r)
	})
}

func (l *Limiter) acquire(r *http.Request) bool {
	select {
	case l.slots <- struct{}{}:
		return true
	default:
	}
	if l.wait <= 0 {
		return false
	}
	t := time.NewTimer(l.wait)
	defer t.Stop()
	select {
	case l.slots <- struct{}{}:
		return true
	case <-t.C:
		return false
	case <-r.Context().Done():
		return false
	}
}

func (l *Limiter) reject(w http.ResponseWriter) {
	n := l.shed.Add(1)
	if l.onShed != nil {
		l.onShed()
	}
	if now := time.Now().UnixNano(); l.logger != nil {
		if last := l.logged.Load(); now-last >= int64(time.Second) && l.logged.CompareAndSwap(last, now) {
			l.logger.Warn("overloaded: shedding requests with 503 (MAX_IN_FLIGHT)",
				"max_in_flight", cap(l.slots), "shed_total", n)
		}
	}
	h := w.Header()
	h["Retry-After"] = retryAfter
	h["Content-Type"] = jsonType
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = w.Write(l.body)
}

// The shed answer's header values, shared (net/http only reads them).
var (
	retryAfter = []string{strconv.Itoa(int(ShedRetryAfter / time.Second))}
	jsonType   = []string{"application/json"}
)
