package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
)

// Defaults of the admission bounds (ServerConfig.MaxInFlight,
// MaxInFlightWait, MaxWaiters and BodyReadTimeout).
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
	// DefaultMaxWaiters is MAX_WAITERS's default: the long polls and
	// event streams one service holds open at once. Each costs a
	// goroutine or two, its connection's buffers and a descriptor (some
	// tens of KiB), and the waits share one re-read per interval (see
	// waiter.Rereader), so 2048 of them cost tens of MiB, not a backend's
	// capacity.
	DefaultMaxWaiters = 2048
	// MaxMaxWaiters is MAX_WAITERS's largest accepted value; 0 turns the
	// bound off.
	MaxMaxWaiters = 1000000
	// DefaultBodyReadTimeout is BODY_READ_TIMEOUT's default: how long a
	// request's body may take to arrive once its headers are read. A body
	// is read before the request takes an in-flight slot, so a slow
	// sender holds a connection and the bytes it sent, never a slot.
	DefaultBodyReadTimeout = 5 * time.Second
	// ShedRetryAfter is the Retry-After a shed request is answered with.
	ShedRetryAfter = time.Second
)

// Route classes of the Limiter.
type routeClass int

const (
	// bounded routes take an in-flight slot.
	bounded routeClass = iota
	// free routes take nothing: probes, scrapes, progress reads, static
	// documents.
	free
	// waiting routes take a waiter slot (MAX_WAITERS): long polls and
	// event streams.
	waiting
)

// freeRoutes are the route patterns never shed nor counted: probes,
// scrapes and the progress endpoints a load driver reads during an
// overload must answer while the service sheds, and the contracts'
// static documents cost nothing.
var freeRoutes = map[string]bool{
	"/healthz": true, "/readyz": true, "/metrics": true, "/stats": true, "/stats/reset": true,
	"/queue": true, "/consumer": true, "/openapi.yaml": true, "/capabilities": true, "/backend": true,
}

// waitRoutes are the route patterns of the contracts' long polls and
// event stream: they mostly wait rather than work, so they take a waiter
// slot (MAX_WAITERS) instead of an in-flight one. Counting them in flight
// would let idle waiters shed the work they wait for.
var waitRoutes = map[string]bool{
	"/tasks/{id}/wait":  true,
	"/events/{id}/wait": true,
	"/subscribe":        true,
	// The cache pair's pub/sub stream (issue 41).
	"/channels/{channel}/subscribe": true,
}

// WaitRoutes returns the route patterns that take a waiter slot
// (MAX_WAITERS) rather than an in-flight one: the long polls and the
// event stream of the contracts.
func WaitRoutes() []string {
	out := make([]string, 0, len(waitRoutes))
	for p := range waitRoutes {
		out = append(out, p)
	}
	return out
}

// Limiter is the service's admission: it bounds the requests a service
// handles at once (MAX_IN_FLIGHT) and the long polls and event streams it
// holds open (MAX_WAITERS), and it reads a request's body, within
// BODY_READ_TIMEOUT, before the request takes a slot, so that a client
// that sends its body slowly holds no slot.
//
// Which bound applies is decided by the chi route the request matches
// (its pattern, "/tasks/{id}/wait"), never by a raw path or a header:
// probes, scrapes, progress reads and static documents take nothing;
// long polls and streams take a waiter slot; everything else, unknown
// paths included, takes an in-flight slot. A request that finds every
// in-flight slot taken waits up to its wait for one; a request past
// either bound is shed: answered 503 with Retry-After, Error-Kind: shed
// and an {"error": ..., "kind": "shed"} body, without reaching its handler, so that nothing it carried was
// accepted. Its methods are safe for concurrent use once serving begins.
type Limiter struct {
	slots   chan struct{}
	waiters chan struct{}
	wait    time.Duration
	// body and waitersBody are the shed answers' JSON, made once: under
	// overload a shed is most of what the service does, and it must
	// cost next to nothing.
	body, waitersBody []byte
	onShed            func()
	logger            *slog.Logger
	shed              atomic.Int64
	logged            atomic.Int64 // unix nanos of the last shed warning

	// Set before serving (NewRouter, Configure).
	routes      chi.Routes
	bodyLimit   int64
	bodyTimeout time.Duration
	rctxs       sync.Pool
}

