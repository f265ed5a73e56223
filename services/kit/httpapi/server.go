package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// Defaults and limits of ServerConfig. The default address and body limit
// are the service's (its port in the pair table; the documents pair raises
// the body limit).
const (
	// DefaultBodyLimit is BODY_LIMIT's default for most services.
	DefaultBodyLimit = 1 << 20
	// MinBodyLimit is BODY_LIMIT's smallest accepted value.
	MinBodyLimit = 1 << 10
	// DefaultReadHeaderTimeout is READ_HEADER_TIMEOUT's default.
	DefaultReadHeaderTimeout = 5 * time.Second
	// DefaultReadTimeout is READ_TIMEOUT's default.
	DefaultReadTimeout = 30 * time.Second
	// DefaultWriteTimeout is WRITE_TIMEOUT's default (a /wait long poll
	// may last 60s).
	DefaultWriteTimeout = 90 * time.Second
	// DefaultIdleTimeout is IDLE_TIMEOUT's default.
	DefaultIdleTimeout = 120 * time.Second
	// DefaultShutdownTimeout is SHUTDOWN_TIMEOUT's default.
	DefaultShutdownTimeout = 20 * time.Second
	// DefaultStatsReset is STATS_RESET's default: POST /stats/reset is
	// refused unless a load driver asks for it.
	DefaultStatsReset = false
)

// DefaultCallTimeout bounds each backend call of a contract's handlers
// when its Options set no Timeout.
const DefaultCallTimeout = 10 * time.Second

// CallTimeout is timeout, or DefaultCallTimeout when it is zero or less:
// a contract's Options.Timeout as its handlers apply it.
func CallTimeout(timeout time.Duration) time.Duration {
	if timeout <= 0 {
		return DefaultCallTimeout
	}
	return timeout
}

// ServerConfig holds the HTTP server's settings. Every service embeds it in
// its Config and reads it with the same variable names.
type ServerConfig struct {
	// Addr is the listen address. Env ADDR; the default is the service's
	// port from the pair table on loopback ("127.0.0.1:8082" for
	// no-rabbitmq, ...).
	Addr string
	// BodyLimit caps request bodies in bytes. Env BODY_LIMIT; default
	// DefaultBodyLimit (the documents pair raises it for 2 MB profiles);
	// at least MinBodyLimit.
	BodyLimit int64
	// ReadHeaderTimeout bounds reading the request headers. Env
	// READ_HEADER_TIMEOUT; default DefaultReadHeaderTimeout.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request. Env READ_TIMEOUT; default
	// DefaultReadTimeout.
	ReadTimeout time.Duration
	// WriteTimeout bounds a handler and its response, long polls included.
	// Env WRITE_TIMEOUT; default DefaultWriteTimeout.
	WriteTimeout time.Duration
	// IdleTimeout closes idle keep-alive connections. Env IDLE_TIMEOUT;
	// default DefaultIdleTimeout.
	IdleTimeout time.Duration
	// ShutdownTimeout bounds the drain of in-flight requests on shutdown.
	// Env SHUTDOWN_TIMEOUT; default DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// StatsReset enables POST /stats/reset, which zeroes what /stats
	// shows: the load driver needs it, nobody else should be able to wipe
	// a service's numbers. Env STATS_RESET; default DefaultStatsReset.
	StatsReset bool
	// MaxInFlight bounds the requests handled at once; more are shed with
	// 503 and Retry-After (see Limiter; probes, scrapes, long polls and
	// streams are exempt, by route). Env MAX_IN_FLIGHT; default
	// DefaultMaxInFlight, 0 for no bound, at most MaxMaxInFlight.
	MaxInFlight int
	// MaxInFlightWait is how long a request may wait for a free slot
	// before it is shed. Env MAX_IN_FLIGHT_WAIT; default
	// DefaultMaxInFlightWait, 0 for none.
	MaxInFlightWait time.Duration
	// MaxWaiters bounds the long polls and event streams open at once
	// (the routes of WaitRoutes); more are shed with 503 and Retry-After.
	// Env MAX_WAITERS; default DefaultMaxWaiters, 0 for no bound, at most
	// MaxMaxWaiters.
	MaxWaiters int
	// BodyReadTimeout bounds reading a request's body, from the end of
	// its headers; the body is read before the request takes an
	// in-flight slot, and a body not in by then is answered 408. Env
	// BODY_READ_TIMEOUT; default DefaultBodyReadTimeout, positive, at
	// most READ_TIMEOUT.
	BodyReadTimeout time.Duration
	// DebugAddr, when set, is the address of a second listener that
	// serves net/http/pprof under /debug/pprof/ (CPU and heap profiles,
	// goroutine dumps, the command line). Env DEBUG_ADDR; default empty:
	// off, no listener. It has no authentication and is never on the
	// service's own ADDR: bind it to loopback (127.0.0.1:6060) and only
	// while profiling (docs/security.md).
	DebugAddr string
	// Listener, when set, is a listener already bound on Addr, which
	// Listen serves instead of binding: service.Start binds ADDR before
	// it builds the backends, so that a busy port stops the service
	// before it migrates a schema or creates a slot. Not read from the
	// environment.
	Listener net.Listener
}

// ServerEnv is the interface of config.Reader that ReadServerConfig needs.
type ServerEnv interface {
	String(name, def string) string
	Bytes(name string, def int64) int64
	Duration(name string, def time.Duration) time.Duration
	Bool(name string, def bool) bool
	Int(name string, def int) int
	Fail(name, format string, args ...any)
}

