package postgres

import (
	"context"
	"fmt"
	"hash/fnv"
	"io/fs"
	"log/slog"
	"maps"
	"regexp"
	"slices"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service"
)

// DefaultURL is the stack's Postgres (native `make up` and compose alike),
// from the pair table's backends.
const DefaultURL = pairs.DefaultPostgresURL

// Defaults and limits of Config.
const (
	// DefaultMaxConns is DATABASE_MAX_CONNS's default.
	DefaultMaxConns = 16
	// MinMaxConns and MaxMaxConns bound DATABASE_MAX_CONNS.
	MinMaxConns, MaxMaxConns = 1, 1000
	// DefaultConnectTimeout is DATABASE_CONNECT_TIMEOUT's default.
	DefaultConnectTimeout = 5 * time.Second
)

// Config holds the pool's settings; services embed it in their Config.
type Config struct {
	// URL is the connection string. Env DATABASE_URL; default DefaultURL.
	URL string
	// Schema is the pair's schema, created if missing and used as the
	// pool's search_path. Env DATABASE_SCHEMA; default the pair's name.
	// Empty means the server's default search_path.
	Schema string
	// MaxConns caps the pool (pgxpool pool_max_conns). Env
	// DATABASE_MAX_CONNS; default DefaultMaxConns, between MinMaxConns and
	// MaxMaxConns.
	MaxConns int
	// ConnectTimeout bounds each connection attempt (libpq
	// connect_timeout). Env DATABASE_CONNECT_TIMEOUT; default
	// DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// Params are server settings sent at every connection's start (pgx
	// RuntimeParams), such as default_toast_compression. A service sets
	// them from its own variables; ReadConfig reads none.
	Params map[string]string
}

// Env is the interface of config.Reader that ReadConfig needs.
type Env interface {
	URL(name, def string, schemes ...string) string
	String(name, def string) string
	Int(name string, def int) int
	Duration(name string, def time.Duration) time.Duration
	Fail(name, format string, args ...any)
}

var identRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// ReadConfig reads Config from env, with defaultSchema, and validates it.
func ReadConfig(env Env, defaultSchema string) Config {
	c := Config{
		URL:            env.URL("DATABASE_URL", DefaultURL, "postgres", "postgresql"),
		Schema:         env.String("DATABASE_SCHEMA", defaultSchema),
		MaxConns:       env.Int("DATABASE_MAX_CONNS", DefaultMaxConns),
		ConnectTimeout: env.Duration("DATABASE_CONNECT_TIMEOUT", DefaultConnectTimeout),
	}
	if c.Schema != "" && !identRE.MatchString(c.Schema) {
		env.Fail("DATABASE_SCHEMA", "%q is not a plain lower-case identifier", c.Schema)
	}
	if c.MaxConns < MinMaxConns || c.MaxConns > MaxMaxConns {
		env.Fail("DATABASE_MAX_CONNS", "must be between %d and %d, got %d", MinMaxConns, MaxMaxConns, c.MaxConns)
	}
	if c.ConnectTimeout <= 0 {
		env.Fail("DATABASE_CONNECT_TIMEOUT", "must be positive, got %v", c.ConnectTimeout)
	}
	return c
}