// NewLimiter returns a Limiter of the given in-flight slots (0 or less:
// unbounded) whose requests wait up to wait for one, with no bound on
// waiters and no body-read deadline until Configure sets them. onShed, if
// set, is called once per shed request (the service counts it in /stats);
// logger, if set, gets at most one warning a second while requests are
// shed (one line per shed would itself be a load).
func NewLimiter(slots int, wait time.Duration, onShed func(), logger *slog.Logger) *Limiter {
	l := &Limiter{wait: max(wait, 0), onShed: onShed, logger: logger}
	if slots > 0 {
		l.slots = make(chan struct{}, slots)
		l.body = errorBody(fmt.Sprintf(
			"overloaded: %d requests in flight (MAX_IN_FLIGHT); nothing of this request was accepted, retry after %v",
			slots, ShedRetryAfter))
	}
	l.rctxs.New = func() any { return chi.NewRouteContext() }
	return l
}

// NewServerLimiter returns the Limiter a ServerConfig describes:
// MAX_IN_FLIGHT, MAX_IN_FLIGHT_WAIT, MAX_WAITERS and BODY_READ_TIMEOUT.
func NewServerLimiter(cfg ServerConfig, onShed func(), logger *slog.Logger) *Limiter {
	l := NewLimiter(cfg.MaxInFlight, cfg.MaxInFlightWait, onShed, logger)
	l.Configure(cfg.MaxWaiters, cfg.BodyReadTimeout)
	return l
}

// Configure sets the bound on concurrent long polls and streams
// (maxWaiters, 0 or less: none) and the body-read deadline (bodyTimeout,
// 0 or less: none but the server's READ_TIMEOUT). Call it before serving.
func (l *Limiter) Configure(maxWaiters int, bodyTimeout time.Duration) {
	l.waiters, l.waitersBody = nil, nil
	if maxWaiters > 0 {
		l.waiters = make(chan struct{}, maxWaiters)
		l.waitersBody = errorBody(fmt.Sprintf(
			"too many waits: %d long polls and event streams are open (MAX_WAITERS); retry after %v",
			maxWaiters, ShedRetryAfter))
	}
	l.bodyTimeout = max(bodyTimeout, 0)
}

func errorBody(msg string) []byte {
	b, _ := json.Marshal(map[string]string{"error": msg, "kind": string(KindShed)})
	return append(b, '\n')
}

// Shed returns how many requests were shed since the Limiter was made,
// in-flight and waiter sheds together.
func (l *Limiter) Shed() int64 { return l.shed.Load() }

// InFlight returns how many bounded requests hold a slot now.
func (l *Limiter) InFlight() int { return len(l.slots) }

// Waiters returns how many long polls and streams hold a waiter slot now
// (0 when MAX_WAITERS is off).
func (l *Limiter) Waiters() int { return len(l.waiters) }

// class returns the route class of r: the pattern of the route it
// matches in l.routes decides. Without routes (a Limiter used outside
// NewRouter) every request is bounded.
func (l *Limiter) class(r *http.Request) routeClass {
	if l.routes == nil {
		return bounded
	}
	path := r.URL.RawPath
	if path == "" {
		path = r.URL.Path
	}
	rctx := l.rctxs.Get().(*chi.Context)
	rctx.Reset()
	defer l.rctxs.Put(rctx)
	if !l.routes.Match(rctx, r.Method, path) {
		return bounded
	}
	p := rctx.RoutePattern()
	switch {
	case freeRoutes[p]:
		return free
	case waitRoutes[p]:
		return waiting
	}
	return bounded
}

