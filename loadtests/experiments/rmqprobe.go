package experiments

import (
	"context"
	"fmt"
	"strconv"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// rmqProbe measures phantom deliveries on a quorum queue of its own,
// beside the service's and led by the same node: messages published with
// confirms, delivered to a consumer that holds them unacknowledged across
// the fault, then given back (the consumer's connection closed) and
// consumed again. A message the consumer was given and the cluster does
// not give again is a phantom: delivered, never acknowledged, and absent
// afterwards. The service's own records cannot show one, because the
// service finishes every delivery it holds when its channel dies.
type rmqProbe struct {
	c     *rmqCluster
	queue string
	// held counts the messages delivered to the holding consumer before
	// the fault; holder is its connection, to node holderNode.
	held       int
	holder     *amqp.Connection
	holderNode int
}

// startProbe declares the probe's quorum queue through node leader (a
// queue is led by the node it is declared on, queue_leader_locator
// client-local, RabbitMQ's default), publishes n messages there with
// publisher confirms, and has a consumer on another node take all n
// without acknowledging them.
func startProbe(ctx context.Context, c *rmqCluster, queue string, leader, n int) (*rmqProbe, error) {
	p := &rmqProbe{c: c, queue: queue, holderNode: (leader + 1) % len(c.urls)}
	pub, err := c.dial(leader)
	if err != nil {
		return nil, fmt.Errorf("probe: %w", err)
	}
	defer pub.Close()
	ch, err := pub.Channel()
	if err != nil {
		return nil, err
	}
	if _, err := ch.QueueDeclare(queue, true, false, false, false, amqp.Table{"x-queue-type": "quorum"}); err != nil {
		return nil, fmt.Errorf("probe: declare %s: %w", queue, err)
	}
	if err := ch.Confirm(false); err != nil {
		return nil, err
	}
	for k := range n {
		conf, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", queue, false, false,
			amqp.Publishing{DeliveryMode: amqp.Persistent, MessageId: strconv.Itoa(k), Body: []byte("probe")})
		if err != nil {
			return nil, fmt.Errorf("probe: publish: %w", err)
		}
		if ok, err := conf.WaitContext(ctx); err != nil || !ok {
			return nil, fmt.Errorf("probe: message %d not confirmed (%v)", k, err)
		}
	}
	if err := p.hold(ctx, n); err != nil {
		p.close()
		return nil, err
	}
	return p, nil
}

// hold has a consumer on p.holderNode take n messages without
// acknowledging them (prefetch n), and keeps its connection open.
func (p *rmqProbe) hold(ctx context.Context, n int) error {
	conn, err := p.c.dial(p.holderNode)
	if err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	p.holder = conn
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	if err := ch.Qos(n, 0, false); err != nil {
		return err
	}
	dl, err := ch.ConsumeWithContext(ctx, p.queue, "", false, false, false, false, nil)
	if err != nil {
		return fmt.Errorf("probe: consume: %w", err)
	}
	timeout := time.After(30 * time.Second)
	for p.held < n {
		select {
		case <-dl:
			p.held++
		case <-timeout:
			return fmt.Errorf("probe: %d of %d messages delivered within 30 s", p.held, n)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// giveBack closes the holding consumer's connection (its messages go
// back to the queue, to be delivered again), then consumes the queue
// from node i, acknowledging, until every held message came back or
// nothing more came for 10 s; it returns how many distinct messages came
// back.
func (p *rmqProbe) giveBack(ctx context.Context, i int) (int, error) {
	if p.holder != nil {
		_ = p.holder.Close()
		p.holder = nil
	}
	conn, err := p.c.dial(i)
	if err != nil {
		return 0, fmt.Errorf("probe: %w", err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return 0, err
	}
	dl, err := ch.ConsumeWithContext(ctx, p.queue, "", true, false, false, false, nil)
	if err != nil {
		return 0, fmt.Errorf("probe: consume again: %w", err)
	}
	seen := map[string]bool{}
	for len(seen) < p.held {
		select {
		case d, ok := <-dl:
			if !ok {
				return len(seen), fmt.Errorf("probe: the consumer's channel closed with %d of %d back", len(seen), p.held)
			}
			seen[d.MessageId] = true
		case <-time.After(10 * time.Second):
			return len(seen), nil
		case <-ctx.Done():
			return len(seen), ctx.Err()
		}
	}
	return len(seen), nil
}

// close closes the holding connection if it is still open.
func (p *rmqProbe) close() {
	if p.holder != nil {
		_ = p.holder.Close()
	}
}
