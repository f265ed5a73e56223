package main

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue/conformance"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// brokerOnlyLacks is Features.RecordsOnConsume for PUBLISH_MODE=broker-only.
const brokerOnlyLacks = "PUBLISH_MODE=broker-only records a task only when a worker takes it (until then the broker alone holds it), so GET /tasks/{id} answers 404 right after the 202"

// TestConformanceBrokerOnly runs the pair's suite against rabbitmq with
// PUBLISH_MODE=broker-only: the enqueue is one confirmed publish and no
// row, so the checks that read a task right after its 202 skip
// (RecordsOnConsume) and the rest runs, waits included; the payment is
// the dual write (no atomic outbox) and the backlog bound counts the
// broker's queues.
func TestConformanceBrokerOnly(t *testing.T) {
	t.Parallel()
	conformance.Run(t, conformance.Features{AtomicOutbox: false, BacklogBound: true, RecordsOnConsume: brokerOnlyLacks},
		func(t testing.TB, s conformance.Settings) conformance.Target {
			t.Helper()
			return startTarget(t, newEnv(t), s, map[string]string{"PUBLISH_MODE": PublishBrokerOnly})
		})
}

// TestBrokerOnlyRecordsOnFirstDelivery: with PUBLISH_MODE=broker-only and
// no worker, accepted tasks are messages that carry them and nothing
// else: no task row, GET /tasks/{id} 404, a short wait 404 at its
// timeout, GET /queue counting them as queued from the broker. Workers
// started a second later record each task from its message (kind,
// payload, fail_times), run it (a retry included) and count it: processed
// once each, and the processing and delivery latencies measured from the
// enqueue time the message carries, so at least the second the tasks
// waited.
func TestBrokerOnlyRecordsOnFirstDelivery(t *testing.T) {
	t.Parallel()
	const n = 20
	e := newEnv(t)
	tg := startTarget(t, e, conformance.Settings{APIOnly: true, RetryBase: 50 * time.Millisecond}, map[string]string{"PUBLISH_MODE": PublishBrokerOnly})
	b := queue.BatchRequest{}
	for i := range n {
		b.Tasks = append(b.Tasks, queue.TaskRequest{Kind: "bo", Payload: json.RawMessage(`{"i":` + itoa(i) + `,"big":1e300}`)})
	}
	var be queue.BatchEnqueued
	if s, raw := kittest.Do(t, http.MethodPost, tg.URL()+"/tasks/batch", b, &be); s != http.StatusAccepted {
		t.Fatalf("POST /tasks/batch: %d %s", s, raw)
	}
	var flaky queue.Enqueued
	if s, raw := kittest.Do(t, http.MethodPost, tg.URL()+"/tasks", queue.TaskRequest{Kind: "bo-flaky", FailTimes: 1}, &flaky); s != http.StatusAccepted {
		t.Fatalf("POST /tasks: %d %s", s, raw)
	}
	posted := time.Now()
	if rows := count(t, tg, `SELECT count(*) FROM tasks`); rows != 0 {
		t.Errorf("%d task rows before any worker, want 0: broker-only records nothing at the enqueue", rows)
	}
	if s := kittest.Status(t, tg.URL()+"/tasks/"+flaky.ID); s != http.StatusNotFound {
		t.Errorf("GET /tasks/{id} before any worker: %d, want 404", s)
	}
	if s, raw := kittest.Do(t, http.MethodGet, tg.URL()+"/tasks/"+flaky.ID+"/wait?timeout=200ms", nil, nil); s != http.StatusNotFound {
		t.Errorf("a wait before any worker: %d %s, want 404 at its timeout", s, raw)
	}
	var d queue.Depth
	if s, raw := kittest.Do(t, http.MethodGet, tg.URL()+"/queue", nil, &d); s != http.StatusOK || d.Queued != n+1 || d.Running != 0 {
		t.Errorf("GET /queue before any worker: %d %s, want %d queued (the broker's)", s, raw, n+1)
	}
	msg, ok, err := e.channel(t).Get(e.queue, false)
	if err != nil || !ok {
		t.Fatalf("get a message: %v %v", ok, err)
	}
	var m message
	if err := json.Unmarshal(msg.Body, &m); err != nil || m.Kind == "" || len(m.Payload) == 0 || m.EnqueuedAt.IsZero() {
		t.Errorf("message %s: want the task in it (kind, payload, enqueued_at)", msg.Body)
	}
	_ = msg.Nack(false, true)

	time.Sleep(time.Second - time.Since(posted))
	tg.Configure(conformance.Settings{Workers: 4, RetryBase: 50 * time.Millisecond})
	tg.Restart(t)
	waitDone(t, tg, n+1, time.Minute)
	if k := count(t, tg, `SELECT count(*) FROM tasks WHERE kind = 'bo' AND attempts = 1 AND fail_times = 0 AND payload ? 'i' AND payload->>'big' IS NOT NULL`); k != n {
		t.Errorf("%d records of the batch's tasks with their kind and payload, delivered once; want %d", k, n)
	}
	task := waitTaskDone(t, tg.URL(), flaky.ID)
	if task.Kind != "bo-flaky" || task.Attempts != 2 || task.LastError == nil {
		t.Errorf("the task failing once: %+v, want done after its retry", task)
	}
	c := kittest.CountersReach(t, 30*time.Second, queue.CounterProcessed, n+1, tg.URL())[0]
	if c[queue.CounterProcessed] != n+1 || c[queue.CounterDelivered] != n+2 || c[queue.CounterRetried] != 1 {
		t.Errorf("counters %v: want processed %d, delivered %d, retried 1", c, n+1, n+2)
	}
	lat := tg.App().stats.Snapshot().Latencies
	for _, name := range []string{queue.LatencyProcessing, queue.LatencyDelivery} {
		if l := lat[name]; l.Count < n || l.P50MS < 1000 {
			t.Errorf("latency %s: %+v, want %d+ observations of at least the 1 s the tasks waited (from the enqueue time in the message)", name, l, n)
		}
	}
	if s, raw := kittest.Do(t, http.MethodGet, tg.URL()+"/queue", nil, &d); s != http.StatusOK || d.Queued != 0 || d.Running != 0 || d.Dead != 0 {
		t.Errorf("GET /queue once all is done: %d %s", s, raw)
	}
}

