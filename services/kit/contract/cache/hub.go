package cache

import (
	"crypto/rand"
	"encoding/hex"
	"sync"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/stats"
)

// Why a subscription ended: the "reason" of its final SSE event "end".
const (
	// EndSlow: the subscriber did not read fast enough and its queue
	// passed SUBSCRIBER_BUFFER_BYTES; it missed what came after.
	EndSlow = "slow"
	// EndLost: the bus's connection was lost; messages published until
	// it is back are missed by everyone. Subscribe again.
	EndLost = "lost"
	// EndShutdown: the service is stopping.
	EndShutdown = "shutdown"
)

// hub is one instance's pub/sub fan-out, the Sink of its PubSub: the
// subscribers of each channel, each with a bounded queue, and the
// subscriptions waiting for their marker.
//
// A subscription starts at a point of the bus's own order: the handler
// publishes a marker of its own on SyncChannel, and the subscriber is
// added to its channel when the marker comes back through the bus. A
// message the bus ordered before the marker (published, and answered
// 202, before the subscription began) is never delivered to it; one
// published after the subscriber saw its "subscribed" event always is
// (unless it is dropped or the bus is lost, both of which end the
// stream). The markers cost one publish per subscription.
//
// Every method is safe for concurrent use; Message and Lost never block
// (each subscriber's queue is bounded in bytes, and a subscriber past
// its bound is dropped, not waited for).
type hub struct {
	cfg   RolesConfig
	stats *stats.Recorder

	mu      sync.Mutex
	topics  map[string]map[*subscriber]struct{}
	pending map[string]*subscriber // marker → subscriber waiting for it
	count   int                    // subscribers admitted (pending or active)
}

func newHub(cfg RolesConfig, st *stats.Recorder) *hub {
	return &hub{cfg: cfg.withDefaults(), stats: st, topics: map[string]map[*subscriber]struct{}{}, pending: map[string]*subscriber{}}
}

var _ Sink = (*hub)(nil)

// subscriber is one SSE subscription's queue and state. The hub pushes
// under its lock; the handler's goroutine takes what was pushed.
type subscriber struct {
	channel string
	marker  string
	limit   int64

	mu     sync.Mutex
	queue  [][]byte
	bytes  int64
	active bool   // its marker came back: it is in its channel
	reason string // why it ended ("" while live)
	wake   chan struct{}
}

// join admits a subscriber of channel, waiting for its marker, or
// reports false when SUBSCRIBERS_MAX subscribers are admitted already.
func (h *hub) join(channel string) (*subscriber, bool) {
	var b [16]byte
	_, _ = rand.Read(b[:])
	s := &subscriber{channel: channel, marker: hex.EncodeToString(b[:]), limit: h.cfg.SubscriberBuffer, wake: make(chan struct{}, 1)}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.count >= h.cfg.SubscribersMax {
		return nil, false
	}
	h.count++
	h.pending[s.marker] = s
	return s, true
}

// leave removes s, wherever it is.
func (h *hub) leave(s *subscriber) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.pending, s.marker)
	if subs := h.topics[s.channel]; subs != nil {
		delete(subs, s)
		if len(subs) == 0 {
			delete(h.topics, s.channel)
		}
	}
	h.count--
}

// Message implements Sink: a marker activates its subscriber; a message
// is queued for every subscriber of its channel, and a subscriber whose
// queue would pass its bound is dropped from the channel instead.
func (h *hub) Message(channel string, msg []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if channel == SyncChannel {
		s := h.pending[string(msg)]
		if s == nil {
			return // another instance's marker, or one whose subscriber left
		}
		delete(h.pending, s.marker)
		subs := h.topics[s.channel]
		if subs == nil {
			subs = map[*subscriber]struct{}{}
			h.topics[s.channel] = subs
		}
		subs[s] = struct{}{}
		s.activate()
		return
	}
	subs := h.topics[channel]
	for s := range subs {
		if !s.push(msg) {
			delete(subs, s)
			h.stats.Inc(CounterSubscribersDropped)
		}
	}
	if subs != nil && len(subs) == 0 {
		delete(h.topics, channel)
	}
}

// Lost implements Sink: every subscription, active or waiting, ends.
func (h *hub) Lost(error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, subs := range h.topics {
		for s := range subs {
			s.end(EndLost)
			h.stats.Inc(CounterSubscribersLost)
		}
	}
	for _, s := range h.pending {
		s.end(EndLost)
	}
	h.topics = map[string]map[*subscriber]struct{}{}
	h.pending = map[string]*subscriber{}
}

// poke wakes the subscriber's goroutine (never blocks).
func (s *subscriber) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// push queues msg and reports true, or ends the subscriber (EndSlow) and
// reports false when the queue would pass its bound.
func (s *subscriber) push(msg []byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reason != "" {
		return false
	}
	n := int64(len(msg) + MessageOverhead)
	if s.bytes+n > s.limit {
		s.reason = EndSlow
		s.poke()
		return false
	}
	s.queue = append(s.queue, msg)
	s.bytes += n
	s.poke()
	return true
}

func (s *subscriber) activate() {
	s.mu.Lock()
	s.active = true
	s.mu.Unlock()
	s.poke()
}

// end records why s ends, unless it ended already.
func (s *subscriber) end(reason string) {
	s.mu.Lock()
	if s.reason == "" {
		s.reason = reason
	}
	s.mu.Unlock()
	s.poke()
}

// take returns what was queued (and empties the queue), whether s is
// active, and why it ended ("" while live).
func (s *subscriber) take() ([][]byte, bool, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queue
	s.queue, s.bytes = nil, 0
	return q, s.active, s.reason
}
