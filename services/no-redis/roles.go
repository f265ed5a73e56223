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

// pgLocks is the lock role on Postgres: a lease row per name in
// cache_locks, its fencing token from the sequence cache_lock_tokens
// (migrations/cache/0005). Why a lease row and not a session advisory
// lock: the holder is the HTTP client, whose acquire and release may
// reach different instances, and what ends a dead client's lock is its
// lease, as on the Redis side; an advisory lock would live as long as
// the instance's connection instead (docs/cache.md, "Locks").
//
// An acquire is one pgx Batch (one round trip, one implicit transaction):
//
//  1. INSERT a placeholder row (token 0, already expired) if the name
//     has none, ON CONFLICT DO NOTHING;
//  2. UPDATE the row to the new holder, with nextval of the sequence,
//     WHERE its lease has ended. Under READ COMMITTED the UPDATE waits
//     for the row's lock and re-checks its WHERE on the newest version,
//     so two acquirers of one name are granted one after the other, and
//     the token is taken while the grant holds the row's lock: grants of
//     a name get strictly increasing tokens in grant order. (A token
//     taken in step 1's VALUES would not: it is drawn before any lock,
//     and a slow INSERT could land after a later grant.)
//  3. SELECT the rest of the lease, for a refusal's Retry-After.
//
// Safe for concurrent use; the pool belongs to the service.
type pgLocks struct {
	pool *pgxpool.Pool
}

var _ cache.Locker = (*pgLocks)(nil)

const (
	lockPlaceholder = `INSERT INTO cache_locks (name, owner, token, expires_at) VALUES ($1, '', 0, '-infinity') ON CONFLICT (name) DO NOTHING`
	lockGrant       = `UPDATE cache_locks SET owner = $2, token = nextval('cache_lock_tokens'),
	                          expires_at = clock_timestamp() + $3::bigint * interval '1 microsecond'
	                   WHERE name = $1 AND expires_at <= clock_timestamp()
	                   RETURNING token, expires_at`
	// lockState is the name's live lease, if any: its remaining
	// microseconds (the Retry-After of a refusal). Run after a statement
	// that did not match, it tells 409 (live) from 404 (none).
	lockState = `SELECT greatest(0, extract(epoch FROM expires_at - clock_timestamp()) * 1000000)::bigint
	             FROM cache_locks WHERE name = $1 AND expires_at > clock_timestamp()`
	lockExtend = `UPDATE cache_locks SET expires_at = clock_timestamp() + $4::bigint * interval '1 microsecond'
	              WHERE name = $1 AND owner = $2 AND token = $3 AND expires_at > clock_timestamp()
	              RETURNING expires_at`
	lockRelease = `DELETE FROM cache_locks
	               WHERE name = $1 AND owner = $2 AND token = $3 AND expires_at > clock_timestamp()`
)

// held is the error of a live lease of another holding, remaining µs
// left.
func held(name string, remainingUS int64) error {
	return &cache.LockHeldError{Name: name, Remaining: time.Duration(remainingUS) * time.Microsecond}
}

// state reads lockState's answer from br: a *LockHeldError when a lease
// is live, else ErrLockNotHeld.
func state(br pgx.BatchResults, name string) error {
	var us int64
	err := br.QueryRow().Scan(&us)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return cache.ErrLockNotHeld
	case err != nil:
		return postgres.MapError("cache_locks", err)
	}
	return held(name, us)
}

func (l *pgLocks) Acquire(ctx context.Context, name, owner string, lease time.Duration) (cache.Lock, error) {
	b := &pgx.Batch{}
	b.Queue(lockPlaceholder, name)
	b.Queue(lockGrant, name, owner, lease.Microseconds())
	b.Queue(lockState, name)
	br := l.pool.SendBatch(ctx, b)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return cache.Lock{}, postgres.MapError("cache_locks", err)
	}
	lk := cache.Lock{Name: name, Owner: owner}
	err := br.QueryRow().Scan(&lk.Token, &lk.ExpiresAt)
	if lk, err = grant(br, lk, err); !errors.Is(err, errNotGranted) {
		return lk, err
	}
	if err := state(br, name); !errors.Is(err, cache.ErrLockNotHeld) {
		return cache.Lock{}, err
	}
	// Not granted and no live lease: the holder's lease ended between the
	// two statements. Held a moment ago; the client retries.
	return cache.Lock{}, held(name, 0)
}

func (l *pgLocks) Extend(ctx context.Context, name, owner string, token int64, lease time.Duration) (cache.Lock, error) {
	b := &pgx.Batch{}
	b.Queue(lockExtend, name, owner, token, lease.Microseconds())
	b.Queue(lockState, name)
	br := l.pool.SendBatch(ctx, b)
	defer br.Close()
	lk := cache.Lock{Name: name, Owner: owner, Token: token}
	err := br.QueryRow().Scan(&lk.ExpiresAt)
	if lk, err = grant(br, lk, err); !errors.Is(err, errNotGranted) {
		return lk, err
	}
	return cache.Lock{}, state(br, name)
}

