package main

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue/conformance"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service/servicetest"
)

// env is where one target lives: its schema and its queue.
type env struct {
	// amqpURL is RABBITMQ_URL as the service takes it: one node, or
	// several comma-separated (the cluster profile's); the test's own
	// connections go to its first node (nodeURL).
	pgURL, amqpURL, schema, queue string
	// fanouts are the FANOUT values the env's instances were started
	// with, whose exchanges and queues the cleanup deletes.
	fanouts *[]string
}

// newEnv gives the test a schema and a queue name of its own, and deletes
// the queue's topology when the test ends.
func newEnv(t testing.TB) env {
	t.Helper()
	e := env{pgURL: kittest.PostgresURL(t), amqpURL: kittest.Server(t, "RABBITMQ_URL", kittest.DefaultRabbitMQURL), fanouts: new([]string)}
	e.schema = kittest.Schema(t, e.pgURL)
	e.queue = kittest.UniqueName(t, "q")
	t.Cleanup(func() { deleteTopology(t, e.amqpURL, e.queue, *e.fanouts) })
	return e
}

// channel opens a channel to the env's broker on a connection of its own
// (dialled within 5 s), closed when the test ends. A failed declare
// closes the channel: take a new one for each.
func (e env) channel(t testing.TB) *amqp.Channel {
	t.Helper()
	conn, err := amqp.DialConfig(nodeURL(e.amqpURL), amqp.Config{Dial: amqp.DefaultDial(5 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// nodeURL is the first node's URL of urls (RABBITMQ_URL's form: one URL
// or several, comma-separated): in a cluster every node sees every queue.
func nodeURL(urls string) string {
	first, _, _ := strings.Cut(urls, ",")
	return strings.TrimSpace(first)
}

// deleteTopology deletes every queue and the exchange the service declared
// for name (retry queues are found by trying the names a default-range
// backoff can produce), with the fan-out exchanges and queues of fanouts,
// through the first node of urls (RABBITMQ_URL's form) that answers.
func deleteTopology(t testing.TB, urls, name string, fanouts []string) {
	var conn *amqp.Connection
	var err error
	for u := range strings.SplitSeq(urls, ",") {
		if conn, err = amqp.DialConfig(strings.TrimSpace(u), amqp.Config{Dial: amqp.DefaultDial(5 * time.Second)}); err == nil {
			break
		}
	}
	if err != nil {
		t.Logf("cleanup: %v", err)
		return
	}
	defer conn.Close()
	del := func(f func(ch *amqp.Channel) error) {
		// A failed delete closes the channel; use one per call.
		if ch, err := conn.Channel(); err == nil {
			_ = f(ch)
			_ = ch.Close()
		}
	}
	names := []string{name, name + ".dead"}
	for _, base := range []time.Duration{20 * time.Millisecond, 50 * time.Millisecond, queue.DefaultRetryBase} {
		for n := 1; n < 10; n++ {
			names = append(names, name+".retry."+strconv.FormatInt(queue.Backoff(base, n).Milliseconds(), 10))
		}
	}
	exchanges := []string{name + ".dlx"}
	for _, v := range fanouts {
		f, _ := queue.ParseFanout(v)
		for _, kind := range f.Kinds() {
			exchanges = append(exchanges, fanoutExchange(name, kind))
			for _, sub := range f.Subscribers(kind) {
				names = append(names, fanoutQueue(name, kind, sub))
			}
		}
	}
	for _, q := range names {
		del(func(ch *amqp.Channel) error { _, err := ch.QueueDelete(q, false, false, false); return err })
	}
	for _, x := range exchanges {
		del(func(ch *amqp.Channel) error { return ch.ExchangeDelete(x, false, false) })
	}
}

// target implements conformance.Target: one instance at a time in env,
// started with the settings it holds and extra on top of them. Its Crash
// leaves the tasks the workers hold unacknowledged (their channel closes
// with them), then starts a new instance.
type target struct {
	env
	pool *pgxpool.Pool
	*conformance.ServiceTarget[*mqQueue]
}

// testQueueType is QUEUE_TYPE of the test's environment (quorum, for the
// cluster profile's three nodes: make test-cluster-brokers), which every
// instance takes unless its test names another; unset, the service's
// default (classic).
func testQueueType() string { return kittest.Env("QUEUE_TYPE", DefaultQueueType) }

// startTarget starts an instance in e with extra on top of s.
func startTarget(t testing.TB, e env, s conformance.Settings, extra map[string]string) *target {
	t.Helper()
	tg := &target{env: e, pool: kittest.Pool(t, e.pgURL, e.schema)}
	tg.ServiceTarget = conformance.StartServiceTarget(t, tg.pool, s, func(t testing.TB, s conformance.Settings) (*mqQueue, *service.Service) {
		if s.Fanout != "" {
			*e.fanouts = append(*e.fanouts, s.Fanout)
		}
		return servicetest.Assembled(t, readConfig, assemble, map[string]string{"DATABASE_URL": e.pgURL, "DATABASE_SCHEMA": e.schema,
			"RABBITMQ_URL": e.amqpURL, "RABBITMQ_QUEUE": e.queue, "SHUTDOWN_TIMEOUT": "10s", "QUEUE_TYPE": testQueueType()}, s.Env(), extra)
	})
	return tg
}

// newTarget starts a target in an env of its own.
func newTarget(t testing.TB, s conformance.Settings) conformance.Target {
	t.Helper()
	return startTarget(t, newEnv(t), s, nil)
}

// TestConformance runs the pair's one suite against rabbitmq: no atomic
// outbox (the payment commits, then its task is published).
func TestConformance(t *testing.T) {
	t.Parallel()
	conformance.Run(t, conformance.Features{AtomicOutbox: false, BacklogBound: true}, newTarget)
}
