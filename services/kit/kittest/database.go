package kittest

import (
	"context"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/postgres"
)

// Conn opens a connection of the test's own to the Postgres at url,
// closed when the test ends, for a test that needs one session (a
// temporary replication slot, session settings).
func Conn(t testing.TB, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(Context(t, 10*time.Second), url)
	if err != nil {
		t.Fatalf("connect to postgres: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// MigratedPool opens a pool of maxConns connections on a schema of the
// test's own (Schema) in the Postgres at DATABASE_URL (PostgresURL),
// migrated with migrations as the services migrate theirs
// (postgres.OpenMigrated), closed when the test ends.
func MigratedPool(t testing.TB, migrations fs.FS, maxConns int) *pgxpool.Pool {
	t.Helper()
	url := PostgresURL(t)
	c := postgres.Config{URL: url, Schema: Schema(t, url), MaxConns: maxConns}
	pool, err := postgres.OpenMigrated(Context(t, time.Minute), c, migrations, nil)
	if err != nil {
		t.Fatalf("open and migrate schema %s: %v", c.Schema, err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// Statement is one SQL statement and its arguments, for Explain.
type Statement struct {
	SQL  string
	Args []any
}

// UpdatesTasksByPrimaryKey fails the test for each of statements (by
// name) whose plan does not find the queue pair's task records through
// the primary key (tasks_pkey), or reaches them through tasks_open. Run
// it on the state StaleOpenTasks makes, in which the planner believes
// tasks_open almost empty: a status condition written "status IN (...)"
// then makes it walk the whole open backlog for each statement.
func UpdatesTasksByPrimaryKey(t testing.TB, pool *pgxpool.Pool, statements map[string]Statement) {
	t.Helper()
	for name, s := range statements {
		plan := Explain(t, pool, s.SQL, s.Args...)
		if strings.Contains(plan, "tasks_open") || !strings.Contains(plan, "tasks_pkey") {
			t.Errorf("%s: want primary key lookups of tasks, got\n%s", name, plan)
		}
	}
}

// HoldConns acquires every connection of pool (its MaxConns) and holds
// them until the test ends: the pool is exhausted, as in-flight requests
// under overload would leave it.
func HoldConns(t testing.TB, pool *pgxpool.Pool) {
	t.Helper()
	ctx := Context(t, time.Minute)
	for range int(pool.Config().MaxConns) {
		c, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Release)
	}
}
