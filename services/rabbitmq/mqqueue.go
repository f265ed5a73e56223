package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/backoff"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue/records"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/postgres"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/stats"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/waiter"
)

// message is the body of a task's AMQP message: the task's record lives in
// Postgres, the message only points at it. A task of a kind with
// subscribers (FANOUT) is one message for all its copies, published to
// the kind's fanout exchange: ID is its first copy's and Copies maps each
// subscriber to its copy's id; the consumer of a subscriber's queue takes
// its own (deliver) and handles it as an ordinary task from then on.
//
// With PUBLISH_MODE=broker-only there is no record before the consumer
// takes the task, so the message carries the task itself (Kind, Payload,
// FailTimes; for a fanned-out task the posted kind, from which each
// subscriber's copy takes its own): the consumer records it from them.
// A message with a Kind carries its task, whatever the mode that reads
// it.
type message struct {
	ID         string            `json:"id"`
	EnqueuedAt time.Time         `json:"enqueued_at"`
	Copies     map[string]string `json:"copies,omitempty"`
	Kind       string            `json:"kind,omitempty"`
	Payload    json.RawMessage   `json:"payload,omitempty"`
	FailTimes  int               `json:"fail_times,omitempty"`
}

// session is one live publishing connection with its publishing channel
// (confirm mode) and, with workers, a consuming connection of its own with
// the acker of its consuming channel. The two are lost and replaced
// together.
//
// Publishers and consumers do not share a connection, as RabbitMQ
// advises: its flow control and resource alarms stop reading a publishing
// connection's socket, and a consumer's acks sent on that connection
// would wait behind the publishes while the broker, seeing PREFETCH
// deliveries unacknowledged, delivers nothing more (docs/queue.md,
// "Tuning").
type session struct {
	// node is the index in RABBITMQ_URL of the node both connections
	// are to.
	node      int
	conn      *amqp.Connection
	pub       *amqp.Channel
	consConn  *amqp.Connection // nil without workers
	consumers []consumer       // none without workers
	// dropped is closed (once, by drop) when a publish on the session
	// was not confirmed: maintain then replaces the session, and
	// publishes wait for the next one.
	dropped  chan struct{}
	dropOnce sync.Once
}

// drop gives the session up: no publish uses it any more, and maintain
// replaces it. Never blocks (a channel or connection close would wait
// for the broker's answer).
func (s *session) drop() { s.dropOnce.Do(func() { close(s.dropped) }) }

// usable reports whether publishes may use the session: its publishing
// channel open and the session not dropped.
func (s *session) usable() bool {
	select {
	case <-s.dropped:
		return false
	default:
		return !s.pub.IsClosed()
	}
}

// consumer is one queue the session consumes, on a channel of its own:
// the work queue, and with FANOUT each subscriber's queue. A channel each,
// because delivery tags (and the acker's order) are per channel, and one
// goroutine per consumer keeps its deliveries in tag order.
type consumer struct {
	queue string
	// subscriber is the subscriber whose copy the queue's messages name
	// (message.Copies); "" for the work queue.
	subscriber string
	dl         <-chan amqp.Delivery
	acks       *acker
}

// ackers returns the session's consumers' ackers.
func (s *session) ackers() []*acker {
	out := make([]*acker, len(s.consumers))
	for i, c := range s.consumers {
		out[i] = c.acks
	}
	return out
}

// close closes the session's connections.
func (s *session) close() {
	_ = s.conn.Close()
	if s.consConn != nil {
		_ = s.consConn.Close()
	}
}

// closed reports whether either connection of the session is closed.
func (s *session) closed() bool {
	return s.conn.IsClosed() || (s.consConn != nil && s.consConn.IsClosed())
}

// outbound is a message to publish: to a queue by name (key, through the
// default exchange), or, for a fanned-out task, to its kind's fanout
// exchange (exchange; key is then empty, and fanoutOf names the kind).
type outbound struct {
	exchange string
	key      string
	fanoutOf string
	msg      message
}

// The long polls share their re-reads through the embedded records.Store.
var _ queue.FinishedReader = (*mqQueue)(nil)

