package main

import (
	"sync"

	amqp "github.com/rabbitmq/amqp091-go"
)

// acker settles the deliveries of one consumer channel, acknowledging them
// with multiple=true: once every delivery up to a tag is settled, one
// basic.ack frame acknowledges them all (RabbitMQ, "Consumer
// Acknowledgements and Publisher Confirms": acknowledging multiple
// deliveries at once reduces network traffic). Rejections (nack) go out one
// by one at once. A delivery settled for acknowledgement behind one still
// in work waits for it, unless more than limit wait: then they are
// acknowledged one by one, so that a slow task cannot hold the prefetch
// window shut.
//
// Concurrency: safe for concurrent use. track must be called in the order
// the channel delivered the tags (forward does, from one goroutine), and
// before the tag is settled. Errors of the channel (closed: the broker
// redelivers what was not acknowledged) are ignored.
type acker struct {
	ch    amqp.Acknowledger
	limit int

	mu      sync.Mutex
	order   []uint64        // tracked tags, ascending; a prefix is dropped as it is acknowledged
	state   map[uint64]bool // false: in work; true: to acknowledge; absent: sent
	waiting int             // tags set true but not yet sent
}

// newAcker returns an acker for ch that lets at most limit settled
// deliveries wait behind one in work.
func newAcker(ch amqp.Acknowledger, limit int) *acker {
	return &acker{ch: ch, limit: max(limit, 1), state: map[uint64]bool{}}
}

// track registers a received delivery, in delivery order.
func (a *acker) track(tag uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.order = append(a.order, tag)
	a.state[tag] = false
}

// ack settles tags for acknowledgement and sends what can go: one
// multiple ack for the settled prefix.
func (a *acker) ack(tags ...uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, t := range tags {
		if done, ok := a.state[t]; ok && !done {
			a.state[t] = true
			a.waiting++
		}
	}
	a.advance()
	if a.waiting > a.limit {
		a.sendWaiting()
	}
}

// nack rejects tags one by one (requeue: back to the queue; otherwise to
// the queue's dead-letter exchange), then sends what that unblocks.
func (a *acker) nack(requeue bool, tags ...uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, t := range tags {
		if done, ok := a.state[t]; ok {
			if done {
				a.waiting--
			}
			delete(a.state, t)
			_ = a.ch.Nack(t, false, requeue)
		}
	}
	a.advance()
}

// flush sends every settled acknowledgement, also those behind a delivery
// still in work (a graceful stop: those are left to the broker).
func (a *acker) flush() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.advance()
	a.sendWaiting()
}

// advance drops the settled prefix of order and acknowledges it with one
// frame: multiple=true up to its last tag still unacknowledged at the
// broker (never to a tag already sent, which the broker would refuse as
// unknown, closing the channel). a.mu is held.
func (a *acker) advance() {
	var last uint64
	n := 0
	for _, t := range a.order {
		done, ok := a.state[t]
		if ok && !done {
			break
		}
		if ok {
			last = t
			delete(a.state, t)
			a.waiting--
		}
		n++
	}
	a.order = a.order[n:]
	if last != 0 {
		_ = a.ch.Ack(last, true)
	}
}

// sendWaiting acknowledges every settled tag one by one. a.mu is held.
func (a *acker) sendWaiting() {
	for _, t := range a.order {
		if a.state[t] {
			delete(a.state, t)
			a.waiting--
			_ = a.ch.Ack(t, false)
		}
	}
}
