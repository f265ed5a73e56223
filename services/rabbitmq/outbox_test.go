package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue/conformance"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue/records"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/ids"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// TestConformanceOutbox runs the pair's suite against rabbitmq in outbox
// mode: the payment, its task's record and its outbox row commit in one
// transaction, so the payment fault leaves neither row, as on no-rabbitmq.
func TestConformanceOutbox(t *testing.T) {
	t.Parallel()
	conformance.Run(t, conformance.Features{AtomicOutbox: true, BacklogBound: true}, func(t testing.TB, s conformance.Settings) conformance.Target {
		t.Helper()
		return startTarget(t, newEnv(t), s, map[string]string{"PUBLISH_MODE": PublishOutbox})
	})
}

// count runs a count(*) query on the target's schema.
func count(t testing.TB, tg *target, sql string) int {
	t.Helper()
	var n int
	if err := tg.pool.QueryRow(kittest.Context(t, 10*time.Second), sql).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestBrokerOutageStrandsNothing: clients keep enqueueing through a broker
// outage (the test's vhost deleted, which also drops the messages its
// queues held, then created again). Afterwards every accepted task is
// processed, and no record is left undone: not the accepted ones, not the
// ones a 503 answered after their record committed (the dual write's
// window, repaired by the reconciler), not the ones whose confirmed
// messages went with the vhost (republished by the reconciler in both
// modes). In outbox mode the writes are also taken during the outage.
func TestBrokerOutageStrandsNothing(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{PublishDualWrite, PublishOutbox} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			v := newVhost(t)
			e := newEnv(t)
			e.amqpURL = v.amqpURL(e.amqpURL)
			tg := startTarget(t, e, conformance.Settings{Workers: 2}, map[string]string{
				"PUBLISH_MODE": mode, "RECONCILE_AFTER": "2s", "RECONCILE_INTERVAL": "200ms",
			})

			var mu sync.Mutex
			var accepted []string
			var refused, acceptedDown int
			var down bool
			stop := make(chan struct{})
			var clients sync.WaitGroup
			client := &http.Client{Timeout: 15 * time.Second}
			for range 4 {
				clients.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
						}
						resp, err := client.Post(tg.URL()+"/tasks", "application/json", bytes.NewBufferString(`{"kind":"outage"}`))
						if err != nil {
							time.Sleep(10 * time.Millisecond)
							continue
						}
						var en queue.Enqueued
						_ = json.NewDecoder(resp.Body).Decode(&en)
						resp.Body.Close()
						mu.Lock()
						switch resp.StatusCode {
						case http.StatusAccepted:
							accepted = append(accepted, en.ID)
							if down {
								acceptedDown++
							}
						default:
							refused++
						}
						mu.Unlock()
						time.Sleep(5 * time.Millisecond)
					}
				})
			}
			time.Sleep(500 * time.Millisecond)
			v.delete(t, false)
			kittest.Eventually(t, 30*time.Second, "the broker session lost", func() bool { return !tg.App().connected() })
			mu.Lock()
			down = true
			mu.Unlock()
			// /readyz: the dual write cannot take a task without the
			// broker, so it leaves rotation; the outbox can, so it stays in
			// and says it is degraded.
			ready, body := readyz(t, tg.URL())
			if want := map[string]int{PublishDualWrite: http.StatusServiceUnavailable, PublishOutbox: http.StatusOK}[mode]; ready != want {
				t.Errorf("/readyz while the broker is down: %d %s, want %d", ready, body, want)
			}
			if mode == PublishOutbox && !strings.Contains(body, `"status":"degraded"`) {
				t.Errorf("/readyz while the broker is down does not say degraded: %s", body)
			}
			time.Sleep(1500 * time.Millisecond)
			mu.Lock()
			down = false
			mu.Unlock()
			v.create(t)
			kittest.Eventually(t, time.Minute, "the broker session back", tg.App().connected)
			time.Sleep(500 * time.Millisecond)
			close(stop)
			clients.Wait()

			mu.Lock()
			defer mu.Unlock()
			if len(accepted) == 0 {
				t.Fatal("no enqueue accepted")
			}
			if mode == PublishOutbox && acceptedDown == 0 {
				t.Errorf("outbox mode accepted no write while the broker was down (%d refused)", refused)
			}
			kittest.Eventually(t, time.Minute, "every recorded task done", func() bool {
				return count(t, tg, `SELECT count(*) FROM tasks WHERE status <> 'done'`) == 0
			})
			var done int
			if err := tg.pool.QueryRow(kittest.Context(t, 10*time.Second),
				`SELECT count(*) FROM tasks WHERE id = ANY($1::uuid[]) AND status = 'done'`, accepted).Scan(&done); err != nil {
				t.Fatal(err)
			}
			if done != len(accepted) {
				t.Errorf("%d of %d accepted tasks done, want all: stranded tasks", done, len(accepted))
			}
			// A task can be done before the relay pass that published it
			// has committed the delete of its outbox row (the broker
			// confirmed, the worker ran it, the delete is in flight): the
			// outbox must empty, not be empty at this instant. A row the
			// relay stranded never leaves.
			kittest.Eventually(t, time.Minute, "the outbox empty (a row left is a stranded task)", func() bool {
				return count(t, tg, `SELECT count(*) FROM outbox`) == 0
			})
			c := kittest.Counters(t, tg.URL())
			t.Logf("%s: %d accepted (%d while the broker was down), %d refused, %d records in all; republished %d, relayed %d",
				mode, len(accepted), acceptedDown, refused, count(t, tg, `SELECT count(*) FROM tasks`), c[CounterRepublished], c[CounterRelayed])
		})
	}
}

