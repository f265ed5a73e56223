package memory

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"

	logc "github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/log"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
)

// delivery is what the consumer recorded of one event.
type delivery struct {
	at  time.Time
	seq int64
}

// Log is the state that outlives an instance: the events in write order,
// their deliveries (deduplicated by id, as the deliveries table) and the
// consumer's confirmed position. It implements logc.EventReader and
// logc.DeliveryRecorder; the zero value is empty and ready.
type Log struct {
	mu         sync.Mutex
	events     []logc.Event   // write order; delivery fields unset
	index      map[string]int // id → index in events
	deliveries map[string]delivery
	seq        int64 // last delivery_seq given
	confirmed  int   // events before this index need no redelivery
	wake       chan struct{}
	held       chan struct{} // while non-nil, Deliver waits for it to close
}

var (
	_ logc.EventReader      = (*Log)(nil)
	_ logc.DeliveryRecorder = (*Log)(nil)
	_ logc.DeliveredReader  = (*Log)(nil)
)

// wakeLocked returns the channel the next append closes; l.mu is held.
func (l *Log) wakeLocked() chan struct{} {
	if l.wake == nil {
		l.wake = make(chan struct{})
	}
	return l.wake
}

// Get returns the event with its delivery.
func (l *Log) Get(_ context.Context, id string) (logc.Event, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	i, ok := l.index[id]
	if !ok {
		return logc.Event{}, fmt.Errorf("event %s: %w", id, httpapi.ErrNotFound)
	}
	e := l.events[i]
	if d, ok := l.deliveries[id]; ok {
		at, seq := d.at, d.seq
		ms := float64(at.Sub(e.CreatedAt).Microseconds()) / 1000
		e.DeliveredAt, e.DeliveryMS, e.DeliverySeq = &at, &ms, &seq
	}
	return e, nil
}

// Delivered returns those of ids that were delivered (logc.DeliveredReader:
// the waits share their re-reads, as on the services).
func (l *Log) Delivered(_ context.Context, ids []string) ([]string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, id := range ids {
		if _, ok := l.deliveries[id]; ok {
			out = append(out, id)
		}
	}
	return out, nil
}

// Hold makes Deliver wait (until release, or its ctx ends) instead of
// recording, as a locked deliveries table makes the services' consumers
// wait; Get and appends go on. release is safe to call more than once.
func (l *Log) Hold() (release func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	held := make(chan struct{})
	l.held = held
	return sync.OnceFunc(func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		close(held)
		if l.held == held {
			l.held = nil
		}
	})
}

