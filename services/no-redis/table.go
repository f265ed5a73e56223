package main

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/cleaner"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/cache"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/postgres"
)

// tables maps CACHE_TABLE to the table (migrations/cache/0003); the names
// are constants, never input.
var tables = map[string]string{TableUnlogged: "cache_kv", TableLogged: "cache_kv_logged"}

// tableStore is the cache.Backend of ModeUnlogged: one row per key in a
// table every instance shares, with expires_at (NULL: never). Reads ignore
// expired rows; the reaper removes them. Safe for concurrent use; the pool
// belongs to the service.
type tableStore struct {
	pool                *pgxpool.Pool
	table               string
	get, set, del, reap string
}

var _ cache.Backend = (*tableStore)(nil)

func newTableStore(pool *pgxpool.Pool, which string) *tableStore {
	t := tables[which]
	return &tableStore{
		pool: pool, table: t,
		get: `SELECT value FROM ` + t + ` WHERE key = $1 AND (expires_at IS NULL OR expires_at > clock_timestamp())`,
		set: `INSERT INTO ` + t + ` (key, value, expires_at)
		      VALUES ($1, $2, CASE WHEN $3::bigint > 0 THEN clock_timestamp() + $3::bigint * interval '1 microsecond' END)
		      ON CONFLICT (key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at`,
		del: `DELETE FROM ` + t + ` WHERE key = $1`,
		// $1: how long after its expiry a row is kept (µs); $2: the batch.
		reap: `DELETE FROM ` + t + ` WHERE key IN (
		         SELECT key FROM ` + t + ` WHERE expires_at < clock_timestamp() - $1::bigint * interval '1 microsecond'
		         LIMIT $2 FOR UPDATE SKIP LOCKED)`,
	}
}

func (s *tableStore) Get(ctx context.Context, key string) ([]byte, bool, error) {
	var v []byte
	err := s.pool.QueryRow(ctx, s.get, key).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, postgres.MapError(s.table, err)
	}
	return v, true, nil
}

func (s *tableStore) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	_, err := s.pool.Exec(ctx, s.set, key, value, ttl.Microseconds())
	return postgres.MapError(s.table, err)
}

func (s *tableStore) Delete(ctx context.Context, key string) error {
	_, err := s.pool.Exec(ctx, s.del, key)
	return postgres.MapError(s.table, err)
}

// Close does nothing: the pool belongs to the service.
func (s *tableStore) Close() error { return nil }

// reapJob is the cleaner job removing expired rows.
func (s *tableStore) reapJob() cleaner.Job { return cleaner.SQLJob(s.table, s.pool, s.reap) }
