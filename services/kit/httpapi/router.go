package httpapi

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
)

type loggerKey struct{}

// Logger returns the request's logger (set by the router's logging
// middleware), or slog.Default.
func Logger(ctx context.Context) *slog.Logger {
	if l, ok := ctx.Value(loggerKey{}).(*slog.Logger); ok {
		return l
	}
	return slog.Default()
}

// RouterOptions configures NewRouter.
type RouterOptions struct {
	// Logger receives one line per request; nil means slog.Default.
	Logger *slog.Logger
	// BodyLimit caps every request body in bytes; larger bodies fail with
	// 413. Zero or less means 1 MiB.
	BodyLimit int64
	// Observe, if set, is called after every request with chi's route
	// pattern ("/tasks/{id}"), the status and the handler time; stats uses
	// it for Prometheus request metrics.
	Observe func(method, route string, status int, d time.Duration)
	// Limiter, if set, bounds the requests in flight and the waits: it
	// runs before the request log, so that a shed costs no log line (the
	// Limiter warns once a second instead) and reaches no handler. A
	// Limiter serves one router.
	Limiter *Limiter
}

// defaultBodyLimit is the body limit of a router whose options set none.
const defaultBodyLimit = 1 << 20

// quietPaths are logged at debug level: probes and scrapes would drown the
// log otherwise.
var quietPaths = map[string]bool{"/healthz": true, "/readyz": true, "/metrics": true, "/stats": true}

// NewRouter returns a chi router with the shared middleware: the in-flight
// bound if o.Limiter is set, request id, request logging, recovery (a
// panic becomes a 500 JSON body and an error log with the stack), the body
// limit, and JSON bodies for unknown routes (404) and wrong methods (405).
func NewRouter(o RouterOptions) chi.Router {
	logger := o.Logger
	if logger == nil {
		logger = slog.Default()
	}
	limit := o.BodyLimit
	if limit <= 0 {
		limit = defaultBodyLimit
	}
	r := chi.NewRouter()
	// The bound comes first: a shed request needs no request id, and
	// under overload sheds are most of the requests. It classifies a
	// request by the route it matches in r, and reads bodies up to the
	// body limit before taking a slot.
	if o.Limiter != nil {
		o.Limiter.routes, o.Limiter.bodyLimit = r, limit
		r.Use(o.Limiter.Middleware)
	}
	r.Use(middleware.RequestID)
	r.Use(logRequests(logger, o.Observe))
	r.Use(recoverPanics)
	r.Use(bodyLimit(limit))
	r.Use(staticRoutesFirst(r))
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		WriteJSON(w, http.StatusNotFound, map[string]string{"error": fmt.Sprintf("no route for %s %s", methodForText(r.Method), Truncate(r.URL.Path, 200))})
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, req *http.Request) {
		// RFC 9110 (15.5.6): a 405 must name the methods the resource
		// supports. chi drops that list when the handler is replaced, so
		// it is computed again from the routes.
		if allow := allowedMethods(r, req); len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
		}
		WriteJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": fmt.Sprintf("method %s not allowed on %s", methodForText(req.Method), Truncate(req.URL.Path, 200))})
	})
	return r
}

// staticRoutesFirst answers 405 to a request whose path is a static
// route's (POST /events/batch) but whose method only a pattern route has
// (GET /events/{id}): chi would hand it to the pattern, and GET
// /events/batch would be a 404 "no event batch" instead of the 405 the
// OpenAPI documents promise for a method a resource does not have.
func staticRoutesFirst(routes chi.Routes) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if allow := allowedMethods(routes, req); len(allow) > 0 && !slices.Contains(allow, req.Method) {
				w.Header().Set("Allow", strings.Join(allow, ", "))
				WriteJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": fmt.Sprintf("method %s not allowed on %s", methodForText(req.Method), Truncate(req.URL.Path, 200))})
				return
			}
			next.ServeHTTP(w, req)
		})
	}
}

// allowMethods are the methods allowedMethods tries, in the order an Allow
// header lists them.
var allowMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut,
	http.MethodPatch, http.MethodDelete, http.MethodOptions}

// allowedMethods returns the methods routes has a handler for at req's
// path.
func allowedMethods(routes chi.Routes, req *http.Request) []string {
	path := req.URL.RawPath
	if path == "" {
		path = req.URL.Path
	}
	// A static route beats a pattern: POST /events/batch and GET
	// /events/{id} both match "/events/batch", but only the first is
	// that resource. Keep the methods of the routes with fewest
	// parameters.
	var out []string
	fewest := -1
	for _, m := range allowMethods {
		rctx := chi.NewRouteContext()
		if !routes.Match(rctx, m, path) {
			continue
		}
		n := strings.Count(rctx.RoutePattern(), "{") + strings.Count(rctx.RoutePattern(), "*")
		switch {
		case fewest < 0 || n < fewest:
			out, fewest = []string{m}, n
		case n == fewest:
			out = append(out, m)
		}
	}
	return out
}

// methodForText is the request method as an error text quotes it: an
// invented method can be 500 KB long, and the answer must not echo it.
func methodForText(m string) string {
	if len(m) > 16 {
		return m[:16] + "..."
	}
	return m
}

func bodyLimit(n int64) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.ContentLength > n {
				WriteError(w, r, Errorf(http.StatusRequestEntityTooLarge, "request body exceeds the limit of %d bytes", n))
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, n)
			next.ServeHTTP(w, r)
		})
	}
}

func recoverPanics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				Logger(r.Context()).Error("panic in handler", "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
				WriteJSON(w, http.StatusInternalServerError, map[string]string{"error": "internal error"})
			}
		}()
		next.ServeHTTP(w, r)
	})
}

func logRequests(logger *slog.Logger, observe func(string, string, int, time.Duration)) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			start := time.Now()
			l := logger.With(slog.String("request_id", middleware.GetReqID(r.Context())))
			r = r.WithContext(context.WithValue(r.Context(), loggerKey{}, l))
			ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
			next.ServeHTTP(ww, r)
			d := time.Since(start)
			status := ww.Status()
			if status == 0 {
				status = http.StatusOK
			}
			route := "unmatched"
			if rc := chi.RouteContext(r.Context()); rc != nil {
				if p := rc.RoutePattern(); p != "" {
					route = strings.TrimSuffix(p, "/*")
				}
			}
			if observe != nil {
				observe(r.Method, route, status, d)
			}
			level := slog.LevelInfo
			switch {
			case status >= 500:
				level = slog.LevelError
			case quietPaths[r.URL.Path] && status < 400:
				level = slog.LevelDebug
			}
			l.LogAttrs(r.Context(), level, "http request",
				slog.String("method", r.Method), slog.String("path", r.URL.Path),
				slog.Int("status", status), slog.Int("bytes", ww.BytesWritten()),
				slog.Float64("ms", float64(d.Microseconds())/1000))
		})
	}
}
