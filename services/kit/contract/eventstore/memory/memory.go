package memory

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/eventstore"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
)

// Backend keeps every event in memory. It can do everything the contract
// describes (conditional appends, stream reads, pushed subscriptions). It
// is safe for concurrent use; the zero value is empty and ready.
type Backend struct {
	mu      sync.Mutex
	log     []eventstore.RecordedEvent // global order; GlobalPosition = index + 1
	streams map[string][]int           // stream → indexes into log
	wake    chan struct{}              // closed and replaced on every append
}

var _ eventstore.Backend = (*Backend)(nil)

// Capabilities reports every capability.
func (b *Backend) Capabilities() eventstore.Capabilities {
	return eventstore.Capabilities{ConditionalAppend: true, ServerSideStreamRead: true, PushSubscription: true}
}

// wakeLocked returns the channel the next append closes; b.mu is held.
func (b *Backend) wakeLocked() chan struct{} {
	if b.wake == nil {
		b.wake = make(chan struct{})
	}
	return b.wake
}

// Append adds the events to the end of stream if expected holds.
func (b *Backend) Append(_ context.Context, stream string, expected eventstore.ExpectedVersion, events []eventstore.EventData) (eventstore.AppendResult, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.streams == nil {
		b.streams = map[string][]int{}
	}
	idx := b.streams[stream]
	last := int64(len(idx)) - 1
	if !expected.Check(last) {
		return eventstore.AppendResult{}, &eventstore.WrongExpectedVersionError{Stream: stream, Expected: expected, Actual: last}
	}
	now := time.Now().UTC()
	first := last + 1
	for i, e := range events {
		v := first + int64(i)
		meta := e.Metadata
		if len(meta) == 0 {
			meta = json.RawMessage(`{}`)
		}
		g := int64(len(b.log)) + 1
		b.log = append(b.log, eventstore.RecordedEvent{
			Stream: stream, Version: &v, Position: strconv.FormatInt(g, 10), GlobalPosition: g,
			Type: e.Type, Data: e.Data, Metadata: meta, CreatedAt: now,
		})
		idx = append(idx, len(b.log)-1)
	}
	b.streams[stream] = idx
	close(b.wakeLocked())
	b.wake = nil
	lastV, top := first+int64(len(events))-1, b.log[len(b.log)-1]
	return eventstore.AppendResult{FirstVersion: &first, LastVersion: &lastV, Position: top.Position, GlobalPosition: top.GlobalPosition}, nil
}

// Read returns up to limit events of stream with version >= from, at
// most eventstore.MaxReadBytes of them.
func (b *Backend) Read(_ context.Context, stream string, from int64, limit int) (eventstore.ReadResult, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	idx := b.streams[stream]
	r := eventstore.ReadResult{Stream: stream, Events: []eventstore.RecordedEvent{}}
	if n := int64(len(idx)); n > 0 {
		last := n - 1
		r.LastVersion = &last
	}
	page := eventstore.Page{Max: eventstore.MaxReadBytes}
	for v := max(from, 0); v < int64(len(idx)) && len(r.Events) < limit && page.Fits(b.log[idx[v]]); v++ {
		r.Events = append(r.Events, b.log[idx[v]])
	}
	// Every record read was one of the stream's: an honest count.
	scanned := int64(len(r.Events))
	r.RecordsScanned = &scanned
	return r, nil
}

// Subscribe delivers every event after position from, then CaughtUp, then
// live events until ctx ends.
func (b *Backend) Subscribe(ctx context.Context, from string, sub eventstore.Subscriber) error {
	var next int64 // index into log of the next event to deliver
	if from != "" {
		p, err := strconv.ParseInt(from, 10, 64)
		if err != nil || p < 0 {
			return fmt.Errorf("from %q is not a position this service issued: %w", from, httpapi.ErrNotFound)
		}
		next = p
	}
	caughtUp := false
	for {
		b.mu.Lock()
		batch := b.log[min(next, int64(len(b.log))):]
		wake := b.wakeLocked()
		b.mu.Unlock()
		for _, e := range batch {
			if err := sub.Event(e); err != nil {
				return err
			}
		}
		next += int64(len(batch))
		if !caughtUp {
			caughtUp = true
			if err := sub.CaughtUp(); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wake:
		}
	}
}
