package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/stats"
)

// Defaults of Common.
const (
	// DefaultBackendTimeout is BACKEND_TIMEOUT's default.
	DefaultBackendTimeout = 10 * time.Second
	// DefaultLogLevel is LOG_LEVEL's default.
	DefaultLogLevel = slog.LevelInfo
	// DefaultLogFormat is LOG_FORMAT's default.
	DefaultLogFormat = "text"
)

// CounterShed is the /stats counter (and wpe_events_total name) of the
// requests shed with 503 because MAX_IN_FLIGHT requests were in flight,
// or MAX_WAITERS long polls and streams were open.
// Every service shows it, from zero.
const CounterShed = "shed"

// ResetDisabled is the error of POST /stats/reset (403) in a service
// started without STATS_RESET=true.
const ResetDisabled = "POST /stats/reset is disabled: start the service with STATS_RESET=true to allow it (the load driver sets it on the services it starts)"

// Common is the part of every service's Config that the kit reads.
type Common struct {
	// HTTP holds ADDR, BODY_LIMIT and the server timeouts.
	HTTP httpapi.ServerConfig
	// BackendTimeout bounds each call a request makes to the backend
	// (context.WithTimeout around every store or broker call; the mongodb
	// service also uses it as the driver's server-selection, connect and
	// operation timeout). Env BACKEND_TIMEOUT; default
	// DefaultBackendTimeout. Formerly DATABASE_TIMEOUT (no-mongodb)
	// and MONGO_TIMEOUT (mongodb), which still work with a warning.
	BackendTimeout time.Duration
	// LogLevel is the minimum level logged. Env LOG_LEVEL (debug, info,
	// warn, error); default DefaultLogLevel. Requests are logged at
	// info, probes and scrapes at debug; load runs use warn.
	LogLevel slog.Level
	// LogFormat is text or json. Env LOG_FORMAT; default DefaultLogFormat.
	LogFormat string
}

// ReadCommon reads Common from r with the service's default address and
// body limit, and validates it.
func ReadCommon(r *config.Reader, defaultAddr string, defaultBodyLimit int64) Common {
	c := Common{
		HTTP:           httpapi.ReadServerConfig(r, defaultAddr, defaultBodyLimit),
		BackendTimeout: r.Duration("BACKEND_TIMEOUT", DefaultBackendTimeout),
		LogLevel:       r.LogLevel("LOG_LEVEL", DefaultLogLevel),
		LogFormat:      r.Enum("LOG_FORMAT", DefaultLogFormat, "text", "json"),
	}
	if c.BackendTimeout <= 0 {
		r.Fail("BACKEND_TIMEOUT", "must be positive, got %v", c.BackendTimeout)
	}
	return c
}

// NewLogger returns the logger Common describes, writing to w.
func (c Common) NewLogger(w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: c.LogLevel}
	if c.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

type hook struct {
	name string
	fn   func(context.Context) error
}

// Service is one HTTP service: the shared endpoints (/healthz, /readyz,
// /metrics, /stats, and /stats/reset when ServerConfig.StatsReset allows
// it, else 403), the business routes mounted on Router, bounded by
// MAX_IN_FLIGHT (excess requests are shed with 503 and Retry-After, and
// counted as CounterShed), and the lifecycle. Register everything before Run; Ready, OnStop and
// Router are not safe to call concurrently with Run.
type Service struct {
	// Router is where the service mounts its business routes.
	Router chi.Router
	// Stats records the service's latencies and counters.
	Stats *stats.Recorder
	// Logger is the service's logger.
	Logger *slog.Logger

	cfg    httpapi.ServerConfig
	checks []hook
	stops  []hook
	srv    *httpapi.Server
	debug  net.Listener

	stopOnce     sync.Once
	stopErr      error
	stoppingOnce sync.Once
	stopping     chan struct{}
}

