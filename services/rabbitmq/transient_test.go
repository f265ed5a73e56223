package main

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config/configtest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue/conformance"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// queueCtl is the rabbitmqctl command line that reaches the broker's
// node, for a fault the management API cannot make: RABBITMQ_CTL when
// set (the cluster profile's), else the native stack's (`bash
// scripts/stack.sh rabbitmqctl`). A stack that neither reaches (docker
// compose: set RABBITMQ_CTL="docker compose exec -T rabbitmq
// rabbitmqctl") skips the test, saying so.
func queueCtl(t testing.TB) []string {
	t.Helper()
	ctl := ctlCommand()
	if ctl == nil {
		ctl = []string{"bash", "../../scripts/stack.sh", "rabbitmqctl"}
	}
	if out, err := runCtlWith(ctl, "eval", "ok."); err != nil {
		t.Skipf("rabbitmqctl does not reach the broker's node (%q: %v: %s): set RABBITMQ_CTL to a command line that does", strings.Join(ctl, " "), err, out)
	}
	return ctl
}

// runCtlWith runs the rabbitmqctl command line ctl with args, within 30 s.
func runCtlWith(ctl []string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, ctl[0], append(ctl[1:], args...)...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// queueRestarter returns restartQueue, which restarts the classic queue
// name (vhost "/") as a restart of its broker would, with the shared broker and the other tests' queues
// left running: it kills the queue's Erlang process with exit(Pid, kill),
// as a node crash kills it, and the queue's supervisor starts it again
// from its files, recovering what a node restart recovers (persistent
// messages come back; transient ones, only in the queue's memory, do
// not); then it closes the service's two connections from the broker's
// side, as a restart closes every connection, and the service
// reconnects. (The connections must go too: a consumer left attached
// across the queue's restart was seen starved, the recovered queue
// counting a delivery against its prefetch that the channel no longer
// held.) queueRestarter finds the rabbitmqctl command line and the
// service's connections first (the management API lists a connection
// only after its statistics interval), so that restartQueue acts at once;
// it returns once the queue answers again.
func queueRestarter(t testing.TB, e env, q *mqQueue) (restartQueue func(name string)) {
	t.Helper()
	ctl := queueCtl(t)
	closers := []func(){brokerConnection(t, q.connectionName()), brokerConnection(t, q.consumerConnectionName())}
	return func(name string) { restart(t, e, ctl, name, closers) }
}

// restart is queueRestarter's function.
func restart(t testing.TB, e env, ctl []string, name string, closers []func()) {
	t.Helper()
	expr := fmt.Sprintf(`{ok, Q} = rabbit_amqqueue:lookup(rabbit_misc:r(<<"/">>, queue, <<%q>>)), exit(amqqueue:get_pid(Q), kill), ok.`, name)
	if out, err := runCtlWith(ctl, "eval", expr); err != nil || out != "ok" {
		t.Fatalf("kill the process of queue %s: %v: %s", name, err, out)
	}
	for _, c := range closers {
		c()
	}
	kittest.Eventually(t, 30*time.Second, "the queue back after its process was killed", func() bool {
		conn, err := amqp.DialConfig(nodeURL(e.amqpURL), amqp.Config{Dial: amqp.DefaultDial(5 * time.Second)})
		if err != nil {
			return false
		}
		defer conn.Close()
		ch, err := conn.Channel()
		if err != nil {
			return false
		}
		_, err = ch.QueueDeclarePassive(name, true, false, false, false, nil)
		return err == nil
	})
}

// TestQueueRestartLosesOnlyTransientMessages is the kill test of
// DELIVERY_MODE (and of PUBLISH_MODE=broker-only). A slow consumer (one
// worker, PREFETCH 1, 500 ms a task) leaves most of 30 tasks waiting in
// the work queue; then the queue's process is killed and the service's
// connections closed (restartQueue: a broker restart for that queue
// alone). What the restart can have lost is counted in Postgres right
// after it: the tasks still queued (the consumer keeps taking tasks
// while rabbitmqctl starts, seconds on a loaded machine, so the queue's
// depth read before the restart overstates it). With persistent
// messages (the control, reconciler off) the queue comes back holding
// them. With transient messages it comes back empty: the broker lost
// every task it held, while the service had answered 202 for each. The
// records stayed in Postgres, and the reconciler (RECONCILE_AFTER 15s)
// publishes the lost ones again: in both modes every task is done, and
// processed once (the processed counter equals the tasks; a duplicate
// delivery would be dropped by its record). In broker-only mode
// (persistent messages, no record before a worker takes the task,
// reconciler off) the queue comes back holding them too, and every task
// is recorded and done once.
func TestQueueRestartLosesOnlyTransientMessages(t *testing.T) {
	t.Parallel()
	// reconcileAfter is long enough that the reconciler cannot act
	// before the restart is over, even on a loaded CI machine: with
	// 3 s, a slow post of the 30 tasks let it publish them again during
	// the restart, uncounted (see the check below).
	const reconcileAfter = 15 * time.Second
	for _, mode := range []string{DeliveryPersistent, DeliveryTransient, PublishBrokerOnly} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			const n = 30
			e := newEnv(t)
			extra := map[string]string{"QUEUE_TYPE": "classic", "PREFETCH": "1", "RECONCILE_AFTER": "0", "RECONCILE_INTERVAL": "100ms"}
			switch mode {
			case DeliveryTransient:
				extra["DELIVERY_MODE"] = mode
				extra["RECONCILE_AFTER"] = reconcileAfter.String()
			case PublishBrokerOnly:
				extra["PUBLISH_MODE"] = mode
			}
			persistent := mode != DeliveryTransient
			tg := startTarget(t, e, conformance.Settings{Workers: 1, Work: 500 * time.Millisecond}, extra)
			restartQueue := queueRestarter(t, e, tg.App())
			start := time.Now()
			post(t, tg.URL(), n, 0)
			before := queueDepth(t, e, e.queue)
			restartQueue(e.queue)
			after := queueDepth(t, e, e.queue)
			// Queued after the restart: not yet taken by the worker, so
			// held by the queue when it restarted (broker-only mode
			// records a task only when a worker takes it).
			queued := count(t, tg, `SELECT count(*) FROM tasks WHERE status = 'queued'`)
			if mode == PublishBrokerOnly {
				queued = n - count(t, tg, `SELECT count(*) FROM tasks`)
			}
			if took := time.Since(start); !persistent && took >= reconcileAfter {
				// The reconciler may have published the tasks again
				// during the restart, its claim then rolled back when
				// the restart closed its connection before the
				// confirms: the tasks run, but uncounted.
				t.Fatalf("posting the tasks and restarting the queue took %v, longer than RECONCILE_AFTER %v: the test cannot tell the reconciler's republishing from the restart", took, reconcileAfter)
			}
			t.Logf("%s: %d messages ready before the queue's restart, %d after; %d tasks not yet taken after it", mode, before, after, queued)
			if queued < n/4 {
				t.Fatalf("only %d of %d tasks waited in the queue at the restart: the consumer was not slow enough for the test to mean anything", queued, n)
			}
			// The worker holds at most one task (PREFETCH 1) whose
			// delivery it may not have recorded yet: it counts as queued
			// but needs no message.
			switch {
			case persistent && after < queued-1:
				t.Errorf("%s: %d messages after the queue's restart, want the %d tasks not yet taken", mode, after, queued)
			case !persistent && after != 0:
				t.Errorf("transient: %d messages after the queue's restart, want 0: the restart should lose them", after)
			}
			waitDone(t, tg, n, 2*time.Minute)
			c := kittest.CountersReach(t, 30*time.Second, queue.CounterProcessed, n, tg.URL())[0]
			if c[queue.CounterProcessed] != n {
				t.Errorf("processed %d, want %d: each task once", c[queue.CounterProcessed], n)
			}
			switch {
			case persistent && c[CounterRepublished] != 0:
				t.Errorf("%s: republished %d with the reconciler off", mode, c[CounterRepublished])
			case !persistent && c[CounterRepublished] < int64(queued-1):
				// Every task queued after the restart reached the
				// worker again only through the reconciler.
				t.Errorf("transient: republished %d, want at least the %d tasks the restart lost (less the one the worker may hold)", c[CounterRepublished], queued)
			}
			twice := count(t, tg, `SELECT count(*) FROM tasks WHERE attempts > 1`)
			t.Logf("%s: %d tasks done, processed %d, republished %d, delivered %d (%d tasks delivered more than once)",
				mode, n, c[queue.CounterProcessed], c[CounterRepublished], c[queue.CounterDelivered], twice)
		})
	}
}

