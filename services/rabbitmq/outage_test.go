package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue/conformance"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue/records"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// TestBrokerDownRefusesBeforeRecording: while the broker is down, a write
// is refused with 503 at once and records nothing, so no task is left
// queued with no message to deliver it (the dual write's stranding).
// Once the broker is back, writes are taken and delivered again.
func TestBrokerDownRefusesBeforeRecording(t *testing.T) {
	t.Parallel()
	v := newVhost(t)
	e := newEnv(t)
	e.amqpURL = v.amqpURL(e.amqpURL)
	tg := startTarget(t, e, conformance.Settings{Workers: 2}, nil)
	post(t, tg.URL(), 10, 0)
	waitDone(t, tg, 10, time.Minute)

	v.delete(t, false)
	kittest.Eventually(t, 30*time.Second, "the broker session lost", func() bool { return !tg.App().connected() })
	for _, path := range []string{"/tasks", "/tasks/batch"} {
		var body any = queue.TaskRequest{Kind: "t"}
		if path == "/tasks/batch" {
			body = queue.BatchRequest{Tasks: []queue.TaskRequest{{Kind: "t"}, {Kind: "t"}}}
		}
		if s, raw := kittest.Do(t, http.MethodPost, tg.URL()+path, body, nil); s != http.StatusServiceUnavailable {
			t.Errorf("POST %s with the broker down: %d %s, want 503", path, s, raw)
		} else if !strings.Contains(string(raw), `"kind":"not_recorded"`) {
			t.Errorf("POST %s with the broker down: %s, want kind not_recorded", path, raw)
		} else {
			t.Logf("POST %s: %s", path, raw)
		}
	}
	var n int
	if err := tg.pool.QueryRow(kittest.Context(t, 10*time.Second), `SELECT count(*) FROM tasks`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 10 {
		t.Errorf("%d task records after the refused writes, want the 10 done before the outage", n)
	}

	v.create(t)
	kittest.Eventually(t, time.Minute, "the broker session back", tg.App().connected)
	post(t, tg.URL(), 10, 0)
	waitDone(t, tg, 20, time.Minute)
}

// TestPublishFailureAfterRecordIsUnknown: the dual write's second step
// failing after the records committed (here: the request's deadline has
// passed when the publish starts) is a 503 of kind "unknown" naming the
// ids, and the records are there: the reconciler will publish them, so a
// retry may run them twice. Never "nothing was recorded".
func TestPublishFailureAfterRecordIsUnknown(t *testing.T) {
	t.Parallel()
	tg := startTarget(t, newEnv(t), conformance.Settings{}, nil)
	q := tg.App()
	if _, err := q.session(kittest.Context(t, 30*time.Second)); err != nil {
		t.Fatal(err)
	}
	tasks := []queue.NewTask{{ID: uuid.NewString(), Kind: "t", Payload: json.RawMessage(`{}`), EnqueuedAt: time.Now()}}
	if err := records.InsertTasks(kittest.Context(t, 10*time.Second), tg.pool, tasks); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	err := q.publishRecorded(ctx, tasks)
	req := httptest.NewRequest(http.MethodPost, "/tasks", nil)
	if got := httpapi.KindOf(req, err); got != httpapi.KindUnknown {
		t.Fatalf("publish past its deadline after the record: %v, kind %q, want %q", err, got, httpapi.KindUnknown)
	}
	rec := httptest.NewRecorder()
	httpapi.WriteError(rec, req, err)
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), tasks[0].ID) ||
		rec.Header().Get(httpapi.KindHeader) != string(httpapi.KindUnknown) {
		t.Errorf("answer %d %s %v, want 503 of kind unknown naming %s", rec.Code, rec.Body, rec.Header(), tasks[0].ID)
	}
}