// New returns a Service named by info whose /stats lists the given latency
// and counter names from the start.
func New(info stats.Info, cfg httpapi.ServerConfig, logger *slog.Logger, latencies, counters []string) *Service {
	if logger == nil {
		logger = slog.Default()
	}
	logger = logger.With("service", info.Service)
	rec := stats.New(info, latencies, append(counters[:len(counters):len(counters)], CounterShed))
	s := &Service{
		Stats:    rec,
		Logger:   logger,
		cfg:      cfg,
		stopping: make(chan struct{}),
	}
	limiter := httpapi.NewServerLimiter(cfg, func() { rec.Inc(CounterShed) }, logger)
	r := httpapi.NewRouter(httpapi.RouterOptions{Logger: logger, BodyLimit: cfg.BodyLimit, Observe: rec.ObserveHTTP, Limiter: limiter})
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		httpapi.WriteJSON(w, http.StatusOK, map[string]any{"status": "ok", "service": info.Service})
	})
	r.Get("/readyz", s.readyz)
	r.Get("/", func(w http.ResponseWriter, _ *http.Request) {
		httpapi.WriteJSON(w, http.StatusOK, Index{Service: info.Service, Pair: info.Pair, Backend: info.Backend, Links: IndexLinks})
	})
	r.Method(http.MethodGet, "/metrics", rec.MetricsHandler())
	r.Method(http.MethodGet, "/stats", rec.StatsHandler())
	if cfg.StatsReset {
		r.Method(http.MethodPost, "/stats/reset", rec.ResetHandler())
	} else {
		r.Post("/stats/reset", func(w http.ResponseWriter, _ *http.Request) {
			httpapi.WriteJSON(w, http.StatusForbidden, map[string]string{"error": ResetDisabled})
		})
	}
	s.Router = r
	return s
}

// Ready registers a readiness check: /readyz answers 200 only while every
// check returns nil (or a Degraded error) within 2 s. Checks run
// concurrently.
func (s *Service) Ready(name string, check func(context.Context) error) {
	s.checks = append(s.checks, hook{name, check})
}

// ReadyBackend registers the readiness check of a server the service
// uses: name is the server (postgres, redis, ...), env the variable that
// points to it and addr that variable's value. A failing ping answers
// /readyz with a 503 naming all three, "redis unreachable
// (REDIS_URL=redis://localhost:6379/0): ..." (a password in addr is
// masked), so that whoever reads it knows which setting to check.
func (s *Service) ReadyBackend(name, env, addr string, ping func(context.Context) error) {
	s.Ready(name, func(ctx context.Context) error {
		return Unreachable(name, env, addr, ping(ctx))
	})
}

// Unreachable wraps err, a failed call to the server name, with the
// variable env that points to it and its value addr (a password in it
// masked): "name unreachable (ENV=addr): err". A nil err stays nil.
func Unreachable(name, env, addr string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s unreachable (%s=%s): %w", name, env, Redact(addr), err)
}

// Redact returns addr with the password of a URL masked, as
// url.URL.Redacted does; an addr that is not a URL with a password is
// returned as it is.
func Redact(addr string) string {
	u, err := url.Parse(addr)
	if err != nil || u.User == nil {
		return addr
	}
	if _, ok := u.User.Password(); !ok {
		return addr
	}
	return u.Redacted()
}

// Index is the answer of GET /: what the service is and where its
// documents are. It is outside every pair's OpenAPI contract, as
// /healthz, /readyz, /stats and /metrics are.
type Index struct {
	// Service, Pair and Backend are the service's row of the pair table.
	Service string `json:"service"`
	Pair    string `json:"pair"`
	Backend string `json:"backend"`
	// Links maps a name to a path of the service.
	Links map[string]string `json:"links"`
}

// IndexLinks are the links of GET /.
var IndexLinks = map[string]string{
	"openapi": "/openapi.yaml", "stats": "/stats", "metrics": "/metrics", "healthz": "/healthz", "readyz": "/readyz",
}

// Degraded wraps a readiness check's error that must not take the service
// out of rotation: the service still does its job without the part that
// failed (rabbitmq in outbox mode takes tasks while the broker is down, and
// its relay publishes them on reconnect). /readyz then answers 200 with
// status "degraded" and the check's text prefixed "degraded: ". A nil err
// stays nil.
func Degraded(err error) error {
	if err == nil {
		return nil
	}
	return degraded{err}
}

type degraded struct{ error }

func (d degraded) Unwrap() error { return d.error }

