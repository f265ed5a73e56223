package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue/conformance"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/ids"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// TestFanoutOneMessagePerTask: in every publish mode, a task of a kind
// with subscribers is ONE message, which the kind's fanout exchange puts
// in every subscriber's queue (it names every copy; in broker-only mode it
// also carries the posted kind, from which each copy's record takes its
// own, and nothing is recorded before a worker takes it); an ordinary
// task goes to the work queue. Workers then process every copy once.
func TestFanoutOneMessagePerTask(t *testing.T) {
	t.Parallel()
	const fanout = "order.placed:email,warehouse,analytics"
	subs := []string{"email", "warehouse", "analytics"}
	for _, mode := range []string{PublishDualWrite, PublishOutbox, PublishBrokerOnly} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			extra := map[string]string{"PUBLISH_MODE": mode}
			tg := startTarget(t, e, conformance.Settings{APIOnly: true, Fanout: fanout}, extra)
			b := queue.BatchRequest{}
			for range 5 {
				b.Tasks = append(b.Tasks, queue.TaskRequest{Kind: "order.placed"})
			}
			b.Tasks = append(b.Tasks, queue.TaskRequest{Kind: "email"})
			var be queue.BatchEnqueued
			if s, raw := kittest.Do(t, http.MethodPost, tg.URL()+"/tasks/batch", b, &be); s != http.StatusAccepted {
				t.Fatalf("POST /tasks/batch: %d %s", s, raw)
			}
			depth := func(name string) int {
				qi, err := e.channel(t).QueueDeclarePassive(name, true, false, false, false, nil)
				if err != nil {
					t.Fatalf("queue %s: %v", name, err)
				}
				return qi.Messages
			}
			kittest.Eventually(t, 20*time.Second, "the messages in the subscribers' queues", func() bool {
				for _, sub := range subs {
					if depth(fanoutQueue(e.queue, "order.placed", sub)) != 5 {
						return false
					}
				}
				return depth(e.queue) == 1
			})
			if mode == PublishOutbox {
				kittest.Eventually(t, 20*time.Second, "the outbox relayed", func() bool { return count(t, tg, `SELECT count(*) FROM outbox`) == 0 })
				if n := counter(t, tg, CounterRelayed); n != 6 {
					t.Errorf("relayed %d outbox rows, want 6 (one per posted task, not per copy: 16)", n)
				}
			}
			// The message in a subscriber's queue names all three copies.
			ch := e.channel(t)
			d, ok, err := ch.Get(fanoutQueue(e.queue, "order.placed", "warehouse"), false)
			if err != nil || !ok {
				t.Fatalf("get: %v %v", ok, err)
			}
			var m message
			if err := json.Unmarshal(d.Body, &m); err != nil || len(m.Copies) != 3 || m.ID != m.Copies["email"] || !contains(be.Copies, m.Copies) {
				t.Errorf("fan-out message %s: want the three copies of a posted task", d.Body)
			}
			if carries := m.Kind == "order.placed" && string(m.Payload) == "{}"; carries != (mode == PublishBrokerOnly) {
				t.Errorf("fan-out message %s in %s mode: carries the task %v", d.Body, mode, carries)
			}
			if n, want := count(t, tg, `SELECT count(*) FROM tasks`), map[bool]int{true: 0, false: 16}[mode == PublishBrokerOnly]; n != want {
				t.Errorf("%d task records before any worker, want %d", n, want)
			}
			if err := d.Nack(false, true); err != nil {
				t.Fatal(err)
			}
			tg.Configure(conformance.Settings{Workers: 4, Fanout: fanout})
			tg.Restart(t)
			waitDone(t, tg, 16, 30*time.Second)
			if n := count(t, tg, `SELECT count(*) FROM tasks WHERE attempts <> 1`); n != 0 {
				t.Errorf("%d tasks delivered more than once", n)
			}
			if n := count(t, tg, `SELECT count(*) FROM tasks WHERE kind LIKE 'order.placed@%'`); n != 15 {
				t.Errorf("%d records of order.placed's copies, want 15", n)
			}
		})
	}
}

// contains reports whether copies (subscriber → id) is one of the batch
// answer's copy lists, in email, warehouse, analytics order.
func contains(lists [][]string, copies map[string]string) bool {
	for _, l := range lists {
		if len(l) == 3 && l[0] == copies["email"] && l[1] == copies["warehouse"] && l[2] == copies["analytics"] {
			return true
		}
	}
	return false
}

// TestOutboxFanoutOfAKindNoLongerConfigured: an outbox row of a fanned-out
// task whose kind the relaying instance's FANOUT no longer has is
// published as one ordinary message per copy to the work queue (its
// exchange may be gone), and every copy is processed.
func TestOutboxFanoutOfAKindNoLongerConfigured(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tg := startTarget(t, e, conformance.Settings{Workers: 2}, map[string]string{"PUBLISH_MODE": PublishOutbox})
	first, second := ids.New(), ids.New()
	ctx := kittest.Context(t, 10*time.Second)
	if _, err := tg.pool.Exec(ctx, `
INSERT INTO tasks (id, kind, payload, fail_times, status, enqueued_at)
VALUES ($1, 'gone.kind@a', '{}', 0, 'queued', now()), ($2, 'gone.kind@b', '{}', 0, 'queued', now())`, first, second); err != nil {
		t.Fatal(err)
	}
	if _, err := tg.pool.Exec(ctx, `INSERT INTO outbox (task_id, enqueued_at, fanout_of, copies) VALUES ($1, now(), 'gone.kind', $2)`,
		first, fmt.Sprintf(`{"a": %q, "b": %q}`, first, second)); err != nil {
		t.Fatal(err)
	}
	waitDone(t, tg, 2, 30*time.Second) // the relay polls every second
	if n := counter(t, tg, CounterRelayed); n != 1 {
		t.Errorf("relayed %d rows, want 1", n)
	}
}
