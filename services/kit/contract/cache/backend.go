package cache

import (
	"context"
	"time"
)

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
type Backend interface {
	// Get returns the value under key and true, or false when the key is
	// absent or its time to live has ended (an expired value is never
	// returned, whether or not it has been removed yet).
	Get(ctx context.Context, key string) (value []byte, ok bool, err error)
	// Set stores value under key, replacing any value; ttl zero means no
	// expiry. The Backend may keep value's slice: callers do not change
	// it afterwards.
	Set(ctx context.Context, key string, value []byte, ttl time.Duration) error
	// Delete removes key; a key that is absent is not an error.
	Delete(ctx context.Context, key string) error
	// Close releases what the Backend holds (connections, goroutines);
	// the service calls it once, at shutdown, after the HTTP server has
	// drained, and calls no other method afterwards.
	Close() error
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