// errNotGranted is grant's answer when the granting statement matched no
// row: the caller reads the lock's state from the batch's next result.
var errNotGranted = errors.New("lock not granted")

// grant finishes a lock batch whose granting statement's Scan into lk
// ended in scanErr: lk once the batch's remaining statement ran and the
// batch committed (it commits at Close: an error there is not a grant),
// errNotGranted when the statement matched no row, else the error.
func grant(br pgx.BatchResults, lk cache.Lock, scanErr error) (cache.Lock, error) {
	switch {
	case errors.Is(scanErr, pgx.ErrNoRows):
		return cache.Lock{}, errNotGranted
	case scanErr != nil:
		return cache.Lock{}, postgres.MapError("cache_locks", scanErr)
	}
	lk.ExpiresAt = lk.ExpiresAt.UTC()
	if _, err := br.Exec(); err != nil {
		return cache.Lock{}, postgres.MapError("cache_locks", err)
	}
	if err := br.Close(); err != nil {
		return cache.Lock{}, postgres.MapError("cache_locks", err)
	}
	return lk, nil
}

func (l *pgLocks) Release(ctx context.Context, name, owner string, token int64) error {
	b := &pgx.Batch{}
	b.Queue(lockRelease, name, owner, token)
	b.Queue(lockState, name)
	br := l.pool.SendBatch(ctx, b)
	defer br.Close()
	tag, err := br.Exec()
	if err != nil {
		return postgres.MapError("cache_locks", err)
	}
	if tag.RowsAffected() == 1 {
		if _, err := br.Exec(); err != nil {
			return postgres.MapError("cache_locks", err)
		}
		return postgres.MapError("cache_locks", br.Close())
	}
	return state(br, name)
}

// Close does nothing: the pool belongs to the service.
func (l *pgLocks) Close() error { return nil }

// pgLimits is the rate-limit role on Postgres: one upsert per take on the
// UNLOGGED table cache_limits (migrations/cache/0005). The row's lock
// serializes the takes of a key, so never more than the limit is
// admitted in a window. "Now" is taken once per statement (the CTE), so
// the window test and the new window's end agree; a take that waited for
// the row's lock counts with its earlier stamp, which can only count it
// into the window that was live when it began (never admit more).
type pgLimits struct {
	pool *pgxpool.Pool
}

var _ cache.Limiter = (*pgLimits)(nil)

// limitTake: excluded.resets_at is now + the window, so
// excluded.resets_at - window is the statement's one "now".
const limitTake = `WITH now AS (SELECT clock_timestamp() AS t)
INSERT INTO cache_limits AS l (key, hits, resets_at)
SELECT $1, 1, now.t + $2::bigint * interval '1 microsecond' FROM now
ON CONFLICT (key) DO UPDATE SET
  hits = CASE WHEN l.resets_at <= excluded.resets_at - $2::bigint * interval '1 microsecond' THEN 1 ELSE l.hits + 1 END,
  resets_at = CASE WHEN l.resets_at <= excluded.resets_at - $2::bigint * interval '1 microsecond' THEN excluded.resets_at ELSE l.resets_at END
RETURNING hits, greatest(0, ceil(extract(epoch FROM resets_at - clock_timestamp()) * 1000))::bigint`

func (l *pgLimits) Take(ctx context.Context, key string, limit int64, window time.Duration) (cache.Take, error) {
	var hits, resetMS int64
	if err := l.pool.QueryRow(ctx, limitTake, key, window.Microseconds()).Scan(&hits, &resetMS); err != nil {
		return cache.Take{}, postgres.MapError("cache_limits", err)
	}
	return cache.Take{Admitted: hits <= limit, Limit: limit, Remaining: max(limit-hits, 0), ResetMS: resetMS}, nil
}

// Close does nothing: the pool belongs to the service.
func (l *pgLimits) Close() error { return nil }

// rolesReapJobs are the cleaner jobs of the roles' tables: lock rows
// whose lease ended and rate-limit rows whose window ended, more than
// EXPIRED_RETENTION ago. Removing an ended lock row is safe: the next
// acquire inserts a placeholder and takes a token from the sequence, above
// every token before.
func rolesReapJobs(pool *pgxpool.Pool) []cleaner.Job {
	return []cleaner.Job{
		cleaner.SQLJob("cache_locks", pool, `DELETE FROM cache_locks WHERE name IN (
		    SELECT name FROM cache_locks WHERE expires_at < clock_timestamp() - $1::bigint * interval '1 microsecond'
		    LIMIT $2 FOR UPDATE SKIP LOCKED)`),
		cleaner.SQLJob("cache_limits", pool, `DELETE FROM cache_limits WHERE key IN (
		    SELECT key FROM cache_limits WHERE resets_at < clock_timestamp() - $1::bigint * interval '1 microsecond'
		    LIMIT $2 FOR UPDATE SKIP LOCKED)`),
	}
}