// Open creates the schema if missing, opens a pool whose connections use it
// as search_path, and pings it. The caller closes the pool.
func Open(ctx context.Context, c Config) (*pgxpool.Pool, error) {
	pc, err := pgxpool.ParseConfig(c.URL)
	if err != nil {
		return nil, fmt.Errorf("DATABASE_URL: %w", err)
	}
	if c.MaxConns > 0 {
		pc.MaxConns = int32(c.MaxConns)
	}
	if c.ConnectTimeout > 0 {
		pc.ConnConfig.ConnectTimeout = c.ConnectTimeout
	}
	maps.Copy(pc.ConnConfig.RuntimeParams, c.Params)
	if c.Schema != "" {
		if err := EnsureSchema(ctx, c.URL, c.Schema, c.ConnectTimeout); err != nil {
			return nil, err
		}
		pc.ConnConfig.RuntimeParams["search_path"] = c.Schema
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("open postgres pool: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, max(c.ConnectTimeout, time.Second))
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres unreachable (DATABASE_URL): %w", err)
	}
	return pool, nil
}

// OpenReserved opens a second, small pool of conns connections on c's
// database and schema for a service's own background work (queue
// workers, a log consumer). Requests may hold every connection of the main
// pool (DATABASE_MAX_CONNS) under overload, and a worker waiting behind
// them stops the work the requests wait for; the reserved pool is theirs
// alone. The caller closes it after the work stops.
func OpenReserved(ctx context.Context, c Config, conns int) (*pgxpool.Pool, error) {
	c.MaxConns = conns
	pool, err := Open(ctx, c)
	if err != nil {
		return nil, fmt.Errorf("reserved pool: %w", err)
	}
	return pool, nil
}

// EnsureSchema creates the schema if it does not exist.
func EnsureSchema(ctx context.Context, url, schema string, timeout time.Duration) error {
	if !identRE.MatchString(schema) {
		return fmt.Errorf("schema %q is not a plain lower-case identifier", schema)
	}
	cc, err := pgx.ParseConfig(url)
	if err != nil {
		return fmt.Errorf("DATABASE_URL: %w", err)
	}
	if timeout > 0 {
		cc.ConnectTimeout = timeout
	}
	ctx, cancel := context.WithTimeout(ctx, max(timeout, time.Second)*2)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return fmt.Errorf("postgres unreachable (DATABASE_URL): %w", err)
	}
	defer conn.Close(context.Background())
	// Simple protocol: this works through pgbouncer in transaction mode too.
	_, err = conn.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{schema}.Sanitize(), pgx.QueryExecModeSimpleProtocol)
	// Two creators racing on IF NOT EXISTS can still collide on the catalog's
	// unique index; the schema exists either way.
	if SQLSTATE(err) == pgerrcode.UniqueViolation {
		return nil
	}
	if err != nil {
		return fmt.Errorf("create schema %s: %w", schema, err)
	}
	return nil
}

// Ping checks that the pool reaches Postgres; services register it as their
// readiness check.
func Ping(pool *pgxpool.Pool) func(context.Context) error {
	return func(ctx context.Context) error { return pool.Ping(ctx) }
}

// Register makes pool part of svc's lifecycle: /readyz pings it (check
// "postgres"; a failure names DATABASE_URL, see service.ReadyBackend), and shutdown closes it after every OnStop hook registered
// later (hooks run in reverse), so the consumers and workers a service
// registers after it stop before their pool closes.
func Register(svc *service.Service, pool *pgxpool.Pool) {
	svc.OnStop("postgres pool", func(context.Context) error { pool.Close(); return nil })
	svc.ReadyBackend("postgres", "DATABASE_URL", pool.Config().ConnString(), Ping(pool))
}

// Pools is a service's Postgres pools: Main, migrated, for its requests,
// and the reserved pools its background machinery (consumers, workers, a
// notifier) gets so that it never waits behind requests for a connection.
// An assembly that fails after opening them calls Close; one that
// succeeds calls Register.
type Pools struct {
	// Main is the requests' pool (DATABASE_MAX_CONNS).
	Main *pgxpool.Pool

	cfg      Config
	reserved []*pgxpool.Pool
	names    []string
}

// OpenPools opens and migrates Main (OpenMigrated).
func OpenPools(ctx context.Context, c Config, migrations fs.FS, logger *slog.Logger) (*Pools, error) {
	pool, err := OpenMigrated(ctx, c, migrations, logger)
	if err != nil {
		return nil, err
	}
	return &Pools{Main: pool, cfg: c}, nil
}

