package main

import (
	"context"
	"fmt"
	"hash/maphash"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/maypok86/otter/v2"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/cache"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pglisten"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/postgres"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/stats"
)

// Channel is the products trigger's notification channel
// (migrations/cache/0002); payloads are "<schema> <id>,<id>,..." or
// "<schema> *".
const Channel = "cache_products"

// entryOverhead is added to each entry's weight: the key and value
// headers, the expiry and otter's node, roughly.
const entryOverhead = 96

// noExpiry stands for "never" in otter's per-entry expiry.
const noExpiry = 100 * 365 * 24 * time.Hour

// genStripes is the number of invalidation generation counters: a key's
// is the one at hash(key) mod genStripes. Keys sharing a stripe refuse
// each other's fills when one is invalidated during the other's load
// (spurious, harmless: the next read loads again); the memory is bounded
// whatever the number of keys.
const genStripes = 4096

// genStripe is one generation counter and the lock that makes "check the
// generation, then store" (Fill) atomic with "bump it, then drop the key"
// (an invalidation) for the keys of the stripe.
type genStripe struct {
	mu  sync.Mutex
	gen atomic.Uint64
}

// item is a cached value and when it expires (zero: never).
type item struct {
	value   []byte
	expires time.Time
}

// localStore is the in-process cache.Backend of ModeLocal: an otter cache
// bounded in bytes, and a LISTEN connection through which the products
// trigger's notifications invalidate it. It is served only while the
// listener listens: from the moment the connection is lost until it is
// back (and the cache flushed) Get and Set answer ErrUnavailable, so the
// handlers bypass it to the origin rather than serve a value whose
// invalidation may have been lost. Safe for concurrent use.
type localStore struct {
	c      *otter.Cache[string, item]
	schema string
	stats  *stats.Recorder
	log    *slog.Logger

	// seed hashes keys to stripes; epoch is bumped by every flush (the
	// whole cache). A FillToken is stripe generation + epoch: both only
	// grow, so the sum is unchanged exactly when neither changed.
	seed    maphash.Seed
	stripes [genStripes]genStripe
	epoch   atomic.Uint64

	// ln is the process' listener (newListener), which carries the
	// invalidations; its state (Listening) gates every read and write of
	// the cache. Set before it starts; the service runs and stops it.
	ln *pglisten.Listener
}

var _ cache.Backend = (*localStore)(nil)

func newLocalStore(cfg Config, st *stats.Recorder, logger *slog.Logger) *localStore {
	l := &localStore{seed: maphash.MakeSeed(), schema: cfg.Postgres.Schema, stats: st, log: logger.With("component", "local cache")}
	l.c = otter.Must(&otter.Options[string, item]{
		MaximumWeight: uint64(cfg.LocalCacheBytes),
		Weigher: func(k string, v item) uint32 {
			return uint32(len(k) + len(v.value) + entryOverhead)
		},
		ExpiryCalculator: otter.ExpiryWritingFunc(func(e otter.Entry[string, item]) time.Duration {
			if e.Value.expires.IsZero() {
				return noExpiry
			}
			return max(time.Until(e.Value.expires), time.Nanosecond)
		}),
		OnDeletion: func(e otter.DeletionEvent[string, item]) {
			if e.Cause == otter.CauseOverflow {
				st.Inc(cache.CounterEvictions)
			}
		},
	})
	return l
}

// ListenerName is the LISTEN connection's application_name, which shows
// in pg_stat_activity (and lets the tests find and terminate it).
func ListenerName(schema string) string {
	return postgres.TruncateName("no-redis listen " + schema)
}

func (l *localStore) unavailable() error {
	return fmt.Errorf("local cache: %w: the invalidation listener is not connected (%v)", httpapi.ErrUnavailable, l.ln.ListenErr())
}

func (l *localStore) stripe(key string) *genStripe {
	return &l.stripes[maphash.String(l.seed, key)%genStripes]
}

func (l *localStore) token(g *genStripe) cache.FillToken {
	return cache.FillToken(g.gen.Load() + l.epoch.Load())
}

func (l *localStore) Get(_ context.Context, key string) ([]byte, cache.FillToken, bool, error) {
	if !l.ln.Listening() {
		return nil, 0, false, l.unavailable()
	}
	tok := l.token(l.stripe(key))
	it, ok := l.c.GetIfPresent(key)
	if !ok || !it.expires.IsZero() && !time.Now().Before(it.expires) {
		return nil, tok, false, nil
	}
	return it.value, tok, true, nil
}

func (l *localStore) set(key string, value []byte, ttl time.Duration) {
	it := item{value: value}
	if ttl > 0 {
		it.expires = time.Now().Add(ttl)
	}
	l.c.Set(key, it)
}

func (l *localStore) Set(_ context.Context, key string, value []byte, ttl time.Duration) error {
	if !l.ln.Listening() {
		return l.unavailable()
	}
	l.set(key, value, ttl)
	return nil
}

// Fill stores under the stripe's lock, if the stripe's generation and the
// epoch are those of tok: an invalidation of the key (the service's PUT,
// or a NOTIFY for an UPDATE from anywhere) takes the same lock to bump the
// generation before it drops the key, and a flush bumps the epoch and then
// waits for every stripe's lock (see flush), so an invalidation either
// refuses this fill or removes what it stored.
func (l *localStore) Fill(_ context.Context, key string, value []byte, ttl time.Duration, tok cache.FillToken) (bool, error) {
	g := l.stripe(key)
	g.mu.Lock()
	defer g.mu.Unlock()
	if !l.ln.Listening() {
		return false, l.unavailable()
	}
	if l.token(g) != tok {
		return false, nil
	}
	l.set(key, value, ttl)
	return true, nil
}

// drop bumps key's generation and removes it, and reports whether a value
// was removed.
func (l *localStore) drop(key string) bool {
	g := l.stripe(key)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.gen.Add(1)
	_, dropped := l.c.Invalidate(key)
	return dropped
}

func (l *localStore) Delete(_ context.Context, key string) error {
	l.drop(key)
	return nil
}

// Close empties the cache. It may be called more than once; the
// listener is the service's to stop.
func (l *localStore) Close() error {
	l.c.InvalidateAll()
	return nil
}

// flush empties the cache and counts it as one invalidation. It bumps the
// epoch first, so that every token taken before refuses its fill, then
// takes and releases each stripe's lock: a fill that read the old epoch
// holds its stripe's lock until it has stored, so once this barrier is
// passed, every such value is in the cache, and InvalidateAll removes it.
func (l *localStore) flush(why string) {
	l.epoch.Add(1)
	for i := range l.stripes {
		l.stripes[i].mu.Lock()
		//lint:ignore SA2001 an empty critical section is the barrier
		l.stripes[i].mu.Unlock()
	}
	l.c.InvalidateAll()
	l.stats.Inc(cache.CounterInvalidations)
	l.log.Info("local cache flushed", "why", why)
}

// invalidate applies one notification of the products trigger: the ids of
// this schema's changed rows, or "*" for all.
func (l *localStore) invalidate(payload string) {
	schema, ids, ok := strings.Cut(payload, " ")
	if !ok || schema != l.schema {
		return
	}
	if ids == "*" {
		l.flush("bulk change")
		return
	}
	for s := range strings.SplitSeq(ids, ",") {
		id, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			l.log.Warn("bad notification payload; flushing", "payload", httpapi.Truncate(payload, 200))
			l.flush("bad payload")
			return
		}
		if l.drop(cache.ProductKey(id)) {
			l.stats.Inc(cache.CounterInvalidations)
		}
	}
}
