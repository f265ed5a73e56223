package memory

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/cache"
)

// Backend keeps values in a map, and each key's invalidation generation
// in another (a key never deleted is at generation 0). It is safe for
// concurrent use; one mutex makes every method atomic. The zero value is
// empty and ready.
type Backend struct {
	mu     sync.Mutex
	values map[string]entry
	gens   map[string]uint64
}

type entry struct {
	value   []byte
	expires time.Time // zero: never
}

var _ cache.Backend = (*Backend)(nil)

// Get returns the value under key unless it is absent or expired, and the
// key's generation.
func (b *Backend) Get(_ context.Context, key string) ([]byte, cache.FillToken, bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	tok := cache.FillToken(b.gens[key])
	e, ok := b.values[key]
	if !ok || !e.expires.IsZero() && !time.Now().Before(e.expires) {
		delete(b.values, key)
		return nil, tok, false, nil
	}
	return e.value, tok, true, nil
}

// Set stores value under key for ttl (zero: no expiry).
func (b *Backend) Set(_ context.Context, key string, value []byte, ttl time.Duration) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.set(key, value, ttl)
	return nil
}

func (b *Backend) set(key string, value []byte, ttl time.Duration) {
	if b.values == nil {
		b.values = map[string]entry{}
	}
	e := entry{value: value}
	if ttl > 0 {
		e.expires = time.Now().Add(ttl)
	}
	b.values[key] = e
}

// Fill stores value under key if its generation is still tok.
func (b *Backend) Fill(_ context.Context, key string, value []byte, ttl time.Duration, tok cache.FillToken) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if cache.FillToken(b.gens[key]) != tok {
		return false, nil
	}
	b.set(key, value, ttl)
	return true, nil
}

// Delete bumps key's generation and removes it.
func (b *Backend) Delete(_ context.Context, key string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.gens == nil {
		b.gens = map[string]uint64{}
	}
	b.gens[key]++
	delete(b.values, key)
	return nil
}

// Close does nothing: the map is the whole state.
func (b *Backend) Close() error { return nil }

// Origin holds the products: ids 1..cache.Products exist as the
// migration seeds them (Seed) until an Update replaces one. Work is slept
// on every Load, as ORIGIN_WORK_MS does on the Postgres origin. Safe for
// concurrent use; the zero value is ready.
type Origin struct {
	// Work is added to every Load.
	Work    time.Duration
	mu      sync.Mutex
	changed map[int64]cache.Product
}

var _ cache.Origin = (*Origin)(nil)

// seeded is when the memory products were "seeded".
var seeded = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Seed is product id as migrations/cache seeds it.
func Seed(id int64) cache.Product {
	return cache.Product{ID: id, Name: fmt.Sprintf("product %d", id), PriceCents: 100 + id%10000, Stock: id % 1000, UpdatedAt: seeded}
}

// Load returns the product as it was when the load began, after Work:
// like the Postgres origin, whose query sees the snapshot taken at its
// start, so an Update during the work is not seen (the read-through race
// the conformance suite drives).
func (o *Origin) Load(ctx context.Context, id int64) (cache.Product, error) {
	o.mu.Lock()
	p, changed := o.changed[id]
	o.mu.Unlock()
	if o.Work > 0 {
		select {
		case <-time.After(o.Work):
		case <-ctx.Done():
			return cache.Product{}, ctx.Err()
		}
	}
	if changed {
		return p, nil
	}
	if id < 1 || id > cache.Products {
		return cache.Product{}, cache.NotFound(id)
	}
	return Seed(id), nil
}

// Update replaces the product's fields.
func (o *Origin) Update(_ context.Context, id int64, u cache.ProductUpdate) (cache.Product, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.changed[id]; !ok && (id < 1 || id > cache.Products) {
		return cache.Product{}, cache.NotFound(id)
	}
	if o.changed == nil {
		o.changed = map[int64]cache.Product{}
	}
	p := cache.Product{ID: id, Name: u.Name, PriceCents: u.PriceCents, Stock: u.Stock, UpdatedAt: time.Now().UTC()}
	o.changed[id] = p
	return p, nil
}