// Reserve opens a reserved pool of conns connections (OpenReserved) for
// what name says (it names the pool's stop hook). If it fails, every pool
// opened so far is closed.
func (p *Pools) Reserve(ctx context.Context, name string, conns int) (*pgxpool.Pool, error) {
	pool, err := OpenReserved(ctx, p.cfg, conns)
	if err != nil {
		p.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	p.reserved = append(p.reserved, pool)
	p.names = append(p.names, name)
	return pool, nil
}

// Close closes the reserved pools, last opened first, then Main.
func (p *Pools) Close() {
	for _, pool := range slices.Backward(p.reserved) {
		pool.Close()
	}
	p.Main.Close()
}

// Register is Register(svc, Main) for every pool: /readyz pings Main, and
// shutdown closes the reserved pools, then Main, after every OnStop hook
// registered later (hooks run in reverse), so the consumers and workers a
// service registers after it stop before their pools close.
func (p *Pools) Register(svc *service.Service) {
	Register(svc, p.Main)
	for i, pool := range p.reserved {
		svc.OnStop(p.names[i]+" postgres pool", func(context.Context) error { pool.Close(); return nil })
	}
}

// provider builds a goose Provider over the pool, with a session lock so
// that two instances migrating the same schema at once do not race. The
// lock id is derived from the schema: different schemas (parallel tests)
// do not wait on each other.
func provider(pool *pgxpool.Pool, migrations fs.FS) (*goose.Provider, func() error, error) {
	db := stdlib.OpenDBFromPool(pool)
	h := fnv.New64a()
	_, _ = h.Write([]byte("goose:" + pool.Config().ConnConfig.RuntimeParams["search_path"]))
	// Retry the lock every second for up to two minutes (goose: 5 s, 5 min).
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(int64(h.Sum64()>>1)), lock.WithLockTimeout(1, 120))
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations, goose.WithSessionLocker(locker))
	if err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("load migrations: %w", err)
	}
	return p, db.Close, nil
}

// Migrate applies every pending migration of the FS (files NNNN_name.sql
// at its root) in the pool's schema, and logs what it applied.
func Migrate(ctx context.Context, pool *pgxpool.Pool, migrations fs.FS, logger *slog.Logger) error {
	p, closeDB, err := provider(pool, migrations)
	if err != nil {
		return err
	}
	defer closeDB()
	results, err := p.Up(ctx)
	if err != nil {
		return fmt.Errorf("apply migrations: %w", err)
	}
	v, err := p.GetDBVersion(ctx)
	if err != nil {
		return fmt.Errorf("read migration version: %w", err)
	}
	if logger != nil {
		logger.Info("migrations applied", "applied_now", len(results), "version", v)
	}
	return nil
}

// MigrateDown rolls back every migration of the FS in the pool's schema.
func MigrateDown(ctx context.Context, pool *pgxpool.Pool, migrations fs.FS) error {
	p, closeDB, err := provider(pool, migrations)
	if err != nil {
		return err
	}
	defer closeDB()
	if _, err := p.DownTo(ctx, 0); err != nil {
		return fmt.Errorf("roll back migrations: %w", err)
	}
	return nil
}

// Status returns, per migration of the FS, its version and whether it is
// applied in the pool's schema.
func Status(ctx context.Context, pool *pgxpool.Pool, migrations fs.FS) ([]*goose.MigrationStatus, error) {
	p, closeDB, err := provider(pool, migrations)
	if err != nil {
		return nil, err
	}
	defer closeDB()
	return p.Status(ctx)
}

// OpenMigrated opens the pool (Open) and applies the migrations (Migrate),
// closing the pool again if they fail. It is what every Postgres-backed
// service does at start.
func OpenMigrated(ctx context.Context, c Config, migrations fs.FS, logger *slog.Logger) (*pgxpool.Pool, error) {
	pool, err := Open(ctx, c)
	if err != nil {
		return nil, err
	}
	if err := Migrate(ctx, pool, migrations, logger); err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
}
