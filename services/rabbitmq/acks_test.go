package main

import (
	"fmt"
	"slices"
	"sync"
	"testing"
)

// fakeChannel records the settlements an acker sends.
type fakeChannel struct {
	mu   sync.Mutex
	sent []string
}

func (f *fakeChannel) Ack(tag uint64, multiple bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sent = append(f.sent, fmt.Sprintf("ack %d multiple=%v", tag, multiple))
	return nil
}

func (f *fakeChannel) Nack(tag uint64, multiple, requeue bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sent = append(f.sent, fmt.Sprintf("nack %d requeue=%v", tag, requeue))
	return nil
}

func (f *fakeChannel) Reject(tag uint64, requeue bool) error { return f.Nack(tag, false, requeue) }

func (f *fakeChannel) take(t testing.TB, want ...string) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if !slices.Equal(f.sent, want) {
		t.Fatalf("sent %q, want %q", f.sent, want)
	}
	f.sent = nil
}

// trackedAcker returns an acker of limit on a fakeChannel, tracking the
// deliveries tagged 1 to n.
func trackedAcker(limit int, n uint64) (*acker, *fakeChannel) {
	ch := &fakeChannel{}
	a := newAcker(ch, limit)
	for tag := uint64(1); tag <= n; tag++ {
		a.track(tag)
	}
	return a, ch
}

// TestAckerMultiple: out-of-order settlements go out as one multiple ack
// once the prefix is settled, never past a delivery still in work, never
// to a tag already sent.
func TestAckerMultiple(t *testing.T) {
	t.Parallel()
	a, ch := trackedAcker(100, 6)
	a.ack(3, 2)
	ch.take(t) // 1 still in work
	a.ack(1)
	ch.take(t, "ack 3 multiple=true")
	a.nack(false, 4) // dead-lettered at once
	ch.take(t, "nack 4 requeue=false")
	a.ack(6)
	ch.take(t) // 5 in work
	a.nack(true, 5)
	ch.take(t, "nack 5 requeue=true", "ack 6 multiple=true")
	a.ack(6, 1) // settled already: nothing more
	ch.take(t)
}

// TestAckerLimit: settled deliveries waiting behind a slow one are sent
// one by one past the limit, and the later multiple ack skips them.
func TestAckerLimit(t *testing.T) {
	t.Parallel()
	a, ch := trackedAcker(2, 5)
	a.ack(2, 3)
	ch.take(t)
	a.ack(4)
	ch.take(t, "ack 2 multiple=false", "ack 3 multiple=false", "ack 4 multiple=false")
	a.ack(1)
	ch.take(t, "ack 1 multiple=true") // 2–4 are gone: the multiple stops at 1
	a.ack(5)
	ch.take(t, "ack 5 multiple=true")
	a.track(6)
	a.track(7)
	a.ack(7)
	a.flush()
	ch.take(t, "ack 7 multiple=false") // 6 still in work: left to the broker
}
