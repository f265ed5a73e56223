package raw

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// AMQP loop settings: the prefetch (the 100–300 range RabbitMQ's
// consumer prefetch guide names for throughput; rabbitmq's
// DefaultPrefetch is in it), the confirms kept in flight per publishing
// channel, the publishing channels, and the acknowledgement batch
// (basic.ack with multiple).
//
// The confirms in flight decide the publish rate: RabbitMQ confirms a
// persistent message once it is fsynced, and one fsync covers every
// message written meanwhile, so the rate grows with the messages awaiting
// a confirm. The rabbitmq service at the throughput scenario's largest
// point has its 4 senders' 1,000-task batches unconfirmed at once (4,000
// messages, published before the first confirm is awaited); the raw loop
// keeps as many: 4 channels × 1,000. With 2 × 512 it confirmed 7,346/s
// where 4 × 1,000 confirmed 15,257/s in the same by-hand session (3 s
// loops on this 2-core machine, other work running), and the service
// showed 127% of the old figure.
const (
	amqpPrefetch   = 300
	amqpWindow     = 1000
	amqpPublishers = 4
	amqpAckEvery   = 64
)

// publishDesc and consumeDesc say what amqpPair's loops count, and how.
func publishDesc(f figures, _ bool) string {
	return fmt.Sprintf("messages/s confirmed: persistent, durable classic queue, %d channels with %d confirms in flight each", f.AMQPPublishers, f.AMQPWindow)
}

func consumeDesc(f figures, _ bool) string {
	return fmt.Sprintf("messages/s: prefetch %d, ack with multiple every %d", f.AMQPPrefetch, f.AMQPAckEvery)
}

// amqpPair publishes persistent messages to a scratch durable classic
// queue for o.Duration, amqpPublishers channels in confirm mode each
// keeping amqpWindow confirms in flight, then consumes them with a
// prefetch and multiple acks until the queue is empty (or 2×o.Duration).
// The queue is deleted at the end.
func amqpPair(ctx context.Context, o Options) ([]Result, error) {
	var pub, con Result
	conn, err := amqp.DialConfig(o.RabbitMQURL, amqp.Config{Dial: amqp.DefaultDial(5 * time.Second), Heartbeat: 10 * time.Second})
	if err != nil {
		return []Result{pub, con}, err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	queue := "wpe-raw-" + o.Name
	ch, err := conn.Channel()
	if err != nil {
		return []Result{pub, con}, err
	}
	// Classic queues v2, as the rabbitmq service declares them
	// (RABBITMQ_QUEUE_VERSION's default).
	if _, err := ch.QueueDeclare(queue, true, false, false, false, amqp.Table{"x-queue-version": 2}); err != nil {
		return []Result{pub, con}, err
	}
	defer func() {
		if c, err := conn.Channel(); err == nil {
			_, _ = c.QueueDelete(queue, false, false, false)
			_ = c.Close()
		}
	}()

	confirmed, elapsed, err := amqpPublish(ctx, conn, queue, o)
	finish(&pub, confirmed, elapsed)
	if err != nil {
		return []Result{pub, con}, err
	}
	err = amqpConsume(ctx, amqpQueue{conn: conn, name: queue}, confirmed, o, &con)
	return []Result{pub, con}, err
}

// amqpPublish publishes to queue for o.Duration from amqpPublishers
// channels in confirm mode, amqpWindow confirms in flight on each, and
// returns the messages confirmed, the time taken and the first error.
func amqpPublish(ctx context.Context, conn *amqp.Connection, queue string, o Options) (int64, time.Duration, error) {
	pctx, cancel := context.WithTimeout(ctx, o.Duration)
	defer cancel()
	var confirmed atomic.Int64
	// perr is the first publisher's failure: the one that names the
	// cause (the others usually follow from it, a closed connection).
	var mu sync.Mutex
	var perr error
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if perr == nil {
			perr = err
		}
	}
	start := time.Now()
	var wg sync.WaitGroup
	for range amqpPublishers {
		wg.Go(func() {
			c, err := conn.Channel()
			if err == nil {
				err = c.Confirm(false)
			}
			if err != nil {
				fail(err)
				return
			}
			defer c.Close()
			inflight := make([]*amqp.DeferredConfirmation, 0, amqpWindow)
			wait := func(dc *amqp.DeferredConfirmation) {
				if ok, _ := dc.WaitContext(ctx); ok {
					confirmed.Add(1)
				}
			}
			for pctx.Err() == nil {
				dc, err := c.PublishWithDeferredConfirmWithContext(ctx, "", queue, false, false, amqp.Publishing{
					DeliveryMode: amqp.Persistent, ContentType: "application/json", Body: payload})
				if err != nil {
					fail(err)
					return
				}
				inflight = append(inflight, dc)
				if len(inflight) >= amqpWindow {
					wait(inflight[0])
					inflight = inflight[1:]
				}
			}
			for _, dc := range inflight {
				wait(dc)
			}
		})
	}
	wg.Wait()
	return confirmed.Load(), time.Since(start), perr
}

// amqpQueue is a queue and the connection its channels are opened on.
type amqpQueue struct {
	conn *amqp.Connection
	name string
}

// amqpConsume consumes the total messages published to q (prefetch
// amqpPrefetch, acked with multiple every amqpAckEvery), waiting at most
// twice o.Duration, and records the rate in con.
func amqpConsume(ctx context.Context, q amqpQueue, total int64, o Options, con *Result) error {
	conn, queue := q.conn, q.name
	cc, err := conn.Channel()
	if err != nil {
		return err
	}
	defer cc.Close()
	if err := cc.Qos(amqpPrefetch, 0, false); err != nil {
		return err
	}
	deliveries, err := cc.ConsumeWithContext(ctx, queue, "", false, false, false, false, nil)
	if err != nil {
		return err
	}
	start := time.Now()
	deadline := time.After(2 * o.Duration)
	var got int64
	var last uint64
	for got < total {
		select {
		case d, ok := <-deliveries:
			if !ok {
				finish(con, got, time.Since(start))
				return fmt.Errorf("deliveries closed after %d of %d", got, total)
			}
			got++
			last = d.DeliveryTag
			if got%amqpAckEvery == 0 {
				if err := cc.Ack(last, true); err != nil {
					return err
				}
			}
		case <-deadline:
			total = got
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if last != 0 {
		_ = cc.Ack(last, true)
	}
	finish(con, got, time.Since(start))
	return nil
}