// mqQueue is the RabbitMQ side: the queue.Backend for the handlers (records
// in Postgres, then a confirmed persistent publish) and the in-process
// consumers. amqp091 does not reconnect: maintain does, re-declaring the
// topology and re-consuming after any connection or channel loss. Its
// Backend methods are safe for concurrent use. Start once; Stop or Crash
// once.
type mqQueue struct {
	// admission is the backlog bound (nil: none); finished tasks come
	// off its estimate (set before Start, read by the pipeline).
	admission *queue.Admission
	// Store (the requests' pool) records enqueues, payments and reads;
	// pipe (a reserved pool) records the consumer pipeline's deliveries
	// and outcomes, so that requests holding every connection of the
	// main pool under overload cannot stall the consumers they wait for.
	records.Store
	pipe  records.Store
	pool  *pgxpool.Pool
	cfg   Config
	stats *stats.Recorder
	log   *slog.Logger
	hub   *waiter.Hub

	mu    sync.Mutex
	cur   *session      // nil while disconnected
	ready chan struct{} // closed when cur is set; replaced on loss
	// next is the index in RABBITMQ_URL of the node connect tries
	// first: the one after the last session's node once that session is
	// lost. Only maintain (and Start, before it) reads and writes it.
	next int

	ackers []*acker // the current consumer channels'; kept after a loss until the next session

	// The consumer pipeline (pipeline.go): maintain closes inbound on
	// stop; each stage closes the next channel when its input is done;
	// the completer closes pipelineDone last.
	inbound      chan inbound
	jobs         chan job
	results      chan result
	pipelineDone chan struct{}

	// deliverStatements and finishStatements count the record statements
	// of the pipeline (each writes a whole batch), for tests.
	deliverStatements, finishStatements atomic.Int64

	// relayPool (reserved, RelayConns) serves the outbox relay and the
	// reconciler, whose transactions stay open across a publish;
	// relayPoke wakes a relay worker after an enqueue; background waits
	// for both on stop. relayKills, set by tests, makes that many relay
	// passes die after their confirms and before their commit.
	relayPool  *pgxpool.Pool
	relayPoke  chan struct{}
	background sync.WaitGroup
	relayKills atomic.Int64

	stopCtx, hardCtx       context.Context
	stopCancel, hardCancel context.CancelFunc
	maintainDone           chan struct{}
	workers                sync.WaitGroup
	stopOnce               sync.Once
}

func newMQQueue(pool, pipePool *pgxpool.Pool, cfg Config, st *stats.Recorder, log *slog.Logger) *mqQueue {
	q := &mqQueue{
		Store: records.Store{Pool: pool}, pipe: records.Store{Pool: pipePool}, pool: pool, cfg: cfg, stats: st, log: log,
		hub:          new(waiter.Hub),
		ready:        make(chan struct{}),
		inbound:      make(chan inbound, cfg.RecordBatch),
		jobs:         make(chan job),
		results:      make(chan result, cfg.RecordBatch),
		pipelineDone: make(chan struct{}),
		maintainDone: make(chan struct{}),
		relayPoke:    make(chan struct{}, 1),
	}
	q.stopCtx, q.stopCancel = context.WithCancel(context.Background())
	q.hardCtx, q.hardCancel = context.WithCancel(context.Background())
	return q
}

func (q *mqQueue) deadExchange() string { return q.cfg.Queue + ".dlx" }
func (q *mqQueue) deadQueue() string    { return q.cfg.Queue + ".dead" }

// fanoutExchange is the fanout exchange of a kind with subscribers
// (FANOUT): <queue>.fanout.<kind>.
func fanoutExchange(workQueue, kind string) string { return workQueue + ".fanout." + kind }

// fanoutQueue is the durable queue of one subscriber of a kind, bound to
// the kind's exchange: <queue>.fanout.<kind>@<subscriber>.
func fanoutQueue(workQueue, kind, subscriber string) string {
	return workQueue + ".fanout." + queue.CopyKind(kind, subscriber)
}

// retryQueue is the delay queue for the retry after failed attempt n. Each
// backoff step has its own queue with a queue-wide TTL: per-message TTLs in
// one queue would expire only at its head (a 30 s message would hold back
// a 200 ms one). Expired messages are dead-lettered back to the work queue.
func (q *mqQueue) retryQueue(n int) (string, time.Duration) {
	d := queue.Backoff(q.cfg.Worker.RetryBase, n)
	return q.cfg.Queue + ".retry." + strconv.FormatInt(d.Milliseconds(), 10), d
}

// connectionName is the AMQP connection_name (shown by the management UI;
// the tests find the connection by it).
func (q *mqQueue) connectionName() string { return info.Service + " " + q.cfg.Queue }

// consumerConnectionName is the consuming connection's connection_name.
func (q *mqQueue) consumerConnectionName() string { return q.connectionName() + " consumer" }

