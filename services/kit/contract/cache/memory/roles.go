package memory

import (
	"context"
	"sync"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/cache"
)

// Locks is the lock role in a map: one lease per name and a counter of
// tokens per name, under one mutex. Safe for concurrent use; the zero
// value is ready.
type Locks struct {
	mu     sync.Mutex
	held   map[string]cache.Lock
	tokens map[string]int64
}

var _ cache.Locker = (*Locks)(nil)

// live returns name's lease if it has not ended at now.
func (l *Locks) live(name string, now time.Time) (cache.Lock, bool) {
	h, ok := l.held[name]
	return h, ok && now.Before(h.ExpiresAt)
}

// Acquire gives name to owner unless a live lease holds it.
func (l *Locks) Acquire(_ context.Context, name, owner string, lease time.Duration) (cache.Lock, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if h, ok := l.live(name, now); ok {
		return cache.Lock{}, &cache.LockHeldError{Name: name, Remaining: h.ExpiresAt.Sub(now)}
	}
	if l.held == nil {
		l.held, l.tokens = map[string]cache.Lock{}, map[string]int64{}
	}
	l.tokens[name]++
	h := cache.Lock{Name: name, Owner: owner, Token: l.tokens[name], ExpiresAt: now.Add(lease).UTC()}
	l.held[name] = h
	return h, nil
}

// check returns the live holding (name, owner, token), or the error of
// Extend and Release.
func (l *Locks) check(name, owner string, token int64, now time.Time) (cache.Lock, error) {
	h, ok := l.live(name, now)
	switch {
	case !ok:
		return cache.Lock{}, cache.ErrLockNotHeld
	case h.Owner != owner || h.Token != token:
		return cache.Lock{}, &cache.LockHeldError{Name: name, Remaining: h.ExpiresAt.Sub(now)}
	}
	return h, nil
}

// Extend renews a live holding's lease.
func (l *Locks) Extend(_ context.Context, name, owner string, token int64, lease time.Duration) (cache.Lock, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	h, err := l.check(name, owner, token, now)
	if err != nil {
		return h, err
	}
	h.ExpiresAt = now.Add(lease).UTC()
	l.held[name] = h
	return h, nil
}

// Release ends a live holding.
func (l *Locks) Release(_ context.Context, name, owner string, token int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.check(name, owner, token, time.Now()); err != nil {
		return err
	}
	delete(l.held, name)
	return nil
}

// Close does nothing: the maps are the whole state.
func (l *Locks) Close() error { return nil }

// Limits is the rate-limit role in a map: each key's count and window end,
// under one mutex. Safe for concurrent use; the zero value is ready.
type Limits struct {
	mu      sync.Mutex
	windows map[string]window
}

type window struct {
	count int64
	ends  time.Time
}

var _ cache.Limiter = (*Limits)(nil)

// Take counts one take in key's window.
func (l *Limits) Take(_ context.Context, key string, limit int64, length time.Duration) (cache.Take, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if l.windows == nil {
		l.windows = map[string]window{}
	}
	w := l.windows[key]
	if !now.Before(w.ends) {
		w = window{ends: now.Add(length)}
	}
	w.count++
	l.windows[key] = w
	return cache.Take{Admitted: w.count <= limit, Limit: limit, Remaining: max(limit-w.count, 0),
		ResetMS: max(w.ends.Sub(now).Milliseconds(), 0)}, nil
}

// Close does nothing.
func (l *Limits) Close() error { return nil }

// Bus is an in-process bus shared by the instances of a test: each
// instance gets a Client of its own (its PubSub). Publish hands a message
// to every attached Sink, under the Bus's mutex, so every Sink sees one
// order. The zero value is ready.
type Bus struct {
	mu    sync.Mutex
	sinks map[*Client]cache.Sink
}

// Client returns a new PubSub on b, for one instance.
func (b *Bus) Client() *Client { return &Client{bus: b} }

// Client is one instance's PubSub on a Bus: listening from Attach until
// Close.
type Client struct {
	bus *Bus
}

var _ cache.PubSub = (*Client)(nil)

// Publish hands msg to every attached Sink, at once.
func (c *Client) Publish(_ context.Context, channel string, msg []byte) error {
	c.bus.mu.Lock()
	defer c.bus.mu.Unlock()
	for _, s := range c.bus.sinks {
		s.Message(channel, msg)
	}
	return nil
}

// Attach makes s receive every message published from now on.
func (c *Client) Attach(s cache.Sink) {
	c.bus.mu.Lock()
	defer c.bus.mu.Unlock()
	if c.bus.sinks == nil {
		c.bus.sinks = map[*Client]cache.Sink{}
	}
	c.bus.sinks[c] = s
}

// Listening is true while attached.
func (c *Client) Listening() bool {
	c.bus.mu.Lock()
	defer c.bus.mu.Unlock()
	_, ok := c.bus.sinks[c]
	return ok
}

// MessageLimit is the contract's.
func (c *Client) MessageLimit() int { return cache.MaxMessageBytes }

// Close detaches the client's Sink.
func (c *Client) Close() error {
	c.bus.mu.Lock()
	defer c.bus.mu.Unlock()
	delete(c.bus.sinks, c)
	return nil
}
