package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	logc "github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/log"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// Features declares what a side of the log pair cannot do. Both sides
// pass every test today, so it has no flags yet; a gap found later becomes
// a field here, and the tests that need it skip naming the field.
type Features struct{}

// Target is one running instance of a service under the suite (see
// kittest.Target). Each NewTarget call gets state of its own (a schema, a
// slot or a topic and group), so subtests run in parallel.
//
// Restart stops the instance gracefully (HTTP drain, consumer stop with
// its position confirmed) and starts a new one on the same schema and
// slot or topic/group. Crash stops it as a consumer killed before it
// confirmed its position would (no-kafka: the replication connection
// closed without a final standby status; kafka: the group's committed
// offsets rewound to the start, as if never committed), then starts a new
// one: everything since the last confirmation is redelivered.
type Target interface {
	kittest.Target
	// HoldDeliveries stops the consumer from recording deliveries (its
	// next record blocks) until release is called or the test ends; reads
	// and appends go on. The suite's 408 check uses it to have an event
	// that exists but cannot be delivered yet. release is safe to call
	// more than once.
	HoldDeliveries(t testing.TB) (release func())
}

// NewTarget starts a fresh instance for one test and stops it when the
// test ends.
type NewTarget func(t testing.TB) Target

// waitTimeout bounds each wait in the suite: generous, for a loaded
// 2-core machine.
const waitTimeout = 60 * time.Second

// Run is the log pair's conformance suite. Both services' tests call it
// with their side's Features and NewTarget. Every subtest runs in parallel
// on its own target.
func Run(t *testing.T, _ Features, newTarget NewTarget) {
	kittest.ValidateOpenAPI(t, kittest.NewOpenAPI(t, logc.OpenAPI, "DELETE /events"))
	t.Run("WriteGetWait", func(t *testing.T) { t.Parallel(); testWriteGetWait(t, newTarget(t)) })
	t.Run("BadInput", func(t *testing.T) { t.Parallel(); testBadInput(t, newTarget(t)) })
	t.Run("HostileValues", func(t *testing.T) { t.Parallel(); testHostileValues(t, newTarget(t)) })
	t.Run("Batch1000ArrivesWhole", func(t *testing.T) { t.Parallel(); testBatch(t, newTarget(t)) })
	t.Run("OrderingPerKey", func(t *testing.T) { t.Parallel(); testOrdering(t, newTarget(t)) })
	t.Run("CrashRedeliversObservedOnce", func(t *testing.T) { t.Parallel(); testCrash(t, newTarget(t)) })
	t.Run("RestartMidStreamLosesNothing", func(t *testing.T) { t.Parallel(); testRestart(t, newTarget(t)) })
}

// Post writes one event and returns it.
func Post(t testing.TB, base string, e logc.NewEvent) logc.Created {
	t.Helper()
	var c logc.Created
	if s, _ := kittest.Do(t, http.MethodPost, base+"/events", e, &c); s != http.StatusCreated || c.ID == "" || c.CreatedAt.IsZero() {
		t.Fatalf("POST /events: %d %+v", s, c)
	}
	return c
}

// PostDelivered posts e, then waits until the consumer has delivered it.
func PostDelivered(t testing.TB, base string, e logc.NewEvent) logc.Created {
	t.Helper()
	c := Post(t, base, e)
	WaitDelivered(t, base, c.ID)
	return c
}

// PostBatch writes a batch and returns its events in order.
func PostBatch(t testing.TB, base string, events []logc.NewEvent) []logc.Created {
	t.Helper()
	var c logc.BatchCreated
	if s, _ := kittest.Do(t, http.MethodPost, base+"/events/batch", logc.Batch{Events: events}, &c); s != http.StatusCreated || len(c.Events) != len(events) {
		t.Fatalf("POST /events/batch: %d, %d events back, want %d", s, len(c.Events), len(events))
	}
	return c.Events
}

