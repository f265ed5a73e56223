package main

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config/configtest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/eventstore"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/eventstore/conformance"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service/servicetest"
)

// running is one in-process service, stopped at the test's end.
type running = kittest.Instance[*store]

// start builds and starts the service on schema with a fallback poll of
// poll (again on each Restart); extra variables override the defaults.
func start(t testing.TB, schema string, poll time.Duration, extra ...map[string]string) *running {
	t.Helper()
	env := map[string]string{
		"DATABASE_URL": kittest.PostgresURL(t), "DATABASE_SCHEMA": schema,
		"DATABASE_MAX_CONNS": "8", "POLL_INTERVAL": poll.String(), "SHUTDOWN_TIMEOUT": "10s",
	}
	// NOTIFY_MODE in the test process's environment applies to every
	// instance whose test does not set it: `NOTIFY_MODE=commit go test
	// ./...` runs the suite in the other mode.
	if mode := os.Getenv("NOTIFY_MODE"); mode != "" {
		env["NOTIFY_MODE"] = mode
	}
	for _, e := range extra {
		maps.Copy(env, e)
	}
	return kittest.StartInstance(t, func(t testing.TB) (*store, *service.Service) {
		return servicetest.Assembled(t, readConfig, assemble, env)
	})
}

// subscribed starts the service on a schema of the test's own with a
// fallback poll of poll, subscribes from the start and waits for the
// empty store's caught-up. It returns the service, a pool on its schema
// and the subscription.
func subscribed(t testing.TB, poll time.Duration) (*running, *pgxpool.Pool, <-chan eventstore.SSEMessage) {
	t.Helper()
	url := kittest.PostgresURL(t)
	schema := kittest.Schema(t, url)
	r := start(t, schema, poll)
	return r, kittest.Pool(t, url, schema), subscribeEmpty(t, r.URL())
}

// subscribeEmpty subscribes to the empty store at base from the start and
// waits for its caught-up.
func subscribeEmpty(t testing.TB, base string) <-chan eventstore.SSEMessage {
	t.Helper()
	sub := sse(t, base, "")
	if m := nextMsg(t, sub, "catch-up of an empty store"); m.Event != "caught-up" {
		t.Fatalf("first message %+v, want caught-up", m)
	}
	return sub
}

// TestConformance runs the event store suite against no-kurrentdb.
func TestConformance(t *testing.T) {
	t.Parallel()
	features := conformance.Features{ConditionalAppend: true, ServerSideStreamRead: true, PushSubscription: true}
	conformance.Run(t, features, func(t testing.TB) conformance.Target {
		r := start(t, kittest.Schema(t, kittest.PostgresURL(t)), time.Second)
		return &servicetest.Target[*store]{Service: "no-kurrentdb", Backend: "postgres", Instance: r}
	})
}

// TestSlowSubscriberIsDroppedAndResumes: a subscriber that stops reading
// is dropped at WRITE_TIMEOUT and Last-Event-ID resumes exactly after the
// last event it received.
func TestSlowSubscriberIsDroppedAndResumes(t *testing.T) {
	t.Parallel()
	r := start(t, kittest.Schema(t, kittest.PostgresURL(t)), time.Second, map[string]string{"WRITE_TIMEOUT": "2s"})
	tg := &servicetest.Target[*store]{Service: "no-kurrentdb", Backend: "postgres", Instance: r}
	conformance.SlowSubscriberIsDroppedAndResumes(t, tg, 2*time.Second)
}

// sse opens GET /subscribe and returns a channel of its messages.
func sse(t testing.TB, base, from string) <-chan eventstore.SSEMessage {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/subscribe?from="+from, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("subscribe: %v %v", resp, err)
	}
	msgs, _ := kittest.ReadEvents(resp.Body)
	return msgs
}

func nextMsg(t testing.TB, ch <-chan eventstore.SSEMessage, what string) eventstore.SSEMessage {
	t.Helper()
	select {
	case m, ok := <-ch:
		if !ok {
			t.Fatalf("%s: subscription ended", what)
		}
		return m
	case <-time.After(60 * time.Second):
		t.Fatalf("%s: nothing within 60s", what)
	}
	return eventstore.SSEMessage{}
}

// awaitEvent reads the subscription until an event whose data contains
// text arrives, skipping the rest, and fails the test (naming what) if
// none arrives within 60 s of the previous message.
func awaitEvent(t testing.TB, ch <-chan eventstore.SSEMessage, what, text string) {
	t.Helper()
	for {
		if m := nextMsg(t, ch, what); m.Event == "event" && strings.Contains(m.Data, text) {
			return
		}
	}
}