// Middleware applies the bounds to next.
func (l *Limiter) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch l.class(r) {
		case free:
			next.ServeHTTP(w, r)
			return
		case waiting:
			if l.waiters != nil {
				select {
				case l.waiters <- struct{}{}:
				default:
					l.reject(w, l.waitersBody, "too many waits: shedding long polls and streams with 503 (MAX_WAITERS)", cap(l.waiters))
					return
				}
				defer func() { <-l.waiters }()
			}
			next.ServeHTTP(w, r)
			return
		}
		if !l.readBody(w, r) {
			return
		}
		if l.slots == nil {
			next.ServeHTTP(w, r)
			return
		}
		if !l.acquire(r) {
			l.reject(w, l.body, "overloaded: shedding requests with 503 (MAX_IN_FLIGHT)", cap(l.slots))
			return
		}
		defer func() { <-l.slots }()
		next.ServeHTTP(w, r)
	})
}

// readBody reads r's body into memory before r takes a slot, within the
// body-read deadline, and gives the handler that copy. It reads at most
// one byte past the body limit (the body-limit middleware then answers
// 413 as before) and nothing when the declared length is past it. It
// answers 408 when the body does not arrive in time and 400 when reading
// fails, and then reports false.
func (l *Limiter) readBody(w http.ResponseWriter, r *http.Request) bool {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return true
	}
	limit := l.bodyLimit
	if limit <= 0 {
		limit = defaultBodyLimit
	}
	if r.ContentLength > limit {
		return true // refused with 413 unread
	}
	rc := http.NewResponseController(w)
	if l.bodyTimeout > 0 {
		if err := rc.SetReadDeadline(time.Now().Add(l.bodyTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return true // nothing to bound it with: the server's READ_TIMEOUT still does
		}
	}
	// Grown as bytes arrive: a client declaring a large body and sending
	// one byte a second holds what it sent, not what it declared.
	var buf bytes.Buffer
	_, err := buf.ReadFrom(io.LimitReader(r.Body, limit+1))
	if err != nil {
		w.Header().Set("Connection", "close")
		if errors.Is(err, os.ErrDeadlineExceeded) {
			WriteJSON(w, http.StatusRequestTimeout, map[string]string{"error": fmt.Sprintf(
				"request body not received within %v (BODY_READ_TIMEOUT); nothing of this request was accepted", l.bodyTimeout)})
			return false
		}
		WriteJSON(w, http.StatusBadRequest, map[string]string{"error": "reading the request body: " + Truncate(err.Error(), 200)})
		return false
	}
	if int64(buf.Len()) > limit && l.bodyTimeout > 0 {
		// Not read to its end, so the server did not clear the deadline:
		// the 413 still has until then to be written, the rest of the
		// body is dropped with the connection.
		w.Header().Set("Connection", "close")
	}
	r.Body = io.NopCloser(&buf)
	return true
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

func (l *Limiter) reject(w http.ResponseWriter, body []byte, warning string, bound int) {
	n := l.shed.Add(1)
	if l.onShed != nil {
		l.onShed()
	}
	if now := time.Now().UnixNano(); l.logger != nil {
		if last := l.logged.Load(); now-last >= int64(time.Second) && l.logged.CompareAndSwap(last, now) {
			l.logger.Warn(warning, "bound", bound, "shed_total", n)
		}
	}
	h := w.Header()
	h["Retry-After"] = retryAfter
	h["Content-Type"] = jsonType
	h[KindHeader] = shedKind
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = w.Write(body)
}

// The shed answer's header values, shared (net/http only reads them).
var (
	retryAfter = []string{strconv.Itoa(int(ShedRetryAfter / time.Second))}
	jsonType   = []string{"application/json"}
	shedKind   = []string{string(KindShed)}
)