// WaitDelivered waits until the event is delivered and returns it.
func WaitDelivered(t testing.TB, base, id string) logc.Event {
	t.Helper()
	var e logc.Event
	s, _ := kittest.Do(t, http.MethodGet, base+"/events/"+id+"/wait?timeout="+waitTimeout.String(), nil, &e)
	if s != http.StatusOK || e.DeliveredAt == nil || e.DeliveryMS == nil || e.DeliverySeq == nil {
		t.Fatalf("wait %s: %d %+v (not delivered within %v)", id, s, e, waitTimeout)
	}
	return e
}

// Get reads an event.
func Get(t testing.TB, base, id string) logc.Event {
	t.Helper()
	var e logc.Event
	if s, _ := kittest.Do(t, http.MethodGet, base+"/events/"+id, nil, &e); s != http.StatusOK {
		t.Fatalf("GET /events/%s: %d", id, s)
	}
	return e
}

// Consumer reads GET /consumer.
func Consumer(t testing.TB, base string) logc.ConsumerStatus {
	t.Helper()
	var c logc.ConsumerStatus
	if s, _ := kittest.Do(t, http.MethodGet, base+"/consumer", nil, &c); s != http.StatusOK {
		t.Fatalf("GET /consumer: %d %+v", s, c)
	}
	return c
}