// TestDeliveryModeOfMessages: with DELIVERY_MODE=transient an enqueue's
// message is transient (delivery mode 1), and a retry's is persistent
// whatever the setting (the reconciler would not republish a task
// waiting for its retry); the default publishes persistent messages.
func TestDeliveryModeOfMessages(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"", DeliveryTransient} {
		want := map[string]uint8{"": amqp.Persistent, DeliveryTransient: amqp.Transient}[mode]
		name := mode
		if name == "" {
			name = "default"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			extra := map[string]string{"QUEUE_TYPE": "classic", "RECONCILE_AFTER": "1h"}
			if mode != "" {
				extra["DELIVERY_MODE"] = mode
			}
			// One worker of 200 ms: the failing task is taken first and
			// its retry waits out a 30 s backoff in its delay queue,
			// while the plain task posted after it is still in the work
			// queue when the test stops the instance.
			tg := startTarget(t, e, conformance.Settings{Workers: 1, Work: 200 * time.Millisecond, RetryBase: 30 * time.Second, MaxAttempts: 2}, extra)
			retry, _ := tg.App().retryQueue(1)
			t.Cleanup(func() {
				if conn, err := amqp.DialConfig(nodeURL(e.amqpURL), amqp.Config{Dial: amqp.DefaultDial(5 * time.Second)}); err == nil {
					defer conn.Close()
					if ch, err := conn.Channel(); err == nil {
						_, _ = ch.QueueDelete(retry, false, false, false)
					}
				}
			})
			post(t, tg.URL(), 1, 1)
			kittest.Eventually(t, 30*time.Second, "the first attempt failed and its retry published", func() bool {
				return counter(t, tg, queue.CounterRetried) == 1
			})
			tg.Configure(conformance.Settings{APIOnly: true, RetryBase: 30 * time.Second, MaxAttempts: 2})
			tg.Restart(t)
			post(t, tg.URL(), 1, 0)
			ch := e.channel(t)
			for _, c := range []struct {
				queue string
				want  uint8
			}{{e.queue, want}, {retry, amqp.Persistent}} {
				var d amqp.Delivery
				kittest.Eventually(t, 30*time.Second, "a message in "+c.queue, func() bool {
					var ok bool
					var err error
					d, ok, err = ch.Get(c.queue, false)
					if err != nil {
						t.Fatal(err)
					}
					return ok
				})
				if d.DeliveryMode != c.want {
					t.Errorf("message in %s: delivery mode %d, want %d", c.queue, d.DeliveryMode, c.want)
				}
				_ = d.Nack(false, true)
			}
		})
	}
}

