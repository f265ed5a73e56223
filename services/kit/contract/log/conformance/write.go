// Area: writing. One event and a batch, read back and waited for, and
// /stats naming every counter and latency of the pair; an answer is at
// most its write.

package conformance

import (
	"bytes"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	logc "github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/log"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// runWrite checks writing one event and a batch, reading and waiting.
func runWrite(t *testing.T, newTarget NewTarget) {
	runTests(t, newTarget, []test{
		{"WriteGetWait", testWriteGetWait},
		{"Batch1000ArrivesWhole", testBatch},
		{"AnswerIsAtMostItsWrite", testAnswerBound},
	})
}

// testAnswerBound: GET /events/{id} answers an event's payload no longer
// than it was sent (Postgres's jsonb spacing is not kept; "<" is not
// written as a six-byte escape), plus the event's fixed fields: a few
// hundred KB stored never come back as megabytes.
func testAnswerBound(t *testing.T, tg Target) {
	base := tg.URL()
	// Sent as raw bytes: an encoder would escape the "<&>" itself.
	payload := json.RawMessage(`{"pad":"` + strings.Repeat("<&>", 100_000) + `","n":[1, 2, 3]}`)
	var c logc.Created
	body := `{"type":"order.created","key":"order-bound","payload":` + string(payload) + `}`
	if s, raw := kittest.Do(t, http.MethodPost, base+"/events", body, &c); s != http.StatusCreated {
		t.Fatalf("POST /events: %d %.200s", s, raw)
	}
	status, raw := kittest.Do(t, http.MethodGet, base+"/events/"+c.ID, nil, nil)
	if status != http.StatusOK {
		t.Fatalf("GET /events/%s: %d %.200s", c.ID, status, raw)
	}
	if limit := len(payload) + 1024; len(raw) > limit {
		t.Fatalf("GET /events/%s answered %d bytes for a payload of %d; the bound is the payload plus 1 KiB of fields", c.ID, len(raw), len(payload))
	}
	var e logc.Event
	if err := json.Unmarshal(raw, &e); err != nil {
		t.Fatal(err)
	}
	var got, want any
	if json.Unmarshal(e.Payload, &got) != nil || json.Unmarshal(payload, &want) != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("the payload came back changed: %.100s", e.Payload)
	}
}

func testWriteGetWait(t *testing.T, tg Target) {
	base := tg.URL()
	c := Post(t, base, logc.NewEvent{Type: "order.created", Key: "order-42", Payload: json.RawMessage(`{"total": 12.5, "items": ["a"]}`)})
	got := Get(t, base, c.ID)
	if got.ID != c.ID || got.Type != "order.created" || got.Key != "order-42" || !got.CreatedAt.Equal(c.CreatedAt) {
		t.Fatalf("GET returned %+v for %+v", got, c)
	}
	var payload map[string]any
	if err := json.Unmarshal(got.Payload, &payload); err != nil || payload["total"] != 12.5 {
		t.Fatalf("payload %s: %v", got.Payload, err)
	}
	e := WaitDelivered(t, base, c.ID)
	if *e.DeliveryMS < 0 || e.DeliveredAt.Before(e.CreatedAt) {
		t.Errorf("delivered before created: %+v", e)
	}
	if again := Get(t, base, c.ID); again.DeliveredAt == nil || !again.DeliveredAt.Equal(*e.DeliveredAt) {
		t.Errorf("GET after delivery: %+v", again)
	}
	// A payload-less event gets {}.
	bare := Post(t, base, logc.NewEvent{Type: "ping", Key: "k"})
	if e := WaitDelivered(t, base, bare.ID); string(e.Payload) != "{}" {
		t.Errorf("default payload %s, want {}", e.Payload)
	}

	// A side counts a delivery once it has recorded it, so the counter
	// may trail the delivered_at that WaitDelivered saw by a moment.
	var counters, latencies map[string]any
	counted := func() bool {
		var raw map[string]any
		if s, _ := kittest.Do(t, http.MethodGet, base+"/stats", nil, &raw); s != 200 {
			t.Fatalf("/stats: %d", s)
		}
		counters, _ = raw["counters"].(map[string]any)
		latencies, _ = raw["latencies"].(map[string]any)
		w, _ := counters[logc.StatWritten].(float64)
		d, _ := counters[logc.StatDelivered].(float64)
		return w >= 2 && d >= 2
	}
	deadline := time.Now().Add(5 * time.Second)
	for !counted() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	for _, n := range logc.Counters {
		if _, ok := counters[n]; !ok {
			t.Errorf("/stats counters lack %q: %v", n, counters)
		}
	}
	if !counted() {
		t.Errorf("/stats counters %v, want written and delivered ≥ 2 within 5 s of the deliveries", counters)
	}
	for _, n := range logc.Latencies {
		if l, _ := latencies[n].(map[string]any); l == nil || l["count"].(float64) < 1 {
			t.Errorf("/stats latency %q missing or empty: %v", n, latencies[n])
		}
	}
	st := Consumer(t, base)
	if !st.Running || st.Position == "" || st.Delivered < 2 || (st.LagUnit != "records" && st.LagUnit != "bytes") {
		t.Errorf("/consumer: %+v", st)
	}
	status, doc := kittest.Do(t, http.MethodGet, base+"/openapi.yaml", nil, nil)
	if status != 200 || !bytes.Contains(doc, []byte("openapi: 3.1")) {
		t.Errorf("/openapi.yaml: %d", status)
	}
}

func testBatch(t *testing.T, tg Target) {
	base := tg.URL()
	created := PostBatch(t, base, events(logc.MaxBatch, "a", "b", "c", "d"))
	seen := map[string]bool{}
	for i, c := range created {
		if seen[c.ID] {
			t.Fatalf("duplicate id %s in the batch answer", c.ID)
		}
		seen[c.ID] = true
		if i > 0 && c.CreatedAt.Before(created[i-1].CreatedAt) {
			t.Errorf("created_at not in request order at %d", i)
		}
	}
	WaitDelivered(t, base, created[len(created)-1].ID)
	// The whole transaction arrives: every event, once.
	seqs := map[int64]bool{}
	for _, c := range created {
		e := WaitDelivered(t, base, c.ID)
		if seqs[*e.DeliverySeq] {
			t.Fatalf("delivery_seq %d seen twice", *e.DeliverySeq)
		}
		seqs[*e.DeliverySeq] = true
	}
	if st := Consumer(t, base); st.Delivered < logc.MaxBatch {
		t.Errorf("/consumer delivered %d, want ≥ %d", st.Delivered, logc.MaxBatch)
	}
}