func events(n int, keys ...string) []logc.NewEvent {
	out := make([]logc.NewEvent, n)
	for i := range out {
		out[i] = logc.NewEvent{Type: "test.event", Key: keys[i%len(keys)], Payload: json.RawMessage(fmt.Sprintf(`{"n": %d}`, i))}
	}
	return out
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

	var raw map[string]any
	if s, _ := kittest.Do(t, http.MethodGet, base+"/stats", nil, &raw); s != 200 {
		t.Fatalf("/stats: %d", s)
	}
	counters, _ := raw["counters"].(map[string]any)
	latencies, _ := raw["latencies"].(map[string]any)
	for _, n := range logc.Counters {
		if _, ok := counters[n]; !ok {
			t.Errorf("/stats counters lack %q: %v", n, counters)
		}
	}
	if counters[logc.StatWritten].(float64) < 2 || counters[logc.StatDelivered].(float64) < 2 {
		t.Errorf("/stats counters %v, want written and delivered ≥ 2", counters)
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

func testBadInput(t *testing.T, tg Target) {
	base := tg.URL()
	cases := []struct {
		name, method, path, ctype, body string
		status                          int
		contains                        string
	}{
		{"no type", "POST", "/events", "", `{"key": "k"}`, 400, "type is required"},
		{"no key", "POST", "/events", "", `{"type": "t"}`, 400, "key is required"},
		{"payload array", "POST", "/events", "", `{"type": "t", "key": "k", "payload": [1]}`, 400, "payload must be a JSON object"},
		{"payload string", "POST", "/events", "", `{"type": "t", "key": "k", "payload": "x"}`, 400, "payload must be a JSON object"},
		{"id from client", "POST", "/events", "", `{"type": "t", "key": "k", "id": "x"}`, 400, "unknown field"},
		{"type not string", "POST", "/events", "", `{"type": 5, "key": "k"}`, 400, "must be a string"},
		{"long key", "POST", "/events", "", `{"type": "t", "key": "` + strings.Repeat("k", 201) + `"}`, 400, "longer than 200"},
		{"malformed", "POST", "/events", "", `{"type": `, 400, "malformed JSON"},
		{"empty body", "POST", "/events", "", ``, 400, "empty"},
		{"content type", "POST", "/events", "text/plain", `{"type": "t", "key": "k"}`, 415, "Content-Type"},
		{"oversize", "POST", "/events", "", `{"type": "t", "key": "k", "payload": {"x": "` + strings.Repeat("x", 2<<20) + `"}}`, 413, "limit"},
		{"empty batch", "POST", "/events/batch", "", `{"events": []}`, 400, "1 to 1000"},
		{"no events", "POST", "/events/batch", "", `{}`, 400, "1 to 1000"},
		{"bad element", "POST", "/events/batch", "", `{"events": [{"type": "t", "key": "k"}, {"type": "t"}]}`, 400, "events[1].key is required"},
		{"malformed id", "GET", "/events/nope", "", ``, 404, "nope"},
		{"unknown id", "GET", "/events/01890000-0000-7000-8000-000000000000", "", ``, 404, "not found"},
		{"wait unknown id", "GET", "/events/01890000-0000-7000-8000-000000000000/wait?timeout=1s", "", ``, 404, "not found"},
		{"wait bad timeout", "GET", "/events/01890000-0000-7000-8000-000000000000/wait?timeout=abc", "", ``, 400, "timeout"},
		{"wait negative timeout", "GET", "/events/01890000-0000-7000-8000-000000000000/wait?timeout=-1s", "", ``, 400, "timeout"},
		{"wait long timeout is clamped", "GET", "/events/01890000-0000-7000-8000-000000000000/wait?timeout=2h", "", ``, 404, "not found"},
		{"wrong method", "DELETE", "/events", "", ``, 405, "not allowed"},
		// What Postgres text/jsonb cannot store is the client's 400, not a 5xx.
		{"NUL in type", "POST", "/events", "", `{"type": "a\u0000b", "key": "k"}`, 400, "type must not contain U+0000"},
		{"NUL in key", "POST", "/events", "", `{"type": "t", "key": "k\u0000"}`, 400, "key must not contain U+0000"},
		{"NUL in payload", "POST", "/events", "", `{"type": "t", "key": "k", "payload": {"x": "a\u0000"}}`, 400, "\\u0000"},
		{"NUL in payload key", "POST", "/events", "", `{"type": "t", "key": "k", "payload": {"\u0000": 1}}`, 400, "\\u0000"},
		{"lone high surrogate", "POST", "/events", "", `{"type": "t", "key": "k", "payload": {"x": "\ud800"}}`, 400, "unpaired UTF-16 surrogate"},
		{"high surrogate then letter", "POST", "/events", "", `{"type": "t", "key": "k", "payload": {"x": "\ud800\u0041"}}`, 400, "unpaired UTF-16 surrogate"},
		{"lone low surrogate", "POST", "/events", "", `{"type": "t", "key": "k", "payload": {"x": "a\uDC00"}}`, 400, "unpaired UTF-16 surrogate"},
		{"surrogate in batch", "POST", "/events/batch", "", `{"events": [{"type": "t", "key": "k"}, {"type": "t", "key": "k", "payload": {"\ud83d": 1}}]}`, 400, "events[1].payload has an unpaired"},
	}
	var big strings.Builder
	big.WriteString(`{"events": [`)
	for i := range logc.MaxBatch + 1 {
		if i > 0 {
			big.WriteString(",")
		}
		big.WriteString(`{"type": "t", "key": "k"}`)
	}
	big.WriteString(`]}`)
	cases = append(cases, struct {
		name, method, path, ctype, body string
		status                          int
		contains                        string
	}{"batch too big", "POST", "/events/batch", "", big.String(), 400, "at most 1000"})
	for _, c := range cases {
		var send any // no body at all when c.body is empty
		if c.body != "" {
			send = c.body
		}
		req := kittest.NewRequest(t, c.method, base+c.path, send)
		if c.ctype != "" {
			req.Header.Set("Content-Type", c.ctype)
		}
		resp, raw := kittest.Send(t, req)
		var body map[string]any
		err := json.Unmarshal(raw, &body)
		msg, _ := body["error"].(string)
		if err != nil || resp.StatusCode != c.status || !strings.Contains(msg, c.contains) {
			t.Errorf("%s: %d %v (decode err %v), want %d with an error containing %q", c.name, resp.StatusCode, body, err, c.status, c.contains)
		}
	}
	// Escapes that only look like the refused ones are accepted and kept:
	// an escaped backslash before "u0000" is the six characters \u0000,
	// and a surrogate pair is one character.
	odd := Post(t, base, logc.NewEvent{Type: "t", Key: "k", Payload: json.RawMessage(`{"x": "\\u0000", "y": "\\\\\ud83d\ude00"}`)})
	var got struct{ X, Y string }
	if err := json.Unmarshal(Get(t, base, odd.ID).Payload, &got); err != nil || got.X != `\u0000` || got.Y != "\\\\\U0001F600" {
		t.Errorf("escaped backslash / surrogate pair payload came back as %+v (%v)", got, err)
	}
	// 408: an event that exists but is not delivered when the wait gives
	// up. The target holds the consumer's delivery record, so the event
	// cannot be delivered until it is released: the answer does not race
	// the consumer, however loaded the machine.
	release := tg.HoldDeliveries(t)
	held := Post(t, base, logc.NewEvent{Type: "t", Key: "held"})
	var timedOut map[string]any
	if s, _ := kittest.Do(t, http.MethodGet, base+"/events/"+held.ID+"/wait?timeout=1ms", nil, &timedOut); s != http.StatusRequestTimeout {
		t.Errorf("wait?timeout=1ms for an event whose delivery is held: %d %v, want 408", s, timedOut)
	} else if msg, _ := timedOut["error"].(string); !strings.Contains(msg, "not delivered within 1ms") {
		t.Errorf("408 body: %v, want the 1ms asked for named", timedOut)
	}
	release()
	// Released, the consumer records it: nothing was lost while held.
	WaitDelivered(t, base, held.ID)
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

// checkOrder checks that, per key, events were observed in write order.
func checkOrder(t testing.TB, base string, written []logc.Created, keys []string) {
	t.Helper()
	last := map[string]int64{}
	for i, c := range written {
		e := WaitDelivered(t, base, c.ID)
		k := keys[i]
		if prev, ok := last[k]; ok && *e.DeliverySeq <= prev {
			t.Errorf("key %s: event %d (%s) observed at seq %d, after an earlier write observed at %d", k, i, c.ID, *e.DeliverySeq, prev)
		}
		last[k] = *e.DeliverySeq
	}
}

func testOrdering(t *testing.T, tg Target) {
	base := tg.URL()
	keyset := []string{"order-1", "order-2", "order-3"}
	var written []logc.Created
	var keys []string
	for i := range 30 {
		k := keyset[i%3]
		written = append(written, Post(t, base, logc.NewEvent{Type: "step", Key: k, Payload: json.RawMessage(fmt.Sprintf(`{"i": %d}`, i))}))
		keys = append(keys, k)
	}
	batch := events(60, keyset...)
	written = append(written, PostBatch(t, base, batch)...)
	for _, e := range batch {
		keys = append(keys, e.Key)
	}
	checkOrder(t, base, written, keys)
}

func testCrash(t *testing.T, tg Target) {
	// One key: on Kafka one partition, so the redelivered events come
	// back before the event written after the crash.
	created := PostBatch(t, tg.URL(), events(20, "crash"))
	before := map[string]logc.Event{}
	for _, c := range created {
		before[c.ID] = WaitDelivered(t, tg.URL(), c.ID)
	}
	tg.Crash(t)
	base := tg.URL()
	after := Post(t, base, logc.NewEvent{Type: "after.crash", Key: "crash"})
	WaitDelivered(t, base, after.ID)
	st := Consumer(t, base)
	if st.Duplicates < 1 {
		t.Errorf("after the crash nothing was redelivered (duplicates %d): the test proves nothing", st.Duplicates)
	}
	if st.Delivered != 1 {
		t.Errorf("the new instance delivered %d events for the first time, want 1 (only the event written after the crash)", st.Delivered)
	}
	t.Logf("redelivered after crash: %d duplicates absorbed", st.Duplicates)
	for id, b := range before {
		a := Get(t, base, id)
		if a.DeliveredAt == nil || !a.DeliveredAt.Equal(*b.DeliveredAt) || *a.DeliverySeq != *b.DeliverySeq {
			t.Errorf("event %s applied twice: delivered %v seq %d before, %v seq %v after", id, b.DeliveredAt, *b.DeliverySeq, a.DeliveredAt, a.DeliverySeq)
		}
	}
}

func testRestart(t *testing.T, tg Target) {
	var written []logc.Created
	var keys []string
	batch := events(500, "r1", "r2")
	written = append(written, PostBatch(t, tg.URL(), batch)...)
	for _, e := range batch {
		keys = append(keys, e.Key)
	}
	// Restart while the consumer is (most likely) still reading the batch.
	tg.Restart(t)
	for i := range 20 {
		k := []string{"r1", "r2"}[i%2]
		written = append(written, Post(t, tg.URL(), logc.NewEvent{Type: "after.restart", Key: k}))
		keys = append(keys, k)
	}
	tg.Restart(t)
	checkOrder(t, tg.URL(), written, keys)
}

// MeasureDelivery is the benchmark body both services share: b.N times,
// write one event and wait until the consumer observed it, one at a time
// (the reference's "wait for completion"). It reports the delivery
// latency (created_at → observed) percentiles as ms metrics.
func MeasureDelivery(b *testing.B, base string) {
	b.Helper()
	var ms []float64
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		c := Post(b, base, logc.NewEvent{Type: "bench", Key: fmt.Sprintf("k%d", i%16)})
		e := WaitDelivered(b, base, c.ID)
		ms = append(ms, *e.DeliveryMS)
	}
	b.StopTimer()
	if len(ms) == 0 {
		return
	}
	slices.Sort(ms)
	b.ReportMetric(ms[len(ms)/2], "p50-delivery-ms")
	b.ReportMetric(ms[len(ms)*95/100], "p95-delivery-ms")
}

// Blocked is a Postgres-side outage for a consumer that is cheap to start
// and end: a transaction holding an ACCESS EXCLUSIVE lock on the schema's
// deliveries table, so every Deliver waits until Release (or fails on its
// own timeout). Reads of messages are not blocked.
type Blocked struct {
	t       testing.TB
	pool    *pgxpool.Pool
	release func()
}

// BlockDeliveries starts the outage on schema; it ends at Release or when
// the test ends.
func BlockDeliveries(t testing.TB, url, schema string) *Blocked {
	t.Helper()
	pool := kittest.Pool(t, url, schema)
	return &Blocked{t: t, pool: pool, release: lockDeliveries(t, pool, "ACCESS EXCLUSIVE")}
}

// lockDeliveries locks the deliveries table of pool's schema in mode, in
// a transaction that the returned release (safe twice, also run when the
// test ends) rolls back.
func lockDeliveries(t testing.TB, pool *pgxpool.Pool, mode string) (release func()) {
	t.Helper()
	ctx := kittest.Context(t, 30*time.Second)
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `LOCK TABLE deliveries IN `+mode+` MODE`); err != nil {
		t.Fatal(err)
	}
	release = sync.OnceFunc(func() { _ = tx.Rollback(context.Background()) })
	t.Cleanup(release)
	return release
}

// Release ends the outage. Safe to call twice.
func (b *Blocked) Release() { b.release() }

// Waiter identifies one statement waiting for the lock.
type Waiter struct {
	PID   int
	Start time.Time
}

// WaitForWaiter waits until a statement other than not waits for the lock
// (a consumer's Deliver attempt) and returns it.
func (b *Blocked) WaitForWaiter(d time.Duration, what string, not Waiter) Waiter {
	b.t.Helper()
	var w Waiter
	kittest.Eventually(b.t, d, what, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := b.pool.QueryRow(ctx, `
			SELECT a.pid, a.query_start FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
			WHERE NOT l.granted AND l.relation = 'deliveries'::regclass
			ORDER BY a.query_start DESC LIMIT 1`).Scan(&w.PID, &w.Start)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			b.t.Fatal(err)
		}
		return err == nil && w != not
	})
	return w
}
