package scenario

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/launch"
	logc "github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/log"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// Service is one service of a pair and its default port.
type Service struct {
	Name string
	Port int
}

// Pair describes a pair the same way for every scenario.
type Pair struct {
	// Name is the pair: queue, log, documents.
	Name string
	// A is the Postgres side, B the other.
	A, B Service
	// Progress is the progress endpoint read around rounds ("/queue").
	Progress string
	// In and Out are the /stats counters whose difference is the backlog
	// (enqueued/processed, written/delivered); empty for documents.
	In, Out []string
}

// Sides returns the services' names, A first.
func (p Pair) Sides() []string { return []string{p.A.Name, p.B.Name} }

// Services returns A and B.
func (p Pair) Services() []Service { return []Service{p.A, p.B} }

// ServiceOf returns the named service with its port from the pair table
// (services/kit/pairs).
func ServiceOf(name string) Service {
	s := pairs.Get(name)
	return Service{Name: s.Name, Port: s.Port}
}

// The pairs; names and ports come from the pair table.
var (
	QueuePair = Pair{Name: pairs.Queue, A: ServiceOf(pairs.NoRabbitMQ), B: ServiceOf(pairs.RabbitMQ),
		Progress: "/queue", In: []string{queue.CounterEnqueued}, Out: []string{queue.CounterProcessed, queue.CounterDead}}
	LogPair = Pair{Name: pairs.Log, A: ServiceOf(pairs.NoKafka), B: ServiceOf(pairs.Kafka),
		Progress: "/consumer", In: []string{logc.StatWritten}, Out: []string{logc.StatDelivered}}
	DocumentsPair = Pair{Name: pairs.Documents, A: ServiceOf(pairs.NoMongoDB), B: ServiceOf(pairs.MongoDB)}
)

// Start modes of Env.Start.
const (
	// StartAuto uses a service already answering on its port and starts
	// the others.
	StartAuto = "auto"
	// StartAlways starts every service itself and fails if a port is
	// taken by a process it did not start.
	StartAlways = "always"
	// StartNever only uses services already running.
	StartNever = "never"
)

// Env is where scenarios run: the services' host, how to start them, and
// where progress goes.
type Env struct {
	// Host is where the services listen (default localhost).
	Host string
	// PortOffset is added to every default port.
	PortOffset int
	// Start is StartAuto, StartAlways or StartNever.
	Start string
	// Launcher starts services; nil means StartNever.
	Launcher *launch.Launcher
	// Probe reports whether the named service answers on port (nil when
	// it does): the check subcommand's logic.
	Probe func(ctx context.Context, name string, port int) error
	// Out receives log lines and tables.
	Out io.Writer
	// Progress reports every attack (a bar on a terminal, a line
	// elsewhere); nil for none.
	Progress *driver.Progress
	// Settle bounds the wait for a backlog to drain after an attack.
	Settle time.Duration
	// ReadyTimeout bounds a started service's wait for /readyz.
	ReadyTimeout time.Duration
	// MaxWorkers caps each attack's concurrent requests.
	MaxWorkers uint64
	// PostgresURL is used for WAL measurements and the tables' starting
	// state (state.go).
	PostgresURL string
	// ServiceEnv is added, per service, to the environment of every
	// service the driver starts (-schemas sets DATABASE_SCHEMA here).
	ServiceEnv map[string]map[string]string
	// StackDir is where the stack keeps its pid files (.stack), to find
	// the processes whose CPU a ceiling step counts ("" falls back to
	// $STACK_DIR, then to a /proc scan).
	StackDir string
}

// URL returns the service's base URL: its port of the pair table
// (services/kit/pairs) plus e.PortOffset, on e's host.
func (e *Env) URL(name string) string {
	if s, ok := pairs.Lookup(name); ok {
		return fmt.Sprintf("http://%s:%d", e.host(), s.Port+e.PortOffset)
	}
	return "http://unknown-service-" + name
}

func (e *Env) host() string {
	if e.Host == "" {
		return "localhost"
	}
	return e.Host
}

// settle is the bound on a backlog's drain after an attack.
func (e *Env) settle() time.Duration {
	if e.Settle == 0 {
		return 20 * time.Second
	}
	return e.Settle
}

