// Helpers shared by every area, and by the sides' own tests: the subtest
// table, writes, reads and waits (also per group), the delivery benchmark
// and the lock that blocks deliveries.

package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	logc "github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/log"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// waitTimeout bounds each wait in the suite: generous, for a loaded
// 2-core machine.
const waitTimeout = 60 * time.Second

// test is one named subtest of the suite.
type test = struct {
	Name string
	Fn   func(t *testing.T, tg Target)
}

// runTests runs tests as parallel subtests of t, each on a target of its
// own.
func runTests(t *testing.T, newTarget NewTarget, tests []test) {
	kittest.RunParallel(t, tests, func(t *testing.T, fn func(*testing.T, Target)) { fn(t, newTarget(t)) })
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

// getOK reads GET base+path into a T, failing t unless the answer is 200.
func getOK[T any](t testing.TB, base, path string) T {
	t.Helper()
	var v T
	if s, raw := kittest.Do(t, http.MethodGet, base+path, nil, &v); s != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, s, raw)
	}
	return v
}

// Get reads an event.
func Get(t testing.TB, base, id string) logc.Event {
	t.Helper()
	return getOK[logc.Event](t, base, "/events/"+id)
}

// Consumer reads GET /consumer.
func Consumer(t testing.TB, base string) logc.ConsumerStatus {
	t.Helper()
	return getOK[logc.ConsumerStatus](t, base, "/consumer")
}

func events(n int, keys ...string) []logc.NewEvent {
	out := make([]logc.NewEvent, n)
	for i := range out {
		out[i] = logc.NewEvent{Type: "test.event", Key: keys[i%len(keys)], Payload: json.RawMessage(fmt.Sprintf(`{"n": %d}`, i))}
	}
	return out
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

// PutGroup creates or finds a group and returns the status.
func PutGroup(t testing.TB, base, name, from string) int {
	t.Helper()
	s, raw := kittest.Do(t, http.MethodPut, base+"/groups/"+name, logc.GroupSpec{From: from}, nil)
	if s != http.StatusCreated && s != http.StatusOK {
		t.Fatalf("PUT /groups/%s from %s: %d %s", name, from, s, raw)
	}
	return s
}

// Groups reads GET /groups.
func Groups(t testing.TB, base string) logc.GroupList {
	t.Helper()
	return getOK[logc.GroupList](t, base, "/groups")
}

// findGroup returns the group named name in l.
func findGroup(l logc.GroupList, name string) (logc.Group, bool) {
	for _, g := range l.Groups {
		if g.Name == name {
			return g, true
		}
	}
	return logc.Group{}, false
}

// WaitDeliveredTo waits until the event is delivered to group.
func WaitDeliveredTo(t testing.TB, base, group, id string) logc.Event {
	t.Helper()
	var e logc.Event
	s, raw := kittest.Do(t, http.MethodGet, base+"/events/"+id+"/wait?group="+group+"&timeout="+waitTimeout.String(), nil, &e)
	if s != http.StatusOK || e.DeliveredAt == nil || e.DeliverySeq == nil {
		t.Fatalf("wait %s for group %s: %d %s (not delivered within %v)", id, group, s, raw, waitTimeout)
	}
	return e
}

// getIn reads an event as group received it.
func getIn(t testing.TB, base, group, id string) logc.Event {
	t.Helper()
	return getOK[logc.Event](t, base, "/events/"+id+"?group="+group)
}

// checkGroupOnce waits for every event of written in group and checks
// each was delivered once, per key in write order (the group's
// delivery_seq increases along each key).
func checkGroupOnce(t testing.TB, base, group string, written []logc.Created, keys []string) map[string]logc.Event {
	t.Helper()
	got := map[string]logc.Event{}
	seqs := map[int64]string{}
	last := map[string]int64{}
	for i, c := range written {
		e := WaitDeliveredTo(t, base, group, c.ID)
		if other, dup := seqs[*e.DeliverySeq]; dup {
			t.Errorf("group %s: delivery_seq %d given to %s and %s", group, *e.DeliverySeq, other, c.ID)
		}
		seqs[*e.DeliverySeq] = c.ID
		if prev, ok := last[keys[i]]; ok && *e.DeliverySeq <= prev {
			t.Errorf("group %s, key %s: event %d observed at seq %d, after an earlier write observed at %d", group, keys[i], i, *e.DeliverySeq, prev)
		}
		last[keys[i]] = *e.DeliverySeq
		got[c.ID] = e
	}
	return got
}