// dial opens a connection called name to the node of RABBITMQ_URL at
// index node.
func (q *mqQueue) dial(node int, name string) (*amqp.Connection, error) {
	conn, err := amqp.DialConfig(q.cfg.RabbitMQURLs[node], amqp.Config{
		Dial:       amqp.DefaultDial(q.cfg.DialTimeout),
		Heartbeat:  q.cfg.Heartbeat,
		Properties: amqp.Table{"connection_name": name},
	})
	if err != nil {
		return nil, fmt.Errorf("rabbitmq unreachable (RABBITMQ_URL=%s): %w", service.Redact(q.cfg.RabbitMQURLs[node]), err)
	}
	return conn, nil
}

// queueArgs are the arguments of every queue the service declares: its
// type (QUEUE_TYPE) and, for a classic queue, its version
// (RABBITMQ_QUEUE_VERSION; a quorum queue refuses the argument).
func (q *mqQueue) queueArgs(extra amqp.Table) amqp.Table {
	t := amqp.Table{"x-queue-type": q.cfg.QueueType}
	if q.cfg.QueueType == "classic" {
		t["x-queue-version"] = q.cfg.QueueVersion
	}
	for k, v := range extra {
		t[k] = v
	}
	return t
}

// declareQueue declares the durable queue name with queueArgs and extra.
func (q *mqQueue) declareQueue(ch *amqp.Channel, name string, extra amqp.Table) error {
	if _, err := ch.QueueDeclare(name, true, false, false, false, q.queueArgs(extra)); err != nil {
		return fmt.Errorf("declare queue %s: %w", name, q.explainDeclare(err))
	}
	return nil
}

// explainDeclare says what to do about a queue declare the broker
// refused because the queue exists with other arguments (406
// PRECONDITION_FAILED, "inequivalent arg"): RabbitMQ never changes the
// arguments of a queue, so the service cannot start on it. The error
// names the variable that asked for the other value.
func (q *mqQueue) explainDeclare(err error) error {
	var ae *amqp.Error
	if !errors.As(err, &ae) || ae.Code != amqp.PreconditionFailed || !strings.Contains(ae.Reason, "inequivalent arg") {
		return err
	}
	switch {
	case strings.Contains(ae.Reason, "'x-queue-version'"):
		return fmt.Errorf("the queue exists with another classic queue version than RABBITMQ_QUEUE_VERSION=%d "+
			"(a queue declared before the service set x-queue-version has none, and RabbitMQ 3.10 runs it as version 1), "+
			"and RabbitMQ never changes a queue's arguments: drain the service's queues and delete them "+
			"(docs/queue.md, \"Classic queue version\"), or give RABBITMQ_QUEUE a new name: %w", q.cfg.QueueVersion, err)
	case strings.Contains(ae.Reason, "'x-queue-type'"):
		return fmt.Errorf("the queue exists with another type than QUEUE_TYPE=%s, and RabbitMQ never changes a queue's arguments: "+
			"drain the service's queues and delete them, or give RABBITMQ_QUEUE a new name: %w", q.cfg.QueueType, err)
	}
	return err
}

// declare creates the topology (idempotent): the work queue, whose rejected
// messages go to the dead-letter exchange; the dead-letter exchange and
// queue; per kind with subscribers (FANOUT) a fanout exchange and one
// durable queue per subscriber bound to it, dead-lettering as the work
// queue does; a delay queue per retry step (a copy's retry goes through
// them back to the work queue, as an ordinary task's). Every queue has
// queueArgs. A subscriber removed from FANOUT keeps its queue and what is
// in it; nothing consumes it until the subscriber is back.
func (q *mqQueue) declare(ch *amqp.Channel) error {
	if err := ch.ExchangeDeclare(q.deadExchange(), amqp.ExchangeFanout, true, false, false, false, nil); err != nil {
		return fmt.Errorf("declare exchange %s: %w", q.deadExchange(), err)
	}
	if err := q.declareQueue(ch, q.deadQueue(), nil); err != nil {
		return err
	}
	if err := ch.QueueBind(q.deadQueue(), "", q.deadExchange(), false, nil); err != nil {
		return fmt.Errorf("bind %s: %w", q.deadQueue(), err)
	}
	if err := q.declareQueue(ch, q.cfg.Queue, amqp.Table{"x-dead-letter-exchange": q.deadExchange()}); err != nil {
		return err
	}
	fanout := q.cfg.Worker.Fanout
	for _, kind := range fanout.Kinds() {
		ex := fanoutExchange(q.cfg.Queue, kind)
		if err := ch.ExchangeDeclare(ex, amqp.ExchangeFanout, true, false, false, false, nil); err != nil {
			return fmt.Errorf("declare exchange %s: %w", ex, err)
		}
		for _, sub := range fanout.Subscribers(kind) {
			name := fanoutQueue(q.cfg.Queue, kind, sub)
			if err := q.declareQueue(ch, name, amqp.Table{"x-dead-letter-exchange": q.deadExchange()}); err != nil {
				return err
			}
			if err := ch.QueueBind(name, "", ex, false, nil); err != nil {
				return fmt.Errorf("bind %s: %w", name, err)
			}
		}
	}
	for n := 1; n < q.cfg.Worker.MaxAttempts; n++ {
		name, d := q.retryQueue(n)
		if err := q.declareQueue(ch, name, amqp.Table{
			"x-message-ttl":             d.Milliseconds(),
			"x-dead-letter-exchange":    "",
			"x-dead-letter-routing-key": q.cfg.Queue,
		}); err != nil {
			return err
		}
	}
	return nil
}