// TestRelayKilledMidwayLosesNothing: relay passes die after their
// messages were confirmed and before the delete of their outbox rows
// committed, as a relay crashing there would. The rows stay, the next
// pass publishes them again, and every task is processed exactly once
// (the duplicates are acked and dropped, or recorded without effect).
func TestRelayKilledMidwayLosesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tg := startTarget(t, e, conformance.Settings{Workers: 2}, map[string]string{
		"PUBLISH_MODE": PublishOutbox, "RECONCILE_AFTER": "0", "OUTBOX_BATCH": "20",
	})
	const kills, n = 3, 100
	tg.App().relayKills.Store(kills)
	post(t, tg.URL(), n, 0)
	waitDone(t, tg, n, time.Minute)
	if left := tg.App().relayKills.Load(); left > 0 {
		t.Errorf("%d of %d relay kills did not happen", left, kills)
	}
	if rows := count(t, tg, `SELECT count(*) FROM outbox`); rows != 0 {
		t.Errorf("%d outbox rows left", rows)
	}
	c := kittest.CountersReach(t, 30*time.Second, queue.CounterProcessed, n, tg.URL())[0]
	if c[queue.CounterProcessed] != n || c[CounterRelayed] != n {
		t.Errorf("processed %d, relayed %d, want %d each: %v", c[queue.CounterProcessed], c[CounterRelayed], n, c)
	}
	if c[queue.CounterDelivered] <= n {
		t.Errorf("delivered %d, want more than %d: the killed passes' messages were confirmed, so duplicates arrive", c[queue.CounterDelivered], n)
	}
	t.Logf("%d tasks, %d deliveries after %d killed relay passes", n, c[queue.CounterDelivered], kills)
}

// strand records tasks the way a dual write that lost its publish leaves
// them: queued, never delivered, no message; enqueued age ago.
func strand(t testing.TB, tg *target, n int, age time.Duration) []string {
	t.Helper()
	tasks := make([]queue.NewTask, n)
	out := make([]string, n)
	at := time.Now().Add(-age)
	for i := range tasks {
		out[i] = ids.New()
		tasks[i] = queue.NewTask{ID: out[i], Kind: "stranded", Payload: json.RawMessage(`{}`), EnqueuedAt: at}
	}
	if err := records.InsertTasks(kittest.Context(t, 10*time.Second), tg.pool, tasks); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestReconcilerRepublishesStrandedRecords: records left queued with no
// message (as a publish lost after its commit leaves them) are published
// again once RECONCILE_AFTER has passed, and processed once each. Two
// instances reconcile the same schema: each record is republished once in
// all (the claim's SKIP LOCKED and republished_at), not once per
// instance. A fresh record is left alone until its own threshold.
func TestReconcilerRepublishesStrandedRecords(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	extra := map[string]string{"RECONCILE_AFTER": "1m", "RECONCILE_INTERVAL": "50ms", "RECONCILE_BATCH": "7"}
	a := startTarget(t, e, conformance.Settings{Workers: 2}, extra)
	b := startTarget(t, e, conformance.Settings{Workers: 2}, extra)
	const n = 200
	strand(t, a, n, 2*time.Minute)
	fresh := strand(t, a, 1, 0)
	waitDone(t, a, n, time.Minute)
	cs := kittest.CountersReach(t, 30*time.Second, queue.CounterProcessed, n, a.URL(), b.URL())
	ca, cb := cs[0], cs[1]
	if got := ca[CounterRepublished] + cb[CounterRepublished]; got != n {
		t.Errorf("republished %d + %d = %d, want %d: each stranded record once", ca[CounterRepublished], cb[CounterRepublished], got, n)
	}
	if got := ca[queue.CounterProcessed] + cb[queue.CounterProcessed]; got != n {
		t.Errorf("processed %d, want %d", got, n)
	}
	if k := count(t, a, `SELECT count(*) FROM tasks WHERE attempts = 1`); k != n {
		t.Errorf("%d tasks delivered once, want %d", k, n)
	}
	task, err := records.Store{Pool: a.pool}.Get(kittest.Context(t, 10*time.Second), fresh[0])
	if err != nil || task.Status != queue.StatusQueued || task.DeliveredAt != nil {
		t.Errorf("a record younger than RECONCILE_AFTER: %+v %v, want queued and never delivered", task, err)
	}
	t.Logf("republished by instance a %d, by b %d", ca[CounterRepublished], cb[CounterRepublished])
}

// TestReconcilerWaitsForTheBrokerBacklog: while the work queue holds ready
// messages, a record older than RECONCILE_AFTER may be waiting in it, not
// missing, so the reconciler republishes nothing; once the queue is empty
// it republishes the stranded records. (An API-only instance: no consumer
// drains the queue.)
func TestReconcilerWaitsForTheBrokerBacklog(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tg := startTarget(t, e, conformance.Settings{APIOnly: true}, map[string]string{"RECONCILE_AFTER": "1m", "RECONCILE_INTERVAL": "50ms"})
	post(t, tg.URL(), 1, 0) // published, never consumed: one ready message
	const n = 5
	strand(t, tg, n, 2*time.Minute)
	time.Sleep(500 * time.Millisecond) // ten intervals
	if got := kittest.Counter(t, tg.URL(), CounterRepublished); got != 0 {
		t.Fatalf("republished %d with a message ready in the queue, want 0", got)
	}
	if _, err := e.channel(t).QueuePurge(e.queue, false); err != nil {
		t.Fatal(err)
	}
	kittest.Eventually(t, 30*time.Second, "the stranded records republished", func() bool {
		return kittest.Counter(t, tg.URL(), CounterRepublished) == n
	})
}

// readyz returns /readyz's status code and body.
func readyz(t testing.TB, base string) (int, string) {
	t.Helper()
	resp, err := http.Get(base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}
