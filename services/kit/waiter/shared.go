package waiter

import (
	"context"
	"sync"
	"time"
)

// Check reads in one call which of keys have their outcome in (a task
// done or dead, an event delivered) and returns those; keys missing from
// the answer are still waited for. It is the one query a Rereader makes
// per interval for every waiter of its service.
type Check func(ctx context.Context, keys []string) (done []string, err error)

// Rereader shares the periodic re-reads of the long polls of one Hub:
// instead of each waiter re-reading its own key every interval (one
// backend query per waiter per interval: 3,000 waiters re-reading four
// times a second made Postgres run 12,000 transactions a second), one
// goroutine calls Check once per interval with every key waited on, and
// wakes through the Hub the keys whose outcome is in; only those waiters
// read again. The goroutine runs only while someone waits, and ends
// within an interval after the last waiter leaves. Its methods are safe
// for concurrent use.
type Rereader struct {
	hub      *Hub
	check    Check
	interval time.Duration
	timeout  time.Duration

	mu      sync.Mutex
	keys    map[string]int // waiters per key
	running bool
	checks  int64
}

// NewRereader returns a Rereader that wakes hub's waiters, calling check
// every interval (DefaultReread if zero or less), each call bounded by
// timeout (10 s if zero or less). A failed check wakes every waiter, so
// that each reads its own key and reports what it finds (the backend's
// error, usually), rather than waiting out its timeout on a dead backend.
func NewRereader(hub *Hub, interval, timeout time.Duration, check Check) *Rereader {
	if interval <= 0 {
		interval = DefaultReread
	}
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	return &Rereader{hub: hub, check: check, interval: interval, timeout: timeout, keys: map[string]int{}}
}

// Checks returns how many Check calls were made, for tests and metrics.
func (s *Rereader) Checks() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.checks
}

// Running reports whether the re-read goroutine runs (it does only while
// someone waits, and for at most an interval after).
func (s *Rereader) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running
}

// add registers a waiter of key until the returned function is called.
func (s *Rereader) add(key string) (remove func()) {
	s.mu.Lock()
	s.keys[key]++
	if !s.running {
		s.running = true
		go s.loop()
	}
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.keys[key]--; s.keys[key] <= 0 {
			delete(s.keys, key)
		}
	}
}

func (s *Rereader) loop() {
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for range t.C {
		s.mu.Lock()
		if len(s.keys) == 0 {
			// Nobody waits: end, and clear the map so that a burst of
			// waiters leaves no memory behind.
			s.running, s.keys = false, map[string]int{}
			s.mu.Unlock()
			return
		}
		keys := make([]string, 0, len(s.keys))
		for k := range s.keys {
			keys = append(keys, k)
		}
		s.checks++
		s.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
		done, err := s.check(ctx, keys)
		cancel()
		if err != nil {
			done = keys
		}
		if len(done) > 0 {
			s.hub.Wake(done...)
		}
	}
}