// connect makes a session on the first node of RABBITMQ_URL that takes
// one, trying them in turn from q.next (wrapping around), each for at
// most RABBITMQ_DIAL_TIMEOUT to answer: a node that is down or cut off
// costs one failed dial, then the next node is tried. The error names
// every node's failure.
func (q *mqQueue) connect() (*session, error) {
	n := len(q.cfg.RabbitMQURLs)
	var errs []error
	for k := range n {
		node := (q.next + k) % n
		s, err := q.connectTo(node)
		if err == nil {
			return s, nil
		}
		errs = append(errs, err)
		if n > 1 {
			q.log.Warn("rabbitmq node refused a session; trying the next", "node", service.Redact(q.cfg.RabbitMQURLs[node]), "err", err)
		}
	}
	return nil, errors.Join(errs...)
}

// connectTo dials the node at index node, declares, opens the
// confirm-mode publishing channel and, with workers, a consuming
// connection to the same node with a consuming channel per consumed
// queue (the work queue and each subscriber's queue), each with PREFETCH.
func (q *mqQueue) connectTo(node int) (*session, error) {
	conn, err := q.dial(node, q.connectionName())
	if err != nil {
		return nil, err
	}
	var consConn *amqp.Connection
	fail := func(what string, err error) (*session, error) {
		_ = conn.Close()
		if consConn != nil {
			_ = consConn.Close()
		}
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	ch, err := conn.Channel()
	if err != nil {
		return fail("open channel", err)
	}
	if err := q.declare(ch); err != nil {
		return fail("declare topology", err)
	}
	_ = ch.Close()
	pub, err := conn.Channel()
	if err != nil {
		return fail("open publishing channel", err)
	}
	if err := pub.Confirm(false); err != nil {
		return fail("enable publisher confirms", err)
	}
	s := &session{node: node, conn: conn, pub: pub, dropped: make(chan struct{})}
	if q.cfg.Worker.Workers > 0 {
		if consConn, err = q.dial(node, q.consumerConnectionName()); err != nil {
			return fail("open consuming connection", err)
		}
		s.consConn = consConn
		for _, c := range q.consumed() {
			cons, err := consConn.Channel()
			if err != nil {
				return fail("open consuming channel", err)
			}
			if err := cons.Qos(q.cfg.Prefetch, 0, false); err != nil {
				return fail("set prefetch (PREFETCH)", err)
			}
			if c.dl, err = cons.Consume(c.queue, "", false, false, false, false, nil); err != nil {
				return fail("consume "+c.queue, err)
			}
			// Settled deliveries may wait behind a slow one for a
			// multiple ack, but never more than half the window.
			c.acks = newAcker(cons, q.cfg.Prefetch/2)
			s.consumers = append(s.consumers, c)
		}
	}
	return s, nil
}

// consumed lists the queues the workers consume: the work queue, then each
// subscriber's queue of FANOUT.
func (q *mqQueue) consumed() []consumer {
	out := []consumer{{queue: q.cfg.Queue}}
	for _, kind := range q.cfg.Worker.Fanout.Kinds() {
		for _, sub := range q.cfg.Worker.Fanout.Subscribers(kind) {
			out = append(out, consumer{queue: fanoutQueue(q.cfg.Queue, kind, sub), subscriber: sub})
		}
	}
	return out
}

// Start connects once (a broker none of whose nodes is reachable fails
// the start, naming RABBITMQ_URL), then keeps the connection alive and starts the consumer
// pipeline: intake, workers, completer.
func (q *mqQueue) Start(ctx context.Context) error {
	s, err := q.connect()
	if err != nil {
		return err
	}
	q.log.Info("rabbitmq connected", "node", service.Redact(q.cfg.RabbitMQURLs[s.node]))
	go q.intake()
	for range q.cfg.Worker.Workers {
		q.workers.Go(q.work)
	}
	go func() { q.workers.Wait(); close(q.results) }()
	go q.complete()
	go q.maintain(s)
	q.startBackground()
	return nil
}

func (q *mqQueue) connected() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.cur != nil && !q.cur.closed()
}