// waitTaskDone long-polls the task until it is done or dead.
func waitTaskDone(t testing.TB, base, id string) queue.Task {
	t.Helper()
	var task queue.Task
	if s, raw := kittest.Do(t, http.MethodGet, base+"/tasks/"+id+"/wait?timeout=30s", nil, &task); s != http.StatusOK {
		t.Fatalf("wait %s: %d %s", id, s, raw)
	}
	return task
}

// itoa is strconv.Itoa for the payloads.
func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

// TestBrokerOnlyDeadLettersAForgedTask: a message that carries a task the
// handler would have refused (published past the service) is
// dead-lettered at decode, as an undecodable one, without holding back
// the batch it came in: the valid tasks around it are recorded and done.
func TestBrokerOnlyDeadLettersAForgedTask(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tg := startTarget(t, e, conformance.Settings{APIOnly: true}, map[string]string{"PUBLISH_MODE": PublishBrokerOnly})
	post(t, tg.URL(), 3, 0)
	forged := message{ID: "0190a6e4-7f43-7b6e-9a3c-2f4c8d1e0b5a", EnqueuedAt: time.Now(), Kind: "x", Payload: json.RawMessage(`{"a":"\u0000"}`)}
	publishRaw(t, e, forged)
	post(t, tg.URL(), 3, 0)
	tg.Configure(conformance.Settings{Workers: 2})
	tg.Restart(t)
	waitDone(t, tg, 6, time.Minute)
	kittest.Eventually(t, 30*time.Second, "the forged message dead-lettered", func() bool { return queueDepth(t, e, e.queue+".dead") == 1 })
	if n := count(t, tg, `SELECT count(*) FROM tasks WHERE id = '0190a6e4-7f43-7b6e-9a3c-2f4c8d1e0b5a'`); n != 0 {
		t.Errorf("the forged task was recorded")
	}
}
