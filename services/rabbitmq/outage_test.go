package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
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

// vhost is a RabbitMQ virtual host of the test's own: deleting it closes
// every connection to it and refuses new ones, a broker outage for this
// test's service alone (the broker stays up for the other tests).
type vhost struct {
	mgmt, name string
	client     *http.Client
}

func newVhost(t testing.TB) vhost {
	t.Helper()
	v := vhost{mgmt: kittest.Server(t, "RABBITMQ_MANAGEMENT_URL", "http://guest:guest@localhost:15672"),
		name: kittest.UniqueName(t, "vh"), client: &http.Client{Timeout: 10 * time.Second}}
	v.create(t)
	t.Cleanup(func() { v.call(t, http.MethodDelete, "/api/vhosts/"+url.PathEscape(v.name), "", true) })
	return v
}

func (v vhost) create(t testing.TB) {
	t.Helper()
	v.call(t, http.MethodPut, "/api/vhosts/"+url.PathEscape(v.name), "{}", false)
	v.call(t, http.MethodPut, "/api/permissions/"+url.PathEscape(v.name)+"/guest", `{"configure":".*","write":".*","read":".*"}`, false)
}

func (v vhost) call(t testing.TB, method, path, body string, quiet bool) {
	t.Helper()
	req, _ := http.NewRequest(method, v.mgmt+path, bytes.NewBufferString(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := v.client.Do(req)
	switch {
	case err != nil && !quiet:
		t.Fatalf("management API %s %s: %v", method, path, err)
	case err != nil:
	case resp.StatusCode/100 != 2 && !(quiet && resp.StatusCode == http.StatusNotFound):
		resp.Body.Close()
		t.Fatalf("management API %s %s: %d", method, path, resp.StatusCode)
	default:
		resp.Body.Close()
	}
}

// amqpURL is base (the stack's broker) on the vhost.
func (v vhost) amqpURL(base string) string {
	return strings.TrimSuffix(base, "/") + "/" + url.PathEscape(v.name)
}

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

	v.call(t, http.MethodDelete, "/api/vhosts/"+url.PathEscape(v.name), "", false)
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
