package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/migrations"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/eventstore"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pglisten"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/postgres"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service"
)

// self is the service's row in the pair table.
var self = pairs.Get("no-kurrentdb")

// Defaults and limits of Config; the docs' env table (docs/eventstore.md)
// is checked against them.
const (
	// DefaultSchema is DATABASE_SCHEMA's default.
	DefaultSchema = "eventstore"
	// DefaultPollInterval is POLL_INTERVAL's default; MinPollInterval and
	// MaxPollInterval bound it.
	DefaultPollInterval, MinPollInterval, MaxPollInterval = time.Second, 10 * time.Millisecond, time.Hour
)

// Config is the service's configuration, read from the environment in main
// and nowhere else.
type Config struct {
	// Common holds ADDR (default the pair table's port, :8090),
	// BODY_LIMIT, the HTTP timeouts, LOG_LEVEL, LOG_FORMAT and
	// BACKEND_TIMEOUT, which bounds each query.
	service.Common
	// Postgres holds DATABASE_URL, DATABASE_SCHEMA (default
	// DefaultSchema), DATABASE_MAX_CONNS and DATABASE_CONNECT_TIMEOUT.
	Postgres postgres.Config
	// ListenURL is the connection LISTEN uses. It must reach Postgres
	// directly: through pgbouncer in transaction mode LISTEN "works" and
	// then receives nothing. Env DATABASE_LISTEN_URL; default DATABASE_URL.
	ListenURL string
	// PollInterval is the fallback poll of live subscriptions, for wake-ups
	// a notification cannot give (a listener reconnecting, a watermark held
	// back by an unrelated transaction). Env POLL_INTERVAL; default
	// DefaultPollInterval, between MinPollInterval and MaxPollInterval.
	PollInterval time.Duration
	// PageSize is how many events a subscription reads per query. Env
	// SUBSCRIBE_PAGE_SIZE; default eventstore.DefaultPageSize, at most
	// eventstore.MaxPageSize.
	PageSize int
	// Notify is how appends wake the subscriptions of every instance
	// (NOTIFY_MODE, NOTIFY_INTERVAL): in commit mode, the events_notify
	// trigger NOTIFYs in the append's transaction; debounced, the append
	// statement turns the trigger off for its own transaction
	// (eventstore.notify, migration 0003) and the Debouncer notifies after
	// the commits, while this instance's subscriptions are woken directly.
	Notify pglisten.NotifyConfig
}

// readConfig reads and validates Config; the error names every bad
// variable.
func readConfig(r *config.Reader) (Config, error) {
	c := Config{
		Common:       service.ReadCommon(r, self.Addr(), httpapi.DefaultBodyLimit),
		Postgres:     postgres.ReadConfig(r, DefaultSchema),
		PollInterval: r.Duration("POLL_INTERVAL", DefaultPollInterval),
		PageSize:     r.Int("SUBSCRIBE_PAGE_SIZE", eventstore.DefaultPageSize),
		Notify:       pglisten.ReadNotifyConfig(r),
	}
	c.ListenURL = postgres.ReadListenURL(r, c.Postgres)
	validate(r, c)
	return c, r.Err()
}

// validate records out-of-range values, naming the variable.
func validate(r *config.Reader, c Config) {
	if c.PollInterval < MinPollInterval || c.PollInterval > MaxPollInterval {
		r.Fail("POLL_INTERVAL", "must be between %v and %v, got %v", MinPollInterval, MaxPollInterval, c.PollInterval)
	}
	if c.PageSize < 1 || c.PageSize > eventstore.MaxPageSize {
		r.Fail("SUBSCRIBE_PAGE_SIZE", "must be between 1 and %d, got %d", eventstore.MaxPageSize, c.PageSize)
	}
}

// info names the service in /stats and /metrics.
var info = service.Info(self)

// build connects and migrates the backend, starts the listener and
// assembles the service.
var build = service.WithoutParts(assemble)

// assemble is build, also returning the store (tests read through it).
func assemble(ctx context.Context, cfg Config, logger *slog.Logger) (*service.Service, *store, error) {
	pools, err := postgres.OpenPools(ctx, cfg.Postgres, migrations.MustFS("eventstore"), logger)
	if err != nil {
		return nil, nil, err
	}
	// The debounced NOTIFYs get a connection of their own: queued behind
	// the appends they announce they would wake subscribers late.
	npool, err := pools.ReserveNotify(ctx, cfg.Notify)
	if err != nil {
		return nil, nil, err
	}
	svc := service.New(info, cfg.HTTP, logger, eventstore.LatencyNames, eventstore.CounterNames)
	// Registered first, so stopped last (OnStop hooks run LIFO, after the
	// HTTP drain): the listener stops, the last appends' NOTIFY is
	// flushed, then the pools close.
	pools.Register(svc)
	st := newStore(pools.Main, npool, cfg, logger)
	if npool != nil {
		svc.OnStop("notifier", st.notifier.Close)
	}
	if err := st.startListener(ctx); err != nil {
		pools.Close()
		return nil, nil, err
	}
	svc.OnStop("listener", st.stopListener)
	eventstore.Mount(svc.Router, st, eventstore.Options{Stats: svc.Stats, Stopping: svc.Stopping(), Timeout: cfg.BackendTimeout})
	return svc, st, nil
}

func main() { service.Start(self, readConfig, build) }