// ReadServerConfig reads ServerConfig from env with defaultAddr and
// defaultBodyLimit, and validates it, naming the bad variable.
func ReadServerConfig(env ServerEnv, defaultAddr string, defaultBodyLimit int64) ServerConfig {
	c := ServerConfig{
		Addr:              env.String("ADDR", defaultAddr),
		BodyLimit:         env.Bytes("BODY_LIMIT", defaultBodyLimit),
		ReadHeaderTimeout: env.Duration("READ_HEADER_TIMEOUT", DefaultReadHeaderTimeout),
		ReadTimeout:       env.Duration("READ_TIMEOUT", DefaultReadTimeout),
		WriteTimeout:      env.Duration("WRITE_TIMEOUT", DefaultWriteTimeout),
		IdleTimeout:       env.Duration("IDLE_TIMEOUT", DefaultIdleTimeout),
		ShutdownTimeout:   env.Duration("SHUTDOWN_TIMEOUT", DefaultShutdownTimeout),
		StatsReset:        env.Bool("STATS_RESET", DefaultStatsReset),
		MaxInFlight:       env.Int("MAX_IN_FLIGHT", DefaultMaxInFlight),
		MaxInFlightWait:   env.Duration("MAX_IN_FLIGHT_WAIT", DefaultMaxInFlightWait),
		MaxWaiters:        env.Int("MAX_WAITERS", DefaultMaxWaiters),
		BodyReadTimeout:   env.Duration("BODY_READ_TIMEOUT", DefaultBodyReadTimeout),
		DebugAddr:         env.String("DEBUG_ADDR", ""),
	}
	if c.DebugAddr != "" {
		if _, _, err := net.SplitHostPort(c.DebugAddr); err != nil {
			env.Fail("DEBUG_ADDR", "%q is not host:port (example 127.0.0.1:6060), or leave it empty for no profiling listener", c.DebugAddr)
		}
	}
	if c.MaxInFlight < 0 || c.MaxInFlight > MaxMaxInFlight {
		env.Fail("MAX_IN_FLIGHT", "must be between 0 (no bound) and %d, got %d", MaxMaxInFlight, c.MaxInFlight)
	}
	if c.MaxWaiters < 0 || c.MaxWaiters > MaxMaxWaiters {
		env.Fail("MAX_WAITERS", "must be between 0 (no bound) and %d, got %d", MaxMaxWaiters, c.MaxWaiters)
	}
	if c.BodyReadTimeout <= 0 || c.BodyReadTimeout > c.ReadTimeout {
		env.Fail("BODY_READ_TIMEOUT", "must be positive and at most READ_TIMEOUT (%v), got %v", c.ReadTimeout, c.BodyReadTimeout)
	}
	if c.MaxInFlightWait < 0 {
		env.Fail("MAX_IN_FLIGHT_WAIT", "must not be negative, got %v", c.MaxInFlightWait)
	}
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		env.Fail("ADDR", "%q is not host:port (example 127.0.0.1:8082, or 0.0.0.0:8082 to expose it)", c.Addr)
	}
	if c.BodyLimit < MinBodyLimit {
		env.Fail("BODY_LIMIT", "must be at least %d bytes, got %d", MinBodyLimit, c.BodyLimit)
	}
	for name, d := range map[string]time.Duration{
		"READ_HEADER_TIMEOUT": c.ReadHeaderTimeout, "READ_TIMEOUT": c.ReadTimeout,
		"WRITE_TIMEOUT": c.WriteTimeout, "IDLE_TIMEOUT": c.IdleTimeout, "SHUTDOWN_TIMEOUT": c.ShutdownTimeout,
	} {
		if d <= 0 {
			env.Fail(name, "must be positive, got %v", d)
		}
	}
	return c
}

// Server is an http.Server with the timeouts of a ServerConfig and a
// graceful Serve. Serve may be called once.
type Server struct {
	cfg      ServerConfig
	srv      *http.Server
	ln       net.Listener
	stopping chan struct{}
}

// Listen binds the address now (or takes cfg.Listener, already bound),
// so that a port already in use fails at start and tests can learn the
// port (Addr) before serving.
func Listen(cfg ServerConfig, h http.Handler) (*Server, error) {
	ln := cfg.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", cfg.Addr); err != nil {
			return nil, fmt.Errorf("listen on %s (ADDR): %w", cfg.Addr, err)
		}
	}
	s := &Server{cfg: cfg, ln: ln, stopping: make(chan struct{}), srv: &http.Server{
		Handler:           h,
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		ReadTimeout:       cfg.ReadTimeout,
		WriteTimeout:      cfg.WriteTimeout,
		IdleTimeout:       cfg.IdleTimeout,
	}}
	s.srv.RegisterOnShutdown(func() { close(s.stopping) })
	return s, nil
}

// Stopping is closed when the drain begins. Long-poll handlers select on it
// to answer early, so that they do not hold the drain for their whole
// timeout.
func (s *Server) Stopping() <-chan struct{} { return s.stopping }

// Addr returns the bound address.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Serve serves until ctx is done, then stops accepting connections and
// waits up to ShutdownTimeout for in-flight requests to finish. Long polls
// learn that the drain began from Stopping. It returns nil after a clean
// drain.
func (s *Server) Serve(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- s.srv.Serve(s.ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("http server: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	err := s.srv.Shutdown(sctx)
	if errors.Is(err, context.DeadlineExceeded) {
		_ = s.srv.Close()
		return fmt.Errorf("http drain did not finish within %v (SHUTDOWN_TIMEOUT): in-flight requests were cut", s.cfg.ShutdownTimeout)
	}
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		return serr
	}
	return err
}
