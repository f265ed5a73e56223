package kittest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Querier is what Explain needs of a pool, a connection or a transaction.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Explain returns the plan Postgres chooses for sql with args (EXPLAIN,
// so a data-modifying statement is planned, not run), one line per node,
// for tests that pin an access path.
func Explain(t testing.TB, db Querier, sql string, args ...any) string {
	t.Helper()
	rows, err := db.Query(Context(t, 30*time.Second), "EXPLAIN "+sql, args...)
	if err != nil {
		t.Fatalf("EXPLAIN: %v", err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("EXPLAIN: %v", err)
	}
	return strings.Join(lines, "\n")
}

// StaleOpenTasks fills the queue pair's tasks table (on pool's schema,
// migrated) with done tasks, analyzes it, then adds open ones that the
// statistics do not know of: the state of a long-lived queue whose backlog
// grew by less than autovacuum's analyze threshold (10% of the table), in
// which the planner believes almost no task is open. It returns the open
// tasks' ids.
func StaleOpenTasks(t testing.TB, pool *pgxpool.Pool, done, open int) []string {
	t.Helper()
	ctx := Context(t, time.Minute)
	for _, q := range []string{
		`INSERT INTO tasks (id, kind, status, processed_at)
		 SELECT gen_random_uuid(), 'email', 'done', clock_timestamp() FROM generate_series(1, $1)`,
		`ANALYZE tasks`,
	} {
		args := []any{done}
		if !strings.Contains(q, "$1") {
			args = nil
		}
		if _, err := pool.Exec(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", strings.Fields(q)[0], err)
		}
	}
	rows, err := pool.Query(ctx, `INSERT INTO tasks (id, kind) SELECT gen_random_uuid(), 'email' FROM generate_series(1, $1) RETURNING id::text`, open)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return ids
}