// node is the index in RABBITMQ_URL of the current session's node, or
// -1 while disconnected.
func (q *mqQueue) node() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.cur == nil {
		return -1
	}
	return q.cur.node
}

// maintain serves one session at a time: it forwards deliveries to the
// pipeline until either connection, a consumer channel or the publishing
// channel is lost, then reconnects with backoff, to the next node of
// RABBITMQ_URL first (connect). On stop it stops
// forwarding and lets the pipeline drain on the still-current session (a
// retry needs it for its publish, every outcome for its ack): the intake
// records what it holds, the workers finish, the completer flushes its
// batch and acknowledges. Then the connection closes: deliveries the
// pipeline did not take go back to the queue.
func (q *mqQueue) maintain(s *session) {
	defer close(q.maintainDone)
	b := backoff.Backoff{Initial: 100 * time.Millisecond, Max: 5 * time.Second}
	drop := func() {
		q.mu.Lock()
		q.cur = nil
		q.ready = make(chan struct{})
		q.mu.Unlock()
	}
	for {
		q.mu.Lock()
		q.cur = s
		if len(s.consumers) > 0 {
			q.ackers = s.ackers()
		}
		close(q.ready)
		q.mu.Unlock()
		lost := s.conn.NotifyClose(make(chan *amqp.Error, 1))
		var consLost chan *amqp.Error // nil without workers: never ready
		if s.consConn != nil {
			consLost = s.consConn.NotifyClose(make(chan *amqp.Error, 1))
		}
		pubLost := s.pub.NotifyClose(make(chan *amqp.Error, 1))
		err := q.forward(s.consumers, lost, consLost, pubLost, s.dropped)
		if q.stopCtx.Err() != nil {
			// Stop: the pipeline finishes what it holds (and acks it, or
			// publishes its retry) first, on this session; only then
			// does it go.
			close(q.inbound)
			q.waitPipeline()
			drop()
			s.close()
			return
		}
		drop()
		s.close()
		// The node may be down or cut off: try the next one first.
		q.next = (s.node + 1) % len(q.cfg.RabbitMQURLs)
		q.log.Warn("rabbitmq connection lost; reconnecting", "node", service.Redact(q.cfg.RabbitMQURLs[s.node]), "err", err)
		for {
			if backoff.Sleep(q.stopCtx, b.Next()) != nil {
				close(q.inbound)
				q.waitPipeline()
				return
			}
			q.stats.Inc(queue.CounterReconnects)
			if s, err = q.connect(); err == nil {
				q.log.Info("rabbitmq reconnected", "node", service.Redact(q.cfg.RabbitMQURLs[s.node]))
				b.Reset()
				break
			}
			q.log.Warn("rabbitmq reconnect failed", "err", err)
		}
	}
}

// forward passes the consumers' deliveries to the workers until stop or
// loss: of the publishing or the consuming connection, of a consumer
// channel, or of the publishing channel alone (a channel-level error
// closes only that channel; nothing would reopen it, and every publish
// would wait for a session that never comes), or the session dropped
// after a publish was not confirmed. Each consumer is read by a
// goroutine of its own, which keeps its channel's tags in order; forward
// returns only once they have all stopped, so that nothing sends on
// inbound after it.
func (q *mqQueue) forward(consumers []consumer, lost, consLost, pubLost chan *amqp.Error, dropped <-chan struct{}) error {
	done := make(chan struct{})
	failed := make(chan error, len(consumers))
	var readers sync.WaitGroup
	for _, c := range consumers {
		readers.Go(func() {
			if err := q.forwardFrom(c, done); err != nil {
				failed <- err
			}
		})
	}
	defer readers.Wait()
	defer close(done) // runs first: the readers stop, then forward waits for them
	select {
	case <-q.stopCtx.Done():
		return nil
	case e := <-lost:
		return fmt.Errorf("publishing connection closed: %v", e)
	case e := <-consLost:
		return fmt.Errorf("consuming connection closed: %v", e)
	case e := <-pubLost:
		return fmt.Errorf("publishing channel closed: %v", e)
	case <-dropped:
		return errors.New("a publish was not confirmed (nacked, or its channel went): a new session")
	case err := <-failed:
		return err
	}
}

