package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/kurrent-io/KurrentDB-Client-Go/kurrentdb"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/eventstore"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service"
)

// self is the service's row in the pair table.
var self = pairs.Get("kurrentdb")

// DefaultURL is KURRENTDB_URL's default, the compose stack's KurrentDB
// (insecure single node).
const DefaultURL = pairs.DefaultKurrentDBURL

// Config is the service's configuration, read from the environment in main
// and nowhere else.
type Config struct {
	// Common holds ADDR (default the pair table's port, :8089),
	// BODY_LIMIT, the HTTP timeouts, LOG_LEVEL, LOG_FORMAT and
	// BACKEND_TIMEOUT, which bounds each KurrentDB call but a live
	// subscription.
	service.Common
	// URL is the client's connection string (kurrentdb:// or
	// kurrentdb+discover://, with tls=false for the insecure dev node).
	// Env KURRENTDB_URL; default DefaultURL.
	URL string
	// PageSize is how many $all events one catch-up read asks for (the
	// read's maxCount). Env SUBSCRIBE_PAGE_SIZE; default
	// eventstore.DefaultPageSize, at most eventstore.MaxPageSize.
	PageSize int
}

// readConfig reads and validates Config; the error names every bad
// variable.
func readConfig(r *config.Reader) (Config, error) {
	c := Config{
		Common:   service.ReadCommon(r, self.Addr(), httpapi.DefaultBodyLimit),
		URL:      r.URL("KURRENTDB_URL", DefaultURL, "kurrentdb", "kurrentdb+discover", "esdb", "esdb+discover"),
		PageSize: r.Int("SUBSCRIBE_PAGE_SIZE", eventstore.DefaultPageSize),
	}
	if _, err := kurrentdb.ParseConnectionString(c.URL); err != nil {
		r.Fail("KURRENTDB_URL", "not a KurrentDB connection string")
	}
	if c.PageSize < 1 || c.PageSize > eventstore.MaxPageSize {
		r.Fail("SUBSCRIBE_PAGE_SIZE", "must be between 1 and %d, got %d", eventstore.MaxPageSize, c.PageSize)
	}
	return c, r.Err()
}

// info names the service in /stats and /metrics.
var info = service.Info(self)

// build creates the client (it connects lazily; /readyz tells whether the
// server answers) and assembles the service.
func build(_ context.Context, cfg Config, logger *slog.Logger) (*service.Service, error) {
	kc, err := kurrentdb.ParseConnectionString(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("KURRENTDB_URL: %w", err)
	}
	client, err := kurrentdb.NewClient(kc)
	if err != nil {
		return nil, fmt.Errorf("kurrentdb client (KURRENTDB_URL): %w", err)
	}
	st := &store{client: client, cfg: cfg, logger: logger}
	svc := service.New(info, cfg.HTTP, logger, eventstore.LatencyNames, eventstore.CounterNames)
	svc.OnStop("kurrentdb client", func(context.Context) error { return client.Close() })
	svc.ReadyBackend("kurrentdb", "KURRENTDB_URL", cfg.URL, st.ping)
	eventstore.Mount(svc.Router, st, eventstore.Options{Stats: svc.Stats, Stopping: svc.Stopping(), Timeout: cfg.BackendTimeout})
	return svc, nil
}

func main() { service.Start(self, readConfig, build) }
