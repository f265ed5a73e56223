package kittest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// Defaults at the stack's ports (scripts/ports.env), from the pair table's
// backends (package pairs).
const (
	// DefaultPostgresURL is DATABASE_URL's default.
	DefaultPostgresURL = pairs.DefaultPostgresURL
	// DefaultPgBouncerURL is PGBOUNCER_URL's default.
	DefaultPgBouncerURL = pairs.DefaultPgBouncerURL
	// DefaultRabbitMQURL is RABBITMQ_URL's default.
	DefaultRabbitMQURL = pairs.DefaultRabbitMQURL
	// DefaultKafkaBrokers is KAFKA_BROKERS' default.
	DefaultKafkaBrokers = pairs.DefaultKafkaBrokers
	// DefaultMongoURL is MONGO_URL's default.
	DefaultMongoURL = pairs.DefaultMongoURL
	// DefaultRedisURL is REDIS_URL's default.
	DefaultRedisURL = pairs.DefaultRedisURL
	// DefaultKurrentDBURL is KURRENTDB_URL's default.
	DefaultKurrentDBURL = pairs.DefaultKurrentDBURL
)

// Env returns the variable's value, or def when it is unset or empty.
func Env(name, def string) string {
	if v := strings.TrimSpace(os.Getenv(name)); v != "" {
		return v
	}
	return def
}

// Server returns the address held by the variable name (default def) after
// checking that something answers on its host:port within 3 s. If nothing
// does, a -short run skips the test and any other run fails it, naming the
// variable.
func Server(t testing.TB, name, def string) string {
	t.Helper()
	v := Env(name, def)
	hp, err := hostPort(v)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, redact(v), err)
	}
	conn, err := net.DialTimeout("tcp", hp, 3*time.Second)
	if err != nil {
		msg := fmt.Sprintf("no server answers at %s (%s=%s): start the stack with `make up`, or set %s", hp, name, redact(v), name)
		if testing.Short() {
			t.Skip(msg + " (skipped in -short)")
		}
		t.Fatal(msg)
	}
	_ = conn.Close()
	return v
}

// hostPort extracts host:port from a URL or a host:port list (first entry).
func hostPort(v string) (string, error) {
	if !strings.Contains(v, "://") {
		first, _, _ := strings.Cut(v, ",")
		if _, _, err := net.SplitHostPort(first); err != nil {
			return "", fmt.Errorf("want host:port or a URL: %w", err)
		}
		return first, nil
	}
	u, err := url.Parse(v)
	if err != nil {
		return "", fmt.Errorf("not a URL")
	}
	host := u.Host
	if at := strings.LastIndex(host, "@"); at >= 0 {
		host = host[at+1:]
	}
	host, _, _ = strings.Cut(host, ",")
	if _, _, err := net.SplitHostPort(host); err != nil {
		port := map[string]string{"postgres": "5432", "postgresql": "5432", "amqp": "5672", "mongodb": "27017", "redis": "6379"}[u.Scheme]
		if port == "" {
			return "", fmt.Errorf("no port in URL")
		}
		host = net.JoinHostPort(u.Hostname(), port)
	}
	return host, nil
}

func redact(v string) string {
	u, err := url.Parse(v)
	if err != nil || u.User == nil {
		return v
	}
	return u.Redacted()
}

// PostgresURL returns DATABASE_URL (default the stack's Postgres) after
// checking it answers.
func PostgresURL(t testing.TB) string {
	t.Helper()
	return Server(t, "DATABASE_URL", DefaultPostgresURL)
}

var nonIdent = regexp.MustCompile(`[^a-z0-9]+`)

// UniqueName returns a name unique to this test run: prefix, the test's
// name and random hex, lower-case, only [a-z0-9_], at most 63 bytes (a
// Postgres identifier, a queue, a topic).
func UniqueName(t testing.TB, prefix string) string {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := nonIdent.ReplaceAllString(strings.ToLower(t.Name()), "_")
	name = strings.Trim(name, "_")
	if max := 63 - len(prefix) - 2 - 8; len(name) > max {
		name = name[len(name)-max:]
	}
	return prefix + "_" + name + "_" + hex.EncodeToString(b[:])
}

// Schema creates a schema unique to the test in the Postgres at url and
// drops it (CASCADE) when the test ends.
func Schema(t testing.TB, url string) string {
	t.Helper()
	schema := UniqueName(t, "t")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect to postgres (DATABASE_URL): %v", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatalf("create schema %s: %v", schema, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer c.Close(context.Background())
		if _, err := c.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return schema
}

// Pool opens a pool on url whose search_path is schema, closed when the
// test ends.
func Pool(t testing.TB, url, schema string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatalf("DATABASE_URL: %v", err)
	}
	if schema != "" {
		cfg.ConnConfig.RuntimeParams["search_path"] = schema
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("open pool: %v", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		t.Fatalf("ping postgres (DATABASE_URL): %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// Context returns a context cancelled after d or when the test ends.
func Context(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// Eventually polls cond every 50 ms until it holds, and fails the test,
// naming what it waited for, if it still does not after d. Use generous
// values of d: it bounds a hang, it does not assert a speed.
func Eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