// forwardFrom passes c's deliveries to the workers until done or stop; it
// fails when c's channel closes.
func (q *mqQueue) forwardFrom(c consumer, done <-chan struct{}) error {
	for {
		var d amqp.Delivery
		var ok bool
		select {
		case <-q.stopCtx.Done():
			return nil
		case <-done:
			return nil
		case d, ok = <-c.dl:
			if !ok {
				return fmt.Errorf("consumer channel of %s closed", c.queue)
			}
		}
		c.acks.track(d.DeliveryTag) // in delivery order, before anything can settle it
		select {
		case q.inbound <- inbound{acks: c.acks, tag: d.DeliveryTag, body: d.Body, subscriber: c.subscriber, received: time.Now()}:
		case <-q.stopCtx.Done():
			return nil // unacked: the broker requeues it when the connection closes
		case <-done:
			return nil
		}
	}
}

// waitPipeline waits for the pipeline to drain; a crash or the stop
// deadline cancels the hard context, and then it abandons its tasks
// unacknowledged.
func (q *mqQueue) waitPipeline() { <-q.pipelineDone }

// Stop stops gracefully: no more deliveries are taken, the pipeline
// records, works, flushes and acknowledges what it holds, the connection
// closes (the broker requeues the prefetched rest). Safe to call twice:
// the second call returns at once. If ctx ends first the workers abandon
// their tasks as in a crash: unacknowledged, they are redelivered.
func (q *mqQueue) Stop(ctx context.Context) error {
	q.stopOnce.Do(func() {
		q.stopCancel()
		queue.AwaitOrAbort(ctx, q.maintainDone, q.hardCancel)
		q.hardCancel()
		q.background.Wait() // the relay and the reconciler end with stopCtx
	})
	return nil
}

// Crash stops as a crash would: the workers drop their tasks without
// acknowledging them and the connection closes. For tests.
func (q *mqQueue) Crash() {
	q.hardCancel()
	_ = q.Stop(context.Background())
}

