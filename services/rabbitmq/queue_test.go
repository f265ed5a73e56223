package main

import (
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service"
)

// instance is one running service.
type instance struct {
	svc  *service.Service
	q    *mqQueue
	base string
	stop func() // graceful; safe to call twice
}

// env is where one target lives: its schema and its queue.
type env struct {
	pgURL, amqpURL, schema, queue string
}

// newEnv gives the test a schema and a queue name of its own, and deletes
// the queue's topology when the test ends.
func newEnv(t testing.TB) env {
	t.Helper()
	e := env{pgURL: kittest.PostgresURL(t), amqpURL: kittest.Server(t, "RABBITMQ_URL", kittest.DefaultRabbitMQURL)}
	e.schema = kittest.Schema(t, e.pgURL)
	e.queue = kittest.UniqueName(t, "q")
	t.Cleanup(func() { deleteTopology(t, e.amqpURL, e.queue) })
	return e
}

// deleteTopology deletes every queue and the exchange the service declared
// for name (retry queues are found by trying the names a default-range
// backoff can produce).
func deleteTopology(t testing.TB, url, name string) {
	conn, err := amqp.DialConfig(url, amqp.Config{Dial: amqp.DefaultDial(5 * time.Second)})
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
	for _, q := range names {
		del(func(ch *amqp.Channel) error { _, err := ch.QueueDelete(q, false, false, false); return err })
	}
	del(func(ch *amqp.Channel) error { return ch.ExchangeDelete(name+".dlx", false, false) })
}

// start builds and serves an instance in e with env on top of o.
func start(t testing.TB, e env, o queue.Options, extra map[string]string) *instance {
	t.Helper()
	cfg := kittest.ReadConfig(t, readConfig, map[string]string{"DATABASE_URL": e.pgURL, "DATABASE_SCHEMA": e.schema,
		"RABBITMQ_URL": e.amqpURL, "RABBITMQ_QUEUE": e.queue, "SHUTDOWN_TIMEOUT": "10s"}, o.Env(), extra)
	svc, q, err := assemble(kittest.Context(t, time.Minute), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	in := &instance{svc: svc, q: q}
	in.base, in.stop = kittest.Start(t, svc)
	return in
}

// target implements queue.Target.
type target struct {
	env
	pool *pgxpool.Pool
	cur  *instance
}

func (tg *target) URL() string              { return tg.cur.base }
func (tg *target) DB() *pgxpool.Pool        { return tg.pool }
func (tg *target) Features() queue.Features { return queue.Features{AtomicOutbox: false} }

func (tg *target) Restart(t *testing.T, o queue.Options) {
	tg.cur.stop()
	tg.cur = start(t, tg.env, o, nil)
}

func (tg *target) Crash(t *testing.T, o queue.Options) {
	tg.cur.q.Crash()
	tg.cur.stop()
	tg.cur = start(t, tg.env, o, nil)
}

func newTarget(t *testing.T, o queue.Options) queue.Target {
	e := newEnv(t)
	tg := &target{env: e}
	tg.cur = start(t, e, o, nil)
	tg.pool = kittest.Pool(t, e.pgURL, e.schema)
	return tg
}

// TestConformance runs the pair's one suite against rabbitmq.
func TestConformance(t *testing.T) {
	t.Parallel()
	queue.Run(t, newTarget)
}
