package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/documents"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/stats"
)

// Config is the service's configuration, read from the environment in main
// and nowhere else.
type Config struct {
	// Common holds ADDR (default :8085), BODY_LIMIT (default 4MiB: the
	// documents pair stores profiles of several MB), the HTTP timeouts,
	// LOG_LEVEL (info) and LOG_FORMAT (text).
	service.Common
	// MongoURL is the MongoDB connection string. Env MONGO_URL; default
	// mongodb://localhost:27017/ (real MongoDB under compose, FerretDB on
	// the native stack).
	MongoURL string
	// Database is the database holding the users collection. Env
	// MONGO_DATABASE; default wpe.
	Database string
	// Timeout bounds server selection, connecting, and each operation
	// (mongo-driver ServerSelectionTimeout, ConnectTimeout, Timeout). Env
	// MONGO_TIMEOUT; default 10s.
	Timeout time.Duration
	// MaxPoolSize caps the driver's connection pool (maxPoolSize). Env
	// MONGO_MAX_POOL_SIZE; default 16, the same as the Postgres side.
	MaxPoolSize int
}

// readConfig reads and validates Config; the error names every bad
// variable.
func readConfig(r *config.Reader) (Config, error) {
	c := Config{
		Common:      service.ReadCommon(r, ":8085", 4<<20),
		MongoURL:    r.URL("MONGO_URL", "mongodb://localhost:27017/", "mongodb", "mongodb+srv"),
		Database:    r.String("MONGO_DATABASE", "wpe"),
		Timeout:     r.Duration("MONGO_TIMEOUT", 10*time.Second),
		MaxPoolSize: r.Int("MONGO_MAX_POOL_SIZE", 16),
	}
	c.validate(r)
	return c, r.Err()
}

func (c Config) validate(r *config.Reader) {
	if c.Timeout <= 0 {
		r.Fail("MONGO_TIMEOUT", "must be positive, got %v", c.Timeout)
	}
	if c.MaxPoolSize < 1 {
		r.Fail("MONGO_MAX_POOL_SIZE", "must be at least 1, got %d", c.MaxPoolSize)
	}
}

// info names the service in /stats and /metrics.
var info = stats.Info{Service: "mongodb", Pair: "documents", Backend: "mongodb"}

// connect opens the driver's pool and pings the primary.
func connect(ctx context.Context, c Config) (*mongo.Client, error) {
	client, err := mongo.Connect(options.Client().ApplyURI(c.MongoURL).
		SetAppName(info.Service).
		SetServerSelectionTimeout(c.Timeout).
		SetConnectTimeout(c.Timeout).
		SetTimeout(c.Timeout).
		SetMaxPoolSize(uint64(c.MaxPoolSize)))
	if err != nil {
		return nil, fmt.Errorf("MONGO_URL: %w", err)
	}
	if err := client.Ping(ctx, readpref.Primary()); err != nil {
		_ = client.Disconnect(context.Background())
		return nil, fmt.Errorf("mongodb unreachable (MONGO_URL): %w", err)
	}
	return client, nil
}

// build connects the backend and assembles the service.
func build(ctx context.Context, cfg Config, logger *slog.Logger) (*service.Service, error) {
	client, err := connect(ctx, cfg)
	if err != nil {
		return nil, err
	}
	svc := service.New(info, cfg.HTTP, logger, documents.Latencies, documents.Counters)
	svc.OnStop("mongodb client", client.Disconnect)
	svc.Ready("mongodb", func(ctx context.Context) error { return client.Ping(ctx, readpref.Primary()) })
	users := client.Database(cfg.Database).Collection("users")
	backend, err := prepare(ctx, client.Database(cfg.Database), users, cfg.Timeout, logger)
	if err != nil {
		_ = client.Disconnect(context.Background())
		return nil, err
	}
	documents.Mount(svc.Router, &store{users: users, rec: svc.Stats, ferret: strings.HasPrefix(backend.Server, "FerretDB")}, documents.Options{
		Stats: svc.Stats, Timeout: cfg.Timeout, Info: backend,
	})
	return svc, nil
}

func main() { service.Start(readConfig, build) }
