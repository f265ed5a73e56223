package memory

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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
	// groups are the groups other than the default one (whose state is
	// the fields above), by name.
	groups map[string]*group
	// MaxGroups bounds the groups, the default one included (0:
	// logc.DefaultMaxGroups).
	MaxGroups int
}

// group is a non-default group's state in the Log.
type group struct {
	from       string
	deliveries map[string]delivery
	// confirmed is the group's position: events before this index need
	// no redelivery; a group from latest starts at the end of the log
	// when it is created.
	confirmed int
}

var (
	_ logc.EventReader      = (*Log)(nil)
	_ logc.DeliveryRecorder = (*Log)(nil)
	_ logc.DeliveredReader  = (*Log)(nil)
	_ logc.GroupEventReader = (*Log)(nil)
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
	return l.event(id, l.deliveries)
}

// event returns event id with its delivery in deliveries (the default
// group's or another group's), if it has one. The caller holds l.mu.
func (l *Log) event(id string, deliveries map[string]delivery) (logc.Event, error) {
	i, ok := l.index[id]
	if !ok {
		return logc.Event{}, fmt.Errorf("event %s: %w", id, httpapi.ErrNotFound)
	}
	e := l.events[i]
	if d, ok := deliveries[id]; ok {
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

// Deliver records the batch's first-time deliveries to the default group
// at time at, in order. It waits while the Log is held (Hold).
func (l *Log) Deliver(ctx context.Context, batch []logc.Delivery, at time.Time) (map[string]bool, error) {
	return l.deliverTo(ctx, "", batch, at)
}

// groupRecorder records one non-default group's deliveries.
type groupRecorder struct {
	l    *Log
	name string
}

// Deliver implements logc.DeliveryRecorder for the group.
func (g groupRecorder) Deliver(ctx context.Context, batch []logc.Delivery, at time.Time) (map[string]bool, error) {
	return g.l.deliverTo(ctx, g.name, batch, at)
}

// ForGroup returns the DeliveryRecorder of a group ("" or
// logc.DefaultGroup: l itself).
func (l *Log) ForGroup(name string) logc.DeliveryRecorder {
	if name == "" || name == logc.DefaultGroup {
		return l
	}
	return groupRecorder{l: l, name: name}
}

// deliverTo records a batch for the group ("": the default one); a batch
// for a deleted group records nothing.
func (l *Log) deliverTo(ctx context.Context, name string, batch []logc.Delivery, at time.Time) (map[string]bool, error) {
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
	into := l.deliveries
	if name != "" {
		g, ok := l.groups[name]
		if !ok {
			return map[string]bool{}, nil
		}
		into = g.deliveries
	}
	fresh := map[string]bool{}
	for _, d := range batch {
		if _, seen := into[d.ID]; seen {
			continue
		}
		l.seq++
		into[d.ID] = delivery{at: at.UTC(), seq: l.seq}
		fresh[d.ID] = true
	}
	return fresh, nil
}

// GetIn returns the event with its delivery to a non-default group
// (logc.GroupEventReader).
func (l *Log) GetIn(_ context.Context, name, id string) (logc.Event, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	g, ok := l.groups[name]
	if !ok {
		return logc.Event{}, logc.UnknownGroup(name)
	}
	return l.event(id, g.deliveries)
}

// GroupHeld reports whether the Log still holds what group name retained
// (its deliveries and position): false once the group is deleted.
func (l *Log) GroupHeld(name string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.groups[name]
	return ok
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
// it, and a consumer goroutine per group (Start) reads it from the
// group's confirmed position and hands batches to the group's Deliverer.
// A position is confirmed only by a graceful Stop, so a Crash redelivers
// everything the instance consumed: the at-least-once case the suite
// checks.
type Backend struct {
	log     *Log
	deliver *logc.Deliverer
	endOnce sync.Once // the first of Stop and Crash decides

	mu        sync.Mutex
	consumers map[string]*consumer // by group; "" is the default group
	stopped   bool
}

// consumer reads the Log for one group.
type consumer struct {
	name    string // "" for the default group
	deliver *logc.Deliverer
	cancel  context.CancelFunc
	done    chan struct{}
	// next is the consumer's position (an index into log.events).
	next atomic.Int64
}

var (
	_ logc.Backend      = (*Backend)(nil)
	_ logc.GroupBackend = (*Backend)(nil)
)

// New returns a Backend on l whose default group's consumer hands its
// batches to d (the contract's Deliverer over l, the instance's Hub and
// Stats); the other groups' consumers get a copy of d recording for their
// group. Call Start.
func New(l *Log, d *logc.Deliverer) *Backend {
	return &Backend{log: l, deliver: d, consumers: map[string]*consumer{}}
}

// Start runs a consumer per group from its confirmed position until Stop
// or Crash.
func (b *Backend) Start() {
	b.log.mu.Lock()
	starts := map[string]int{"": b.log.confirmed}
	for name, g := range b.log.groups {
		starts[name] = g.confirmed
	}
	b.log.mu.Unlock()
	b.mu.Lock()
	defer b.mu.Unlock()
	for name, at := range starts {
		b.startLocked(name, at)
	}
}

// startLocked starts the group's consumer at index at; b.mu is held.
func (b *Backend) startLocked(name string, at int) {
	d := *b.deliver
	d.Records, d.Group = b.log.ForGroup(name), name
	ctx, cancel := context.WithCancel(context.Background())
	c := &consumer{name: name, deliver: &d, cancel: cancel, done: make(chan struct{})}
	c.next.Store(int64(at))
	b.consumers[name] = c
	go b.consume(ctx, c)
}

func (b *Backend) consume(ctx context.Context, c *consumer) {
	defer close(c.done)
	for {
		b.log.mu.Lock()
		next := int(c.next.Load())
		batch := make([]logc.Delivery, 0, max(len(b.log.events)-next, 0))
		for _, e := range b.log.events[min(next, len(b.log.events)):] {
			batch = append(batch, logc.Delivery{ID: e.ID, CreatedAt: e.CreatedAt})
		}
		wake := b.log.wakeLocked()
		b.log.mu.Unlock()
		if len(batch) > 0 {
			if err := c.deliver.Deliver(ctx, batch); err != nil {
				if ctx.Err() != nil {
					return
				}
				continue // held past the Deliverer's timeout: retry the batch
			}
			c.next.Add(int64(len(batch)))
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

// end stops every consumer; with confirm, their positions are confirmed
// (a group deleted meanwhile is left alone).
func (b *Backend) end(confirm bool) {
	b.mu.Lock()
	b.stopped = true
	cs := b.consumers
	b.consumers = map[string]*consumer{}
	b.mu.Unlock()
	for _, c := range cs {
		c.cancel()
		<-c.done
	}
	if !confirm {
		return
	}
	b.log.mu.Lock()
	defer b.log.mu.Unlock()
	for name, c := range cs {
		next := int(c.next.Load())
		if name == "" {
			b.log.confirmed = max(b.log.confirmed, next)
		} else if g, ok := b.log.groups[name]; ok {
			g.confirmed = max(g.confirmed, next)
		}
	}
}

// Stop ends the consumers and confirms their positions, as a graceful
// shutdown does.
func (b *Backend) Stop() { b.endOnce.Do(func() { b.end(true) }) }

// Crash ends the consumers without confirming their positions; a Stop
// after it does nothing.
func (b *Backend) Crash() { b.endOnce.Do(func() { b.end(false) }) }

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

// maxGroups is the Log's bound on groups.
func (l *Log) maxGroups() int {
	if l.MaxGroups > 0 {
		return l.MaxGroups
	}
	return logc.DefaultMaxGroups
}

// PutGroup creates a group (from earliest: at the log's start; from
// latest: at its end) and starts its consumer in this instance.
func (b *Backend) PutGroup(_ context.Context, name, from string) (bool, error) {
	if name == logc.DefaultGroup {
		if from != logc.FromEarliest {
			return false, logc.ErrGroupConflict
		}
		return false, nil
	}
	b.log.mu.Lock()
	if g, ok := b.log.groups[name]; ok {
		b.log.mu.Unlock()
		if g.from != from {
			return false, logc.ErrGroupConflict
		}
		return false, nil
	}
	if 1+len(b.log.groups) >= b.log.maxGroups() {
		b.log.mu.Unlock()
		return false, logc.TooManyGroups(name, b.log.maxGroups())
	}
	g := &group{from: from, deliveries: map[string]delivery{}}
	if from == logc.FromLatest {
		g.confirmed = len(b.log.events)
	}
	if b.log.groups == nil {
		b.log.groups = map[string]*group{}
	}
	b.log.groups[name] = g
	at := g.confirmed
	b.log.mu.Unlock()
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.stopped {
		b.startLocked(name, at)
	}
	return true, nil
}

// DeleteGroup removes a group: its deliveries and position go with it,
// and this instance's consumer of it stops.
func (b *Backend) DeleteGroup(_ context.Context, name string) error {
	b.log.mu.Lock()
	_, ok := b.log.groups[name]
	delete(b.log.groups, name)
	b.log.mu.Unlock()
	if !ok {
		return logc.UnknownGroup(name)
	}
	b.mu.Lock()
	c := b.consumers[name]
	delete(b.consumers, name)
	b.mu.Unlock()
	if c != nil {
		c.cancel()
		<-c.done
	}
	return nil
}

// memoryNoBytes is why the memory Log's lag has no bytes.
const memoryNoBytes = "the memory log counts events, not bytes"

// Groups lists the default group and the others with their positions: a
// running consumer's progress, else the confirmed position.
func (b *Backend) Groups(context.Context) (logc.GroupList, error) {
	b.mu.Lock()
	running := map[string]int{}
	for name, c := range b.consumers {
		running[name] = int(c.next.Load())
	}
	b.mu.Unlock()
	b.log.mu.Lock()
	defer b.log.mu.Unlock()
	at := func(name string, confirmed int) logc.Group {
		g := logc.Group{Name: name, Ready: true, Unknown: map[string]string{"lag_bytes": memoryNoBytes}}
		pos, ok := running[name]
		g.Running = ok
		if !ok {
			pos = confirmed
		}
		lag := int64(len(b.log.events) - pos)
		g.Position, g.LagEvents = strconv.Itoa(pos), &lag
		return g
	}
	def := at("", b.log.confirmed)
	def.Name, def.From = logc.DefaultGroup, logc.FromEarliest
	out := []logc.Group{def}
	for name, g := range b.log.groups {
		s := at(name, g.confirmed)
		s.From = g.from
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b logc.Group) int { return strings.Compare(a.Name, b.Name) })
	return logc.GroupList{Groups: out, MaxGroups: b.log.maxGroups()}, nil
}