// TestConfigDeliveryMode: DELIVERY_MODE is persistent or transient;
// transient is refused with the reconciler off (nothing would publish
// again what a broker restart lost) and with quorum queues (which keep
// every message as a persistent one).
func TestConfigDeliveryMode(t *testing.T) {
	t.Parallel()
	configtest.ReadsBack(t, readConfig, configtest.Var[Config]{Name: "DELIVERY_MODE", Good: DeliveryTransient, Get: func(c Config) string { return c.DeliveryMode }, Bad: []string{"durable", "2"}})
	configtest.NamesBadVariables(t, readConfig, map[string]string{"DELIVERY_MODE": DeliveryTransient, "RECONCILE_AFTER": "0"}, "DELIVERY_MODE")
	configtest.NamesBadVariables(t, readConfig, map[string]string{"DELIVERY_MODE": DeliveryTransient, "QUEUE_TYPE": "quorum"}, "DELIVERY_MODE")
	configtest.NamesBadVariables(t, readConfig, map[string]string{"DELIVERY_MODE": DeliveryTransient, "PUBLISH_MODE": PublishBrokerOnly}, "DELIVERY_MODE")
	configtest.ReadsBack(t, readConfig, configtest.Var[Config]{Name: "PUBLISH_MODE", Good: PublishBrokerOnly, Get: func(c Config) string { return c.PublishMode }, Bad: []string{"broker", "direct"}})
}