// session waits for a live session, up to ctx. Once Stop has begun without
// a live session, none will come (maintain no longer reconnects): it fails
// at once instead of holding a stopping worker until ctx ends.
func (q *mqQueue) session(ctx context.Context) (*session, error) {
	for {
		q.mu.Lock()
		s, ready := q.cur, q.ready
		q.mu.Unlock()
		if s != nil && s.usable() {
			return s, nil
		}
		if s != nil {
			// The current session's channel is dead (or the session
			// dropped) but maintain has not replaced it yet (ready is
			// still the closed one): wait on the timer, not on ready, so
			// as not to spin.
			ready = nil
		}
		select {
		case <-ready:
		case <-q.stopCtx.Done():
			return nil, fmt.Errorf("rabbitmq connection down and the service is stopping: %w", httpapi.ErrUnavailable)
		case <-ctx.Done():
			return nil, fmt.Errorf("rabbitmq connection down: %w", httpapi.ErrUnavailable)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// deliveryMode is the AMQP delivery mode of what an enqueue publishes
// (DELIVERY_MODE): persistent, or transient.
func (q *mqQueue) deliveryMode() uint8 {
	if q.cfg.DeliveryMode == DeliveryTransient {
		return amqp.Transient
	}
	return amqp.Persistent
}

// publish sends messages with the delivery mode mode (amqp.Persistent or
// amqp.Transient) and returns once the broker has confirmed every one.
// Messages that are nacked or whose channel dies before the confirm are
// published again on the next session (a nack drops the session, so that
// maintain makes a new one): a confirmed persistent message is on disk
// (durable queue), a confirmed transient one in the queue's memory (a
// broker restart loses it; its record stays, and the reconciler
// publishes it again), an unconfirmed one may be duplicated, never lost
// silently.
//
// The confirms are pipelined: every message of the batch is published
// before the first confirm is awaited (RabbitMQ, "Publishers": publish in
// batches and handle confirms asynchronously rather than one at a time).
func (q *mqQueue) publish(ctx context.Context, msgs []outbound, mode uint8) error {
	pending := msgs
	for len(pending) > 0 {
		s, err := q.session(ctx)
		if err != nil {
			return err
		}
		confirms := make([]*amqp.DeferredConfirmation, 0, len(pending))
		var failed []outbound
		for i, m := range pending {
			body, _ := json.Marshal(m.msg)
			c, err := s.pub.PublishWithDeferredConfirmWithContext(ctx, m.exchange, m.key, false, false, amqp.Publishing{
				DeliveryMode: mode, ContentType: "application/json", MessageId: m.msg.ID, Body: body,
			})
			if err != nil {
				failed = append(failed, pending[i:]...)
				break
			}
			confirms = append(confirms, c)
		}
		for i, c := range confirms {
			ok, err := c.WaitContext(ctx)
			if err != nil {
				return fmt.Errorf("publish not confirmed in time: %w (%w)", httpapi.ErrUnavailable, err)
			}
			if !ok {
				failed = append(failed, pending[i])
			}
		}
		if len(failed) > 0 {
			// Nacked, or the channel went before the confirm: publish
			// again on a new session, never on this one. Seen on the
			// cluster profile: after its node was killed, the session
			// the service opened on another node had every publish to
			// the quorum queue nacked at once, for minutes, while its
			// connection stayed up; publishing again on it was a busy
			// loop (22,842 nacks in 50 s) and nothing got through.
			// Dropping the session makes maintain replace it, starting
			// from the next node of RABBITMQ_URL.
			q.log.Warn("messages not confirmed; publishing again on a new session", "messages", len(failed))
			s.drop()
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("publish: %w (%w)", httpapi.ErrUnavailable, err)
			}
		}
		pending = failed
	}
	return nil
}

// messages are the tasks' messages: one to the work queue per ordinary
// task, and one to its kind's fanout exchange per fanned-out task, for all
// its copies (adjacent in tasks, as queue.Fanout.Expand makes them). With
// PUBLISH_MODE=broker-only each carries its task.
func (q *mqQueue) messages(tasks []queue.NewTask) []outbound {
	carry := q.cfg.PublishMode == PublishBrokerOnly
	m := make([]outbound, 0, len(tasks))
	for i := 0; i < len(tasks); {
		t := tasks[i]
		if t.Copy == nil {
			msg := message{ID: t.ID, EnqueuedAt: t.EnqueuedAt}
			if carry {
				msg.Kind, msg.Payload, msg.FailTimes = t.Kind, t.Payload, t.FailTimes
			}
			m = append(m, outbound{key: q.cfg.Queue, msg: msg})
			i++
			continue
		}
		msg := message{ID: t.ID, EnqueuedAt: t.EnqueuedAt, Copies: map[string]string{}}
		if carry {
			msg.Kind, msg.Payload, msg.FailTimes = t.Copy.Of, t.Payload, t.FailTimes
		}
		for ; i < len(tasks) && tasks[i].Copy != nil && tasks[i].Copy.First == t.Copy.First; i++ {
			msg.Copies[tasks[i].Copy.Subscriber] = tasks[i].ID
		}
		m = append(m, outbound{exchange: fanoutExchange(q.cfg.Queue, t.Copy.Of), fanoutOf: t.Copy.Of, msg: msg})
	}
	return m
}

// brokerWait is how long a write waits for a live broker session before
// it records anything: long enough for a reconnect after a blip (the
// backoff starts at 100 ms), short enough that an outage is answered 503
// at once rather than after BACKEND_TIMEOUT.
const brokerWait = time.Second

// awaitBroker refuses a write, before anything is recorded, when no
// broker session comes within brokerWait. A record committed while the
// broker is known to be down would stay queued with no message: during a
// 16 s broker outage, 1,271 requests answered 503 had committed their
// records anyway, and those tasks were never delivered. The dual write's
// remaining window (the broker lost between this check and the publish)
// still leaves such records; docs/queue.md says so.
func (q *mqQueue) awaitBroker(ctx context.Context) error {
	wctx, cancel := context.WithTimeout(ctx, brokerWait)
	defer cancel()
	if _, err := q.session(wctx); err != nil {
		if errors.Is(err, context.Canceled) {
			return err
		}
		return fmt.Errorf("%v: %w", err, httpapi.ErrNotRecorded)
	}
	return nil
}

// publishRecorded publishes the messages of tasks whose records are
// already committed (the dual write's second step). A failure is a 503
// of kind "unknown" that names the ids: the records stay queued, and the
// reconciler publishes them after RECONCILE_AFTER, so the tasks will
// most likely run although the answer was an error (the broker-restart
// experiment saw such a task run 62 s later), and a retry (which gets
// new ids) may run them twice. A client that must not run a task twice
// reads GET /tasks/{id} for the ids before it retries.
func (q *mqQueue) publishRecorded(ctx context.Context, tasks []queue.NewTask) error {
	err := q.publish(ctx, q.messages(tasks), q.deliveryMode())
	return unconfirmed(tasks, true, err, "the %d task(s) are recorded but their publish to RabbitMQ was not confirmed; "+
		"the reconciler publishes them again after RECONCILE_AFTER, so they will probably run: "+
		"a retry may run them twice (read GET /tasks/{id} for the ids first)")
}

// unconfirmed is what a publish of tasks that ended in err answers: nil
// or err itself when it succeeded or its caller went away, else a 503
// of kind "unknown" naming the ids (the broker may hold some of them)
// and whether they are recorded, with msg (its %d: how many tasks).
func unconfirmed(tasks []queue.NewTask, recorded bool, err error, msg string) error {
	if err == nil || errors.Is(err, context.Canceled) {
		return err
	}
	ids := make([]string, len(tasks))
	for i, t := range tasks {
		ids[i] = t.ID
	}
	return &httpapi.Error{
		Status:  http.StatusServiceUnavailable,
		Kind:    httpapi.KindUnknown,
		Message: fmt.Sprintf(msg, len(ids)),
		Fields:  map[string]any{"ids": ids, "recorded": recorded},
		Cause:   err,
	}
}

// Enqueue implements queue.Backend. In broker-only mode the tasks are
// published and nothing is recorded (enqueueBrokerOnly). In outbox mode
// the records and their outbox rows commit in one statement and the relay
// publishes them.
// Otherwise it is the dual write: with a live broker session
// (awaitBroker), the records commit, then the messages are published; if
// the publish fails the records stay queued with no message (the client
// gets a 503 of kind "unknown" naming the ids; the reconciler publishes
// them again after RECONCILE_AFTER, so a retry may run them twice). A
// write refused by awaitBroker is a 503 of kind "not_recorded".
func (q *mqQueue) Enqueue(ctx context.Context, tasks []queue.NewTask) error {
	if q.cfg.PublishMode == PublishBrokerOnly {
		return q.enqueueBrokerOnly(ctx, tasks)
	}
	if q.cfg.PublishMode == PublishOutbox {
		if err := q.enqueueToOutbox(ctx, q.pool, tasks); err != nil {
			return postgres.MapError("record tasks and outbox rows", err)
		}
		q.pokeRelay()
		return nil
	}
	if err := q.awaitBroker(ctx); err != nil {
		return err
	}
	if err := records.InsertTasks(ctx, q.pool, tasks); err != nil {
		return postgres.MapError("record tasks", err)
	}
	return q.publishRecorded(ctx, tasks)
}

// Pay implements queue.Backend: insert the payment (and its task's record),
// commit, then publish (also in broker-only mode: the payment row needs
// Postgres anyway, and its task's record commits with it). The fault returns between the commit and the
// publish, as a crash there would: the payment is orphaned. In outbox
// mode the payment, its task's record and its outbox row commit in one
// transaction, and the fault rolls all three back (as on no-rabbitmq).
func (q *mqQueue) Pay(ctx context.Context, p queue.NewPayment, fault bool) error {
	if q.cfg.PublishMode == PublishOutbox {
		err := q.RecordPayment(ctx, p, func(tx pgx.Tx) error {
			if fault {
				return queue.ErrFaultInjected
			}
			return postgres.MapError("record payment task and outbox row", q.enqueueToOutbox(ctx, tx, []queue.NewTask{p.Task}))
		})
		if err == nil {
			q.pokeRelay()
		}
		return err
	}
	if err := q.awaitBroker(ctx); err != nil {
		return err
	}
	err := q.RecordPayment(ctx, p, func(tx pgx.Tx) error {
		return postgres.MapError("record payment task", records.InsertTasks(ctx, tx, []queue.NewTask{p.Task}))
	})
	if err != nil {
		return err
	}
	if fault {
		return queue.ErrFaultInjected
	}
	return q.publishRecorded(ctx, []queue.NewTask{p.Task})
}