// Deliver records the batch's first-time deliveries at time at, in order.
// It waits while the Log is held (Hold).
func (l *Log) Deliver(ctx context.Context, batch []logc.Delivery, at time.Time) (map[string]bool, error) {
	l.mu.Lock()
	for l.held != nil {
		held := l.held
		l.mu.Unlock()
		select {
		case <-held:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		l.mu.Lock()
	}
	defer l.mu.Unlock()
	if l.deliveries == nil {
		l.deliveries = map[string]delivery{}
	}
	fresh := map[string]bool{}
	for _, d := range batch {
		if _, seen := l.deliveries[d.ID]; seen {
			continue
		}
		l.seq++
		l.deliveries[d.ID] = delivery{at: at.UTC(), seq: l.seq}
		fresh[d.ID] = true
	}
	return fresh, nil
}

// append stores the events in order and wakes the consumer.
func (l *Log) append(events []logc.NewEvent) []logc.Created {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.index == nil {
		l.index = map[string]int{}
	}
	out := make([]logc.Created, len(events))
	for i, e := range events {
		// Strictly increasing, as Postgres gives rows of one transaction.
		now := time.Now().UTC()
		if n := len(l.events); n > 0 && !now.After(l.events[n-1].CreatedAt) {
			now = l.events[n-1].CreatedAt.Add(time.Microsecond)
		}
		payload := e.Payload
		if len(payload) == 0 {
			payload = json.RawMessage(`{}`)
		}
		l.index[e.ID] = len(l.events)
		l.events = append(l.events, logc.Event{ID: e.ID, Type: e.Type, Key: e.Key, Payload: payload, CreatedAt: now})
		out[i] = logc.Created{ID: e.ID, CreatedAt: now}
	}
	close(l.wakeLocked())
	l.wake = nil
	return out
}

// Transport is how long the consumer waits after an append before it
// reads the Log: the transport's latency, which a real side always has,
// so that appends arriving together are delivered as one batch.
const Transport = 50 * time.Millisecond

// Backend is one instance's side of the pair on a Log: Append writes to
// it, and a consumer goroutine (Start) reads it from the confirmed
// position and hands batches to the Deliverer. The position is confirmed
// only by a graceful Stop, so a Crash redelivers everything the instance
// consumed: the at-least-once case the suite checks.
type Backend struct {
	log     *Log
	deliver *logc.Deliverer
	cancel  context.CancelFunc
	done    chan struct{}
	end     sync.Once // the first of Stop and Crash decides
	// next is the consumer's position (an index into log.events); only
	// the consumer goroutine writes it before done is closed.
	next int
}

var _ logc.Backend = (*Backend)(nil)

// New returns a Backend on l whose consumer hands its batches to d (the
// contract's Deliverer over l, the instance's Hub and Stats). Call Start.
func New(l *Log, d *logc.Deliverer) *Backend { return &Backend{log: l, deliver: d} }

// Start runs the consumer from the confirmed position until Stop or Crash.
func (b *Backend) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	b.cancel, b.done = cancel, make(chan struct{})
	b.log.mu.Lock()
	b.next = b.log.confirmed
	b.log.mu.Unlock()
	go b.consume(ctx)
}

func (b *Backend) consume(ctx context.Context) {
	defer close(b.done)
	for {
		b.log.mu.Lock()
		batch := make([]logc.Delivery, 0, len(b.log.events)-b.next)
		for _, e := range b.log.events[b.next:] {
			batch = append(batch, logc.Delivery{ID: e.ID, CreatedAt: e.CreatedAt})
		}
		wake := b.log.wakeLocked()
		b.log.mu.Unlock()
		if len(batch) > 0 {
			if err := b.deliver.Deliver(ctx, batch); err != nil {
				if ctx.Err() != nil {
					return
				}
				continue // held past the Deliverer's timeout: retry the batch
			}
			b.next += len(batch)
		}
		select {
		case <-ctx.Done():
			return
		case <-wake:
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(Transport):
		}
	}
}

// Stop ends the consumer and confirms its position, as a graceful
// shutdown does.
func (b *Backend) Stop() {
	b.end.Do(func() {
		b.cancel()
		<-b.done
		b.log.mu.Lock()
		b.log.confirmed = max(b.log.confirmed, b.next)
		b.log.mu.Unlock()
	})
}

// Crash ends the consumer without confirming its position; a Stop after
// it does nothing.
func (b *Backend) Crash() {
	b.end.Do(func() {
		b.cancel()
		<-b.done
	})
}

// Append writes the events to the Log.
func (b *Backend) Append(_ context.Context, events []logc.NewEvent) ([]logc.Created, error) {
	return b.log.append(events), nil
}

// Consumer reports the confirmed position and the lag in records; the
// handler fills in the counters. It answers as the Postgres side
// ("postgres"), whose records it keeps, with Kafka's unit of lag.
func (b *Backend) Consumer(context.Context) (logc.ConsumerStatus, error) {
	b.log.mu.Lock()
	defer b.log.mu.Unlock()
	return logc.ConsumerStatus{
		Backend:  "postgres",
		Running:  true,
		Position: strconv.Itoa(b.log.confirmed),
		Lag:      int64(len(b.log.events) - b.log.confirmed),
		LagUnit:  "records",
	}, nil
}
