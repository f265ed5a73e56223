package experiments

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
)

// The partition variant of expiring sessions, measured at the engine
// (in the experiment's scratch schema, not through the service): the same
// N expired rows removed by the delete job's batched DELETE, then held in
// one time partition and removed whole by DETACH PARTITION CONCURRENTLY
// and DROP. Time and WAL of each; the service keeps the delete job,
// because a partition per expiry window suits expiry in bulk with a
// bounded TTL range, which the contract's 1 s to 30 days is not.

// partitionDDL builds the two tables: sessions_rows as the service's
// (an index on expires_at), sessions_parted partitioned by expires_at
// with the expired rows' window [$1, $2) in sessions_parted_old.
var partitionDDL = []string{
	`CREATE TABLE sessions_rows (id uuid PRIMARY KEY, user_id uuid NOT NULL, data jsonb NOT NULL DEFAULT '{}', created_at timestamptz NOT NULL, expires_at timestamptz NOT NULL)`,
	`CREATE INDEX ON sessions_rows (expires_at)`,
	`CREATE TABLE sessions_parted (id uuid NOT NULL, user_id uuid NOT NULL, data jsonb NOT NULL DEFAULT '{}', created_at timestamptz NOT NULL, expires_at timestamptz NOT NULL, PRIMARY KEY (id, expires_at)) PARTITION BY RANGE (expires_at)`,
}

// partitionFill inserts $1 rows into table, all expiring an hour ago.
const partitionFill = `INSERT INTO %s (id, user_id, data, created_at, expires_at)
	SELECT gen_random_uuid(), gen_random_uuid(), '{"cart":[1,2,3]}', now() - interval '2 hours', now() - interval '1 hour'
	FROM generate_series(1, $1)`

// measurePartitionDrop records pg_rows_delete_s / _wal_mb (the batched
// DELETE of n expired rows, batch rows a statement, as the service's
// job) and pg_partition_drop_s / _wal_mb (DETACH CONCURRENTLY then DROP
// of a partition holding the same n rows).
func measurePartitionDrop(ctx context.Context, pool *pgxpool.Pool, n, batch int, res *Result) error {
	for _, sql := range partitionDDL {
		if _, err := pool.Exec(ctx, sql); err != nil {
			return err
		}
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE sessions_parted_old PARTITION OF sessions_parted FOR VALUES FROM (now() - interval '1 day') TO (now())`); err != nil {
		return err
	}
	for _, t := range []string{"sessions_rows", "sessions_parted"} {
		if _, err := pool.Exec(ctx, fmt.Sprintf(partitionFill, t), n); err != nil {
			return fmt.Errorf("fill %s: %w", t, err)
		}
	}
	if _, err := pool.Exec(ctx, `VACUUM (ANALYZE) sessions_rows`); err != nil {
		return err
	}
	del := func(ctx context.Context) error {
		for {
			tag, err := pool.Exec(ctx, `DELETE FROM sessions_rows WHERE id IN (
			    SELECT id FROM sessions_rows WHERE expires_at < now() ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED)`, batch)
			if err != nil || tag.RowsAffected() < int64(batch) {
				return err
			}
		}
	}
	drop := func(ctx context.Context) error {
		// CONCURRENTLY cannot run in a transaction block: each statement
		// is its own, as pool.Exec sends them.
		if _, err := pool.Exec(ctx, `ALTER TABLE sessions_parted DETACH PARTITION sessions_parted_old CONCURRENTLY`); err != nil {
			return err
		}
		_, err := pool.Exec(ctx, `DROP TABLE sessions_parted_old`)
		return err
	}
	for _, m := range []struct {
		key    string
		s, wal driver.Metric
		fn     func(context.Context) error
	}{{"pg_rows_delete", MetricPGRowsDeleteSeconds, MetricPGRowsDeleteWALMB, del}, {"pg_partition_drop", MetricPGPartitionDropSeconds, MetricPGPartitionDropWALMB, drop}} {
		secs, wal, err := timedWAL(ctx, pool, m.fn)
		if err != nil {
			return fmt.Errorf("%s: %w", m.key, err)
		}
		res.metric(m.s, secs)
		res.metric(m.wal, wal/(1<<20))
	}
	res.metric(MetricPGPartitionRows, float64(n))
	return nil
}

// timedWAL runs fn and returns its seconds and the WAL bytes the
// cluster wrote meanwhile (pg_current_wal_lsn differences: cluster-wide,
// so other writers count too).
func timedWAL(ctx context.Context, pool *pgxpool.Pool, fn func(context.Context) error) (float64, float64, error) {
	var before, after string
	if err := pool.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&before); err != nil {
		return 0, 0, err
	}
	t := time.Now()
	if err := fn(ctx); err != nil {
		return 0, 0, err
	}
	secs := time.Since(t).Seconds()
	var wal float64
	if err := pool.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&after); err != nil {
		return 0, 0, err
	}
	if err := pool.QueryRow(ctx, `SELECT pg_wal_lsn_diff($1::pg_lsn, $2::pg_lsn)::float8`, after, before).Scan(&wal); err != nil {
		return 0, 0, err
	}
	return secs, wal, nil
}