// OnStop registers a hook run at shutdown after the HTTP drain, in reverse
// order of registration, with a context bounded by SHUTDOWN_TIMEOUT.
func (s *Service) OnStop(name string, fn func(context.Context) error) {
	s.stops = append(s.stops, hook{name, fn})
}

// Stopping is closed when shutdown begins; long-poll handlers select on it
// to answer early instead of holding the drain.
func (s *Service) Stopping() <-chan struct{} { return s.stopping }

// Handler returns the service's HTTP handler, for tests with httptest.
func (s *Service) Handler() http.Handler { return s.Router }

func (s *Service) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	results := make([]error, len(s.checks))
	var wg sync.WaitGroup
	for i, c := range s.checks {
		wg.Go(func() { results[i] = c.fn(ctx) })
	}
	wg.Wait()
	checks := map[string]string{}
	var failed []error
	status := "ready"
	for i, c := range s.checks {
		var d degraded
		switch err := results[i]; {
		case err == nil:
			checks[c.name] = "ok"
		case errors.As(err, &d):
			checks[c.name] = "degraded: " + d.Error()
			status = "degraded"
		default:
			checks[c.name] = err.Error()
			failed = append(failed, fmt.Errorf("%s: %w", c.name, err))
		}
	}
	if len(failed) > 0 {
		httpapi.WriteJSON(w, http.StatusServiceUnavailable, map[string]any{
			"error": "not ready: " + errors.Join(failed...).Error(), "checks": checks})
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, map[string]any{"status": status, "checks": checks})
}

// Listen binds the HTTP address now (a busy port fails here, at start).
// Run calls it if it was not called.
func (s *Service) Listen() error {
	if s.srv != nil {
		return nil
	}
	var debug net.Listener
	if s.cfg.DebugAddr != "" {
		ln, err := net.Listen("tcp", s.cfg.DebugAddr)
		if err != nil {
			return fmt.Errorf("listen on %s (DEBUG_ADDR): %w", s.cfg.DebugAddr, err)
		}
		debug = ln
	}
	srv, err := httpapi.Listen(s.cfg, s.Router)
	if err != nil {
		if debug != nil {
			_ = debug.Close()
		}
		return err
	}
	s.srv, s.debug = srv, debug
	return nil
}

// DebugAddr returns the bound address of the profiling listener after
// Listen, nil when DEBUG_ADDR is empty (the default: no listener).
func (s *Service) DebugAddr() net.Addr {
	if s.debug == nil {
		return nil
	}
	return s.debug.Addr()
}

// debugHandler serves net/http/pprof on its own mux (never on the
// service's router, never on http.DefaultServeMux).
func debugHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// serveDebug serves the profiling listener until ctx is done. Profiles
// run for as long as asked (?seconds=30), so it has no write timeout;
// it is closed, not drained, at shutdown.
func (s *Service) serveDebug(ctx context.Context) {
	if s.debug == nil {
		return
	}
	srv := &http.Server{Handler: debugHandler(), ReadHeaderTimeout: s.cfg.ReadHeaderTimeout, IdleTimeout: s.cfg.IdleTimeout}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	s.Logger.Warn("profiling listener on (DEBUG_ADDR): net/http/pprof without authentication", "addr", s.debug.Addr().String())
	if err := srv.Serve(s.debug); err != nil && !errors.Is(err, http.ErrServerClosed) {
		s.Logger.Error("profiling listener stopped", "err", err)
	}
}

// Addr returns the bound address after Listen.
func (s *Service) Addr() net.Addr {
	if s.srv == nil {
		return nil
	}
	return s.srv.Addr()
}

// Run serves until ctx is done, then drains HTTP and runs the OnStop hooks
// (see the package doc for the order). It returns the first error of the
// serve, the drain or the hooks.
func (s *Service) Run(ctx context.Context) error {
	if err := s.Listen(); err != nil {
		return err
	}
	s.Logger.Info("listening", "addr", s.srv.Addr().String())
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go s.serveDebug(ctx)
	go func() {
		select {
		case <-ctx.Done():
		case <-s.srv.Stopping():
		}
		s.markStopping()
	}()
	serveErr := s.srv.Serve(ctx)
	s.Logger.Info("http drained; stopping", "err", serveErr)
	stopErr := s.Stop(context.Background())
	return errors.Join(serveErr, stopErr)
}

