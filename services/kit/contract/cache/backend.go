package cache

import (
	"context"
	"time"
)

// FillToken is what a Backend's Get saw of its key's invalidations: the
// key's invalidation generation at that moment. It is opaque to the
// handlers, which only hand it back to Fill of the same Backend; only
// equality matters to the Backend that made it.
type FillToken uint64

// Backend is the cache layer a side implements: bytes under string keys,
// each with an optional time to live. The handlers put products under
// ProductKey and key-value entries under KVKey, so one Backend holds both.
//
// Every method is safe for concurrent use by any number of goroutines and
// honours ctx: the handler bounds each call with the operation timeout,
// and a Backend gives up (returning ctx's error) when ctx ends. A Backend
// that cannot reach its server returns an error wrapping
// httpapi.ErrUnavailable: for a product read the handler then answers
// from the Origin with X-Cache: bypass (never a 5xx for a read the origin
// can serve); for a key-value read it is a 503.
//
// The read-through race. A load that read the old row just before an
// update committed must not fill the cache after that update's
// invalidation. So each key has an invalidation generation: Delete bumps
// it (and removes the value) atomically; Get returns it as a FillToken
// together with the value, in the same round trip; Fill stores only if the
// generation is still the token's. The handler takes the token from the
// Get just before the origin load, so a Delete that follows the update
// either happens before the Fill (which is refused) or after it (and
// removes what it stored). Set is the unconditional store of PUT /kv.
type Backend interface {
	// Get returns the value under key and true, or false when the key is
	// absent or its time to live has ended (an expired value is never
	// returned, whether or not it has been removed yet); in both cases
	// tok is the key's invalidation generation as seen by the same
	// atomic read, for Fill.
	Get(ctx context.Context, key string) (value []byte, tok FillToken, ok bool, err error)
	// Set stores value under key, replacing any value; ttl zero means no
	// expiry. It is unconditional and does not change the key's
	// generation. The Backend may keep value's slice: callers do not
	// change it afterwards.
	Set(ctx context.Context, key string, value []byte, ttl time.Duration) error
	// Fill is Set on condition: it stores value only if no Delete of key
	// (no invalidation from any source the Backend listens to, nor a
	// flush) has happened since the Get that returned tok, and reports
	// whether it stored. The check and the store are atomic with respect
	// to Delete. A refused Fill is not an error: the next read loads
	// again. A Backend may refuse spuriously (for example when another
	// key sharing a generation counter was invalidated), never accept
	// wrongly.
	Fill(ctx context.Context, key string, value []byte, ttl time.Duration, tok FillToken) (stored bool, err error)
	// Delete bumps key's generation and removes its value, atomically
	// (a concurrent Fill sees both or neither); a key that is absent is
	// not an error.
	Delete(ctx context.Context, key string) error
	// Close releases what the Backend holds (connections, goroutines);
	// the service calls it once, at shutdown, after the HTTP server has
	// drained, and calls no other method afterwards.
	Close() error
}

// LayeredBackend is a Backend whose hits come from more than one layer:
// redis' client-side mode answers from the process' copy (local) or, when
// it holds none, from Redis (redis). The handlers call GetLayer instead
// of Get and put its layer in X-Cache-Layer on a hit, in place of
// Options.Layer.
type LayeredBackend interface {
	Backend
	// GetLayer is Get, and names the layer that answered (meaningful on
	// a hit).
	GetLayer(ctx context.Context, key string) (value []byte, tok FillToken, ok bool, layer string, err error)
}

// Origin is the source of truth the products are read through from: the
// products table (package pgorigin), or the memory package's map. It is
// safe for concurrent use and honours ctx like Backend. A missing product
// is an error wrapping httpapi.ErrNotFound; an unreachable origin one
// wrapping httpapi.ErrUnavailable.
type Origin interface {
	// Load reads one product (with the origin's configured extra work,
	// ORIGIN_WORK_MS).
	Load(ctx context.Context, id int64) (Product, error)
	// Update sets the product's fields and updated_at, and returns it as
	// stored.
	Update(ctx context.Context, id int64, u ProductUpdate) (Product, error)
}
