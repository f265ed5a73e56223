package main

import (
	"context"
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
//
// Invalidation generations (migrations/cache/0004): table_gen holds one
// counter per stripe of keys, hashtext(key) & 4095 (absent: 0). The
// ordering argument, per key:
//
//   - Get reads the value and the generation in one statement, so in one
//     snapshot: an invalidation (which bumps the generation and deletes
//     the row in one transaction) is wholly in it or wholly not.
//   - Delete (an invalidation) and Fill each run as one pgx Batch, which
//     is one implicit transaction (one Sync) and one round trip. Their
//     first statement takes a transaction-level advisory lock on the key
//     (exclusive for Delete, shared for Fill; held to commit), so the two
//     serialize per key. Under READ COMMITTED each later statement takes
//     a new snapshot, after the lock was granted.
//   - Delete first: Fill's lock waits for Delete's commit, and Fill's
//     INSERT … WHERE generation = token then sees the bumped generation
//     and stores nothing.
//   - Fill first: Delete's lock waits for Fill's commit, and Delete's
//     DELETE then sees the filled row and removes it.
//
// Fills of different keys share locks only on a hashtext collision, and
// stripes only cost a spurious refusal. Set (PUT /kv) stays a plain
// upsert: it neither takes the lock nor looks at the generation.
type tableStore struct {
	pool                *pgxpool.Pool
	table               string
	get, set, del, reap string
	lock, lockShared    string
	bump, fill          string
}

var _ cache.Backend = (*tableStore)(nil)

func newTableStore(pool *pgxpool.Pool, which string) *tableStore {
	t := tables[which]
	g := t + "_gen"
	stripe := `hashtext($1) & 4095`
	// The advisory lock's first key names the table, so that the two
	// tables (and other users of advisory locks) do not meet.
	lockKeys := `(hashtext('` + t + `'), hashtext($1))`
	expires := `CASE WHEN $3::bigint > 0 THEN clock_timestamp() + $3::bigint * interval '1 microsecond' END`
	return &tableStore{
		pool: pool, table: t,
		get: `SELECT coalesce((SELECT gen FROM ` + g + ` WHERE stripe = ` + stripe + `), 0),
		             (SELECT value FROM ` + t + ` WHERE key = $1 AND (expires_at IS NULL OR expires_at > clock_timestamp()))`,
		set: `INSERT INTO ` + t + ` (key, value, expires_at)
		      VALUES ($1, $2, ` + expires + `)
		      ON CONFLICT (key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at`,
		lockShared: `SELECT pg_advisory_xact_lock_shared` + lockKeys,
		// $4: the token.
		fill: `INSERT INTO ` + t + ` (key, value, expires_at)
		       SELECT $1::text, $2::bytea, ` + expires + `
		       WHERE coalesce((SELECT gen FROM ` + g + ` WHERE stripe = ` + stripe + `), 0) = $4
		       ON CONFLICT (key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at`,
		lock: `SELECT pg_advisory_xact_lock` + lockKeys,
		bump: `INSERT INTO ` + g + ` (stripe, gen) VALUES (` + stripe + `, 1)
		       ON CONFLICT (stripe) DO UPDATE SET gen = ` + g + `.gen + 1`,
		del: `DELETE FROM ` + t + ` WHERE key = $1`,
		// $1: how long after its expiry a row is kept (µs); $2: the batch.
		reap: `DELETE FROM ` + t + ` WHERE key IN (
		         SELECT key FROM ` + t + ` WHERE expires_at < clock_timestamp() - $1::bigint * interval '1 microsecond'
		         LIMIT $2 FOR UPDATE SKIP LOCKED)`,
	}
}

func (s *tableStore) Get(ctx context.Context, key string) ([]byte, cache.FillToken, bool, error) {
	var gen int64
	var v []byte
	if err := s.pool.QueryRow(ctx, s.get, key).Scan(&gen, &v); err != nil {
		return nil, 0, false, postgres.MapError(s.table, err)
	}
	return v, cache.FillToken(gen), v != nil, nil
}

func (s *tableStore) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	_, err := s.pool.Exec(ctx, s.set, key, value, ttl.Microseconds())
	return postgres.MapError(s.table, err)
}

// batch runs b: one round trip, one implicit transaction. It returns the
// rows its last statement affected.
func (s *tableStore) batch(ctx context.Context, b *pgx.Batch) (int64, error) {
	br := s.pool.SendBatch(ctx, b)
	var n int64
	for range b.Len() {
		tag, err := br.Exec()
		if err != nil {
			_ = br.Close()
			return 0, postgres.MapError(s.table, err)
		}
		n = tag.RowsAffected()
	}
	return n, postgres.MapError(s.table, br.Close())
}

func (s *tableStore) Fill(ctx context.Context, key string, value []byte, ttl time.Duration, tok cache.FillToken) (bool, error) {
	b := &pgx.Batch{}
	b.Queue(s.lockShared, key)
	b.Queue(s.fill, key, value, ttl.Microseconds(), int64(tok))
	n, err := s.batch(ctx, b)
	return n == 1, err
}

func (s *tableStore) Delete(ctx context.Context, key string) error {
	b := &pgx.Batch{}
	b.Queue(s.lock, key)
	b.Queue(s.bump, key)
	b.Queue(s.del, key)
	_, err := s.batch(ctx, b)
	return err
}

// Close does nothing: the pool belongs to the service.
func (s *tableStore) Close() error { return nil }

// reapJob is the cleaner job removing expired rows.
func (s *tableStore) reapJob() cleaner.Job { return cleaner.SQLJob(s.table, s.pool, s.reap) }
