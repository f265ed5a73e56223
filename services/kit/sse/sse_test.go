package sse_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/sse"
)

// TestWriterAndReader: headers wait for the first event (a comment
// before it writes nothing), events carry their id and JSON data, and
// the Reader reads back what the Writer wrote, comments skipped.
func TestWriterAndReader(t *testing.T) {
	rec := httptest.NewRecorder()
	w := sse.NewWriter(rec, httptest.NewRequest("GET", "/", nil), 0)
	if err := w.Comment("early"); err != nil || rec.Body.Len() != 0 || w.Started() {
		t.Fatalf("a comment before the first event: %v, %q", err, rec.Body.String())
	}
	if err := w.Send("open", "", map[string]string{"token": "t0"}); err != nil {
		t.Fatal(err)
	}
	if err := w.Comment("heartbeat"); err != nil {
		t.Fatal(err)
	}
	if err := w.Send("change", "7-1", map[string]int{"n": 1}); err != nil {
		t.Fatal(err)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "text/event-stream" || !w.Started() || w.Timeout() != sse.DefaultSendTimeout {
		t.Errorf("Content-Type %q, started %v, timeout %v", ct, w.Started(), w.Timeout())
	}
	r := sse.NewReader(strings.NewReader(rec.Body.String()))
	for _, want := range []sse.Message{{Event: "open", Data: `{"token":"t0"}`}, {Event: "change", ID: "7-1", Data: `{"n":1}`}} {
		if m, err := r.Next(); err != nil || m != want {
			t.Errorf("read %+v (%v), want %+v", m, err, want)
		}
	}
}

// TestFinish: a stream that never started answers its source's error, or
// a 503 for a stream ended by shutdown; one that started reports a
// failure in-band as an "error" event and answers nothing more.
func TestFinish(t *testing.T) {
	req := httptest.NewRequest("GET", "/", nil)
	ctx := context.Background()
	bad := httpapi.BadRequest("bad token")
	w := sse.NewWriter(httptest.NewRecorder(), req, 0)
	if _, err := w.Finish(ctx, req, bad, sse.Ending{What: "stream"}); !errors.Is(err, bad) {
		t.Errorf("not started, source failed: %v, want the source's error", err)
	}
	if _, err := w.Finish(ctx, req, nil, sse.Ending{What: "stream"}); httpapi.StatusOf(err) != http.StatusServiceUnavailable {
		t.Errorf("not started, ended by shutdown: %v, want a 503", err)
	}
	rec := httptest.NewRecorder()
	w = sse.NewWriter(rec, req, 0)
	_ = w.Send("open", "", map[string]string{})
	dropped, err := w.Finish(ctx, req, errors.New("backend gone"), sse.Ending{What: "stream", ErrorData: map[string]string{"error": "resume"}})
	if dropped || err != nil || !strings.HasSuffix(rec.Body.String(), "event: error\ndata: {\"error\":\"resume\"}\n\n") {
		t.Errorf("started, source failed: dropped %v, %v, body %q", dropped, err, rec.Body.String())
	}
}