func (s *Service) markStopping() {
	// Run's watcher and Stop can both get here at once: close exactly once.
	s.stoppingOnce.Do(func() { close(s.stopping) })
}

// Stop runs the OnStop hooks in reverse order, each bounded by
// SHUTDOWN_TIMEOUT. It is safe to call more than once and from several
// goroutines: the hooks run once, later calls return the same error.
func (s *Service) Stop(ctx context.Context) error {
	s.stopOnce.Do(func() {
		s.markStopping()
		var errs []error
		for i := len(s.stops) - 1; i >= 0; i-- {
			h := s.stops[i]
			hctx, cancel := context.WithTimeout(ctx, s.cfg.ShutdownTimeout)
			start := time.Now()
			err := h.fn(hctx)
			cancel()
			if err != nil {
				errs = append(errs, fmt.Errorf("stop %s: %w", h.name, err))
				s.Logger.Error("stop failed", "hook", h.name, "err", err)
			} else {
				s.Logger.Info("stopped", "hook", h.name, "ms", time.Since(start).Milliseconds())
			}
		}
		s.stopErr = errors.Join(errs...)
	})
	return s.stopErr
}

// Main runs a service as a process (Start, every service's main, calls
// it): it cancels its context on SIGINT or SIGTERM, calls build to
// assemble the service, runs it, and exits with status 1 on any error
// (configuration included), printed on stderr.
func Main(build func(ctx context.Context) (*Service, error)) {
	ctx, stop := SignalContext()
	defer stop()
	if err := run(ctx, build); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// Start is the whole of a service's main, self its row of the pair
// table. With -h or --help as argument it prints the usage text (Help)
// on stdout and exits 0, before it reads the environment or reaches any
// server; any other argument is refused (exit 2), since every setting is
// an environment variable. Otherwise, under Main, it assembles the
// service from the environment (Assemble) and runs it. C is the
// service's Config, which embeds Common.
func Start[C any, P commonPtr[C]](
	self pairs.Service,
	read func(*config.Reader) (C, error),
	build func(ctx context.Context, cfg C, logger *slog.Logger) (*Service, error),
) {
	if code, done := handleArgs(os.Stdout, os.Stderr, os.Args[1:], self, read); done {
		os.Exit(code)
	}
	Main(func(ctx context.Context) (*Service, error) {
		return Assemble[C, P](ctx, Process{Vars: config.FromEnv(), Environ: os.Environ(), Stderr: os.Stderr}, read, build)
	})
}

// commonPtr is a pointer to a service's Config, which embeds Common.
type commonPtr[C any] interface {
	*C
	NewLogger(io.Writer) *slog.Logger
	common() *Common
}

// common returns c itself; a Config that embeds Common has it.
func (c *Common) common() *Common { return c }

// handleArgs answers the command-line arguments: -h or --help writes the
// usage text to stdout (exit 0), anything else an error to stderr (exit
// 2). done is false when there are no arguments: the service starts.
func handleArgs[C any](stdout, stderr io.Writer, args []string, self pairs.Service, read func(*config.Reader) (C, error)) (code int, done bool) {
	switch {
	case len(args) == 0:
		return 0, false
	case len(args) == 1 && slices.Contains([]string{"-h", "-help", "--help", "help"}, args[0]):
		if err := Help(stdout, self, read); err != nil {
			fmt.Fprintln(stderr, "error:", err)
			return 1, true
		}
		return 0, true
	default:
		fmt.Fprintf(stderr, "error: %s takes no arguments (got %q): every setting is an environment variable; %s -h lists them\n",
			self.Name, args, self.Name)
		return 2, true
	}
}

// Help writes the usage text of the service of row self: what it is, and
// every setting read reads, with its default and meaning (config.Usage),
// from the same description of the Config that the docs' env tables are
// checked against (configtest.CheckDocs). It reads the Config from an
// empty environment and touches nothing else: no server, no port.
func Help[C any](w io.Writer, self pairs.Service, read func(*config.Reader) (C, error)) error {
	r := config.FromMap(nil)
	if _, err := read(r); err != nil {
		return fmt.Errorf("the defaults are refused: %w", err)
	}
	header := fmt.Sprintf("%s: the %s pair's %s side, built on %s. It serves HTTP on ADDR:\n"+
		"GET / (what it is), /openapi.yaml (its contract), /healthz, /readyz, /stats,\n/metrics.\n\n"+
		"Usage: %s [-h | --help]\n\n"+
		"It takes no arguments. Every setting is an environment variable, read at\n"+
		"start; unset or empty means the default. A variable that looks like a\n"+
		"setting but is none (a typo) is logged as a warning.\n\n",
		self.Name, self.Pair, self.Side, self.Backend, self.Name)
	if _, err := io.WriteString(w, header); err != nil {
		return err
	}
	return config.Usage(w, self.Name, r.Vars())
}

// Process is what Assemble takes of the process: its settings, its
// whole environment (os.Environ: the strays are looked for there) and
// where it logs.
type Process struct {
	Vars    *config.Reader
	Environ []string
	Stderr  io.Writer
}

// Assemble is Start without the process: it reads the Config from
// proc.Vars with read, makes the logger the Config describes (on
// proc.Stderr), logs the variables set under an old name and those of
// proc.Environ that look like settings but are none
// (config.Reader.Strays), binds ADDR and only then calls build, which
// opens the backends, migrates and creates slots and queues: a busy
// port fails here, naming ADDR, before anything was created. The
// Service serves on the listener bound here.
func Assemble[C any, P commonPtr[C]](
	ctx context.Context, proc Process,
	read func(*config.Reader) (C, error),
	build func(ctx context.Context, cfg C, logger *slog.Logger) (*Service, error),
) (*Service, error) {
	r, environ, stderr := proc.Vars, proc.Environ, proc.Stderr
	cfg, err := read(r)
	if err != nil {
		return nil, err
	}
	p := P(&cfg)
	logger := p.NewLogger(stderr)
	LogDeprecations(logger, r)
	LogStrays(logger, r, environ)
	hc := &p.common().HTTP
	ln, err := net.Listen("tcp", hc.Addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s (ADDR): %w; nothing was migrated or created", hc.Addr, err)
	}
	hc.Listener = ln
	svc, err := build(ctx, cfg, logger)
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	return svc, nil
}

// WithoutParts adapts assemble, a build that also returns the parts of
// the service its tests reach into (its queue, consumer or store), to the
// build Start takes: main drops the parts.
func WithoutParts[C, P any](
	assemble func(ctx context.Context, cfg C, logger *slog.Logger) (*Service, P, error),
) func(ctx context.Context, cfg C, logger *slog.Logger) (*Service, error) {
	return func(ctx context.Context, cfg C, logger *slog.Logger) (*Service, error) {
		svc, _, err := assemble(ctx, cfg, logger)
		return svc, err
	}
}

// LogDeprecations logs one warning per variable r found set under an old
// name.
func LogDeprecations(logger *slog.Logger, r *config.Reader) {
	for _, d := range r.Deprecations() {
		logger.Warn("deprecated environment variable: "+d.String(), "old", d.Old, "new", d.New)
	}
}

// LogStrays logs one warning per variable of environ that looks like a
// setting but is not one (config.Reader.Strays), naming the setting it
// most likely meant. The stack's URLs that tests and scripts read
// (pairs.Backends) are not strays.
func LogStrays(logger *slog.Logger, r *config.Reader, environ []string) {
	var ignore []string
	for _, b := range pairs.Backends {
		ignore = append(ignore, b.Env)
	}
	for _, s := range r.Strays(environ, ignore...) {
		logger.Warn("unknown environment variable: "+s.String(), "variable", s.Name, "meant", s.Suggest)
	}
}

// SignalContext returns a context cancelled by SIGINT or SIGTERM.
func SignalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

func run(ctx context.Context, build func(ctx context.Context) (*Service, error)) error {
	svc, err := build(ctx)
	if err != nil {
		return err
	}
	return svc.Run(ctx)
}
