package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/documents"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service"
)

// self is the service's row in the pair table.
var self = pairs.Get("mongodb")

// Defaults and limits of Config; the docs' env table (docs/documents.md)
// is checked against them.
const (
	// DefaultMongoURL is MONGO_URL's default: real MongoDB under compose,
	// FerretDB on the native stack.
	DefaultMongoURL = pairs.DefaultMongoURL
	// DefaultDatabase is MONGO_DATABASE's default.
	DefaultDatabase = "wpe"
	// DefaultMaxPoolSize is MONGO_MAX_POOL_SIZE's default, the same as the
	// Postgres side's pool (postgres.DefaultMaxConns).
	DefaultMaxPoolSize = 16
)

// Config is the service's configuration, read from the environment in main
// and nowhere else.
type Config struct {
	// Common holds ADDR (default the pair table's port, :8085),
	// BODY_LIMIT (default documents.DefaultBodyLimit), the HTTP timeouts,
	// LOG_LEVEL, LOG_FORMAT and BACKEND_TIMEOUT, which bounds server
	// selection, connecting, and each operation (mongo-driver
	// ServerSelectionTimeout, ConnectTimeout, Timeout) and each store
	// call. BACKEND_TIMEOUT was MONGO_TIMEOUT, still read with a warning.
	service.Common
	// MongoURL is the MongoDB connection string. Env MONGO_URL; default
	// DefaultMongoURL.
	MongoURL string
	// Database is the database holding the users collection. Env
	// MONGO_DATABASE; default DefaultDatabase.
	Database string
	// MaxPoolSize caps the driver's connection pool (maxPoolSize). Env
	// MONGO_MAX_POOL_SIZE; default DefaultMaxPoolSize.
	MaxPoolSize int
	// SearchMaxBytes bounds one search page in bytes of JSON. Env
	// SEARCH_MAX_BYTES; default documents.DefaultSearchMaxBytes, at least
	// documents.MinSearchMaxBytes.
	SearchMaxBytes int64
}

// readConfig reads and validates Config; the error names every bad
// variable.
func readConfig(r *config.Reader) (Config, error) {
	c := Config{
		Common:         readCommon(r),
		MongoURL:       r.URL("MONGO_URL", DefaultMongoURL, "mongodb", "mongodb+srv"),
		Database:       r.String("MONGO_DATABASE", DefaultDatabase),
		MaxPoolSize:    r.Int("MONGO_MAX_POOL_SIZE", DefaultMaxPoolSize),
		SearchMaxBytes: documents.ReadSearchMaxBytes(r),
	}
	c.validate(r)
	return c, r.Err()
}

// readCommon reads Common, accepting BACKEND_TIMEOUT's old name.
func readCommon(r *config.Reader) service.Common {
	r.Rename("MONGO_TIMEOUT", "BACKEND_TIMEOUT")
	return service.ReadCommon(r, self.Addr(), documents.DefaultBodyLimit)
}

func (c Config) validate(r *config.Reader) {
	if c.MaxPoolSize < 1 {
		r.Fail("MONGO_MAX_POOL_SIZE", "must be at least 1, got %d", c.MaxPoolSize)
	}
}

// info names the service in /stats and /metrics.
var info = service.Info(self)

// connect opens the driver's pool and pings the primary.
func connect(ctx context.Context, c Config) (*mongo.Client, error) {
	client, err := mongo.Connect(options.Client().ApplyURI(c.MongoURL).
		SetAppName(info.Service).
		SetServerSelectionTimeout(c.BackendTimeout).
		SetConnectTimeout(c.BackendTimeout).
		SetTimeout(c.BackendTimeout).
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
	svc.ReadyBackend("mongodb", "MONGO_URL", cfg.MongoURL, func(ctx context.Context) error { return client.Ping(ctx, readpref.Primary()) })
	db := client.Database(cfg.Database)
	users := db.Collection("users")
	backend, err := prepare(ctx, db, users, cfg.BackendTimeout, logger)
	if err != nil {
		_ = client.Disconnect(context.Background())
		return nil, err
	}
	s := &store{users: users, rec: svc.Stats, ferret: strings.HasPrefix(backend.Server, "FerretDB"), sessions: db.Collection(sessionsCollection)}
	if err := prepareExtras(ctx, s, cfg.BackendTimeout, &backend, logger); err != nil {
		_ = client.Disconnect(context.Background())
		return nil, err
	}
	documents.Mount(svc.Router, s, documents.Options{
		Stats: svc.Stats, Timeout: cfg.BackendTimeout, Info: backend, SearchMaxBytes: cfg.SearchMaxBytes,
		Reports: s, Sessions: s, Changes: s, Stopping: svc.Stopping(),
	})
	return svc, nil
}

func main() { service.Start(self, readConfig, build) }