// TestGapLoss makes two transactions commit out of order. Transaction A
// inserts first (lower global_pos) but commits after B. A reader moving a
// naive "global_pos > checkpoint" cursor reads B, moves past A's number,
// and never sees A: the event is lost. The service's (xid, global_pos)
// cursor below the xid watermark delivers neither until A ends, then both.
func TestGapLoss(t *testing.T) {
	t.Parallel()
	r, pool, sub := subscribed(t, time.Second)
	ctx := kittest.Context(t, 2*time.Minute)

	const ins = `INSERT INTO events (stream_id, version, event_type, data) VALUES ($1, 0, 'OxygenAdded', '{"liters":1}') RETURNING global_pos`
	txA, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer txA.Rollback(context.Background())
	var posA, posB int64
	if err := txA.QueryRow(ctx, ins, "tank-gap-a").Scan(&posA); err != nil {
		t.Fatal(err)
	}
	txB, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := txB.QueryRow(ctx, ins, "tank-gap-b").Scan(&posB); err != nil {
		t.Fatal(err)
	}
	if err := txB.Commit(ctx); err != nil { // B commits first...
		t.Fatal(err)
	}
	if posA >= posB {
		t.Fatalf("setup: A got global_pos %d, B %d; want A < B", posA, posB)
	}

	// The naive reader polls now: it sees B (A is not visible yet) and
	// moves its checkpoint to B's number.
	naive := func(after int64) []int64 {
		rows, err := pool.Query(ctx, `SELECT global_pos FROM events WHERE global_pos > $1 ORDER BY global_pos`, after)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []int64
		for rows.Next() {
			var p int64
			_ = rows.Scan(&p)
			out = append(out, p)
		}
		return out
	}
	naiveSeen := naive(0)
	if len(naiveSeen) != 1 || naiveSeen[0] != posB {
		t.Fatalf("naive first poll saw %v, want only B (%d)", naiveSeen, posB)
	}
	checkpoint := naiveSeen[0]

	// The service's cursor sees nothing yet: B's xid is above the
	// watermark that open transaction A holds down.
	w, err := r.App().watermark(ctx)
	if err != nil {
		t.Fatal(err)
	}
	evs, _, _, err := r.App().page(ctx, cursor{}, w, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 0 {
		t.Fatalf("the watermark cursor read %d events while an older transaction was open; want 0", len(evs))
	}

	if err := txA.Commit(ctx); err != nil { // ...A commits second.
		t.Fatal(err)
	}

	// A's commit has lifted the watermark, but the subscription's question
	// "is anything committed left behind?" must be asked with the watermark
	// its read used: B was not read, so it is pending. (With a new snapshot
	// B would sit below the new watermark, count as neither read nor
	// pending, and caught-up would be sent before B.)
	if p, err := r.App().pending(ctx, cursor{}, w, nil); err != nil || !p {
		t.Fatalf("pending after A's commit with the read's watermark = %v, %v; want true", p, err)
	}

	// The naive reader polls again from its checkpoint: A is gone for good.
	after := naive(checkpoint)
	naiveSeen = append(naiveSeen, after...)
	lost := true
	for _, p := range naiveSeen {
		if p == posA {
			lost = false
		}
	}
	if !lost {
		t.Fatalf("the naive cursor saw A (%d): the gap did not occur (%v)", posA, naiveSeen)
	}
	t.Logf("naive global_pos cursor delivered %v and lost global_pos %d forever", naiveSeen, posA)

	// The service delivers both, live, through the SSE subscription.
	got := map[int64]bool{}
	for len(got) < 2 {
		m := nextMsg(t, sub, "live events after the gap")
		if m.Event != "event" {
			continue
		}
		var e eventstore.RecordedEvent
		if err := json.Unmarshal([]byte(m.Data), &e); err != nil {
			t.Fatal(err)
		}
		if got[e.GlobalPosition] {
			t.Fatalf("global_pos %d delivered twice", e.GlobalPosition)
		}
		got[e.GlobalPosition] = true
	}
	if !got[posA] || !got[posB] {
		t.Fatalf("the service delivered %v, want A (%d) and B (%d)", got, posA, posB)
	}
}

// TestListenerReconnects kills the LISTEN connection with
// pg_terminate_backend. The fallback poll is set to an hour, so a live
// event can only arrive through a notification on the listener's new
// connection.
func TestListenerReconnects(t *testing.T) {
	t.Parallel()
	r, pool, sub := subscribed(t, time.Hour)
	ctx := kittest.Context(t, 2*time.Minute)
	pidOf := func() int {
		var pid int
		err := pool.QueryRow(ctx, `SELECT coalesce(max(pid), 0) FROM pg_stat_activity WHERE application_name = $1`, r.App().listener.appName).Scan(&pid)
		if err != nil {
			t.Fatal(err)
		}
		return pid
	}
	old := pidOf()
	if old == 0 {
		t.Fatal("no listener connection in pg_stat_activity")
	}
	if _, err := pool.Exec(ctx, `SELECT pg_terminate_backend($1)`, old); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if p := pidOf(); p != 0 && p != old {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the listener did not reconnect within 60s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	kittest.Eventually(t, 60*time.Second, "the listener to listen again", r.App().listener.ln.Listening)
	if r.App().listener.ln.Err() == nil {
		t.Error("the listener reports no loss after its connection was terminated")
	}
	body := `{"expected_version":"no_stream","events":[{"type":"OxygenAdded","data":{"liters":7}}]}`
	if s, raw := kittest.Do(t, http.MethodPost, r.URL()+"/streams/tank-reconnect-1/events", body, nil); s != 201 {
		t.Fatalf("append: %d %s", s, raw)
	}
	awaitEvent(t, sub, "live event after the listener reconnected", "tank-reconnect-1")
}

func TestConfigNamesBadVariables(t *testing.T) {
	t.Parallel()
	configtest.NamesBadVariables(t, readConfig, map[string]string{
		"POLL_INTERVAL": "1ms", "SUBSCRIBE_PAGE_SIZE": "0", "BACKEND_TIMEOUT": "soon", "DATABASE_LISTEN_URL": "mysql://x",
	}, "POLL_INTERVAL", "SUBSCRIBE_PAGE_SIZE", "BACKEND_TIMEOUT", "DATABASE_LISTEN_URL")
	if cfg := configtest.Defaults(t, readConfig); cfg.HTTP.Addr != "127.0.0.1:8090" || cfg.Postgres.Schema != "eventstore" || cfg.ListenURL != cfg.Postgres.URL {
		t.Errorf("defaults: %+v", cfg)
	}
}

// TestListenThroughPgBouncerFailsTheStart: live subscribers would wait for
// the fallback poll through pgbouncer, so the start refuses it.
func TestListenThroughPgBouncerFailsTheStart(t *testing.T) {
	t.Parallel()
	url := kittest.PostgresURL(t)
	servicetest.RefusesDeafListen(t, build, readConfig, map[string]string{"DATABASE_URL": url, "DATABASE_SCHEMA": kittest.Schema(t, url)})
}

// TestSubscriptionOrdersXidsAsNumbers: events whose xids differ in digit
// count (9 and 10, as the xid counter passing 9999 gives 9999 and 10000)
// are delivered in xid order, and a cursor on the first resumes with the
// second. Sorted as text, 10 came before 9, out of order, and a cursor
// left on the page's last row (9) delivered 10 again.
func TestSubscriptionOrdersXidsAsNumbers(t *testing.T) {
	t.Parallel()
	url := kittest.PostgresURL(t)
	schema := kittest.Schema(t, url)
	r := start(t, schema, time.Second)
	pool := kittest.Pool(t, url, schema)
	ctx := kittest.Context(t, time.Minute)
	// Explicit xids far below the watermark: both are final at once.
	if _, err := pool.Exec(ctx, `INSERT INTO events (stream_id, version, event_type, data, xid)
		VALUES ('tank-digits', 0, 'OxygenAdded', '{"liters":9}', '9'), ('tank-digits', 1, 'OxygenAdded', '{"liters":10}', '10')`); err != nil {
		t.Fatal(err)
	}
	var got []string
	sub := sse(t, r.URL(), "")
	for m := nextMsg(t, sub, "catch-up"); m.Event != "caught-up"; m = nextMsg(t, sub, "catch-up") {
		if m.Event == "event" {
			got = append(got, m.ID)
		}
	}
	if want := []string{"9:1", "10:2"}; !slices.Equal(got, want) {
		t.Fatalf("subscription from the start delivered %v, want %v (xid order)", got, want)
	}
	got = nil
	sub = sse(t, r.URL(), "9:1")
	for m := nextMsg(t, sub, "catch-up after 9:1"); m.Event != "caught-up"; m = nextMsg(t, sub, "catch-up after 9:1") {
		if m.Event == "event" {
			got = append(got, m.ID)
		}
	}
	if want := []string{"10:2"}; !slices.Equal(got, want) {
		t.Fatalf("subscription after 9:1 delivered %v, want %v", got, want)
	}
}