func (e *Env) logf(format string, args ...any) {
	if e.Out != nil {
		fmt.Fprintf(e.Out, format+"\n", args...)
	}
}

// ErrExternal is returned by Ensure when a variant needs a service
// restarted with another environment but the service on its port was not
// started by the driver.
var ErrExternal = errors.New("running outside the driver")

// Ensure makes every service of svcs answer. required holds per service
// the environment a variant needs (a service running with another
// environment is restarted; one running outside the driver cannot be and
// yields ErrExternal); startEnv is added when the driver starts a service
// anyway (e.g. a larger BODY_LIMIT).
func (e *Env) Ensure(ctx context.Context, svcs []Service, required map[string]map[string]string, startEnv map[string]string) error {
	for _, s := range svcs {
		if err := e.ensure(ctx, s, required[s.Name], startEnv); err != nil {
			return err
		}
	}
	return nil
}

func (e *Env) ensure(ctx context.Context, s Service, req, startEnv map[string]string) error {
	port := s.Port + e.PortOffset
	want := maps.Clone(e.ServiceEnv[s.Name])
	if want == nil {
		want = map[string]string{}
	}
	maps.Copy(want, startEnv)
	maps.Copy(want, req)
	var p *launch.Proc
	if e.Launcher != nil {
		p = e.Launcher.Running(s.Name)
	}
	if p != nil {
		if maps.Equal(p.Env, want) {
			return nil
		}
		e.logf("restarting %s with %v", s.Name, want)
		if err := e.Launcher.Stop(s.Name, 30*time.Second); err != nil {
			return err
		}
		return e.start(ctx, s, port, want)
	}
	probe := e.Probe(ctx, s.Name, port)
	if probe == nil {
		switch {
		case len(req) > 0:
			return fmt.Errorf("%s on :%d needs %v but is %w: stop it, or run with -start=always", s.Name, port, req, ErrExternal)
		case e.Start == StartAlways:
			return fmt.Errorf("%s already answers on :%d but -start=always: stop it or use -start=auto", s.Name, port)
		}
		return nil
	}
	if e.Start == StartNever || e.Launcher == nil {
		return fmt.Errorf("%s is not up on :%d: %v\n  start it (make run-%s, or the whole pair with -start=auto)", s.Name, port, probe, s.Name)
	}
	return e.start(ctx, s, port, want)
}

func (e *Env) start(ctx context.Context, s Service, port int, env map[string]string) error {
	if len(env) == 0 {
		e.logf("starting %s on :%d", s.Name, port)
	} else {
		e.logf("starting %s on :%d with %v", s.Name, port, env)
	}
	timeout := e.ReadyTimeout
	if timeout == 0 {
		timeout = 90 * time.Second
	}
	if _, err := e.Launcher.Start(ctx, s.Name, port, env, timeout); err != nil {
		return err
	}
	return e.Probe(ctx, s.Name, port)
}

// backlog is what s counts as taken but not yet processed or delivered:
// the In counters less the Out counters.
func (p Pair) backlog(s *driver.ServerStats) int64 {
	return counterSum(s, p.In) - counterSum(s, p.Out)
}

// drain waits for the backlog of atEnd, the stats read when a load
// ended, to drain: it reads base's /stats every poll until the backlog is
// gone or bound has passed. It returns the last stats read and whether
// the backlog drained.
func (p Pair) drain(ctx context.Context, base string, atEnd *driver.ServerStats, bound, poll time.Duration) (final *driver.ServerStats, drained bool, err error) {
	final = atEnd
	drained = p.backlog(atEnd) <= 0
	for t0 := time.Now(); !drained && time.Since(t0) < bound; {
		select {
		case <-ctx.Done():
			return final, false, ctx.Err()
		case <-time.After(poll):
		}
		if final, err = driver.GetStats(ctx, base); err != nil {
			return final, false, err
		}
		drained = p.backlog(final) <= 0
	}
	return final, drained, nil
}

// counterSum adds the named counters.
func counterSum(s *driver.ServerStats, names []string) int64 {
	var n int64
	if s == nil {
		return 0
	}
	for _, c := range names {
		n += s.Counters[c]
	}
	return n
}
