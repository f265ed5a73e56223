package log

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/ids"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/stats"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/waiter"
)

// countingRecords is the real *Records, counting the reads the long
// polls make of it.
type countingRecords struct {
	*Records
	gets, delivered atomic.Int64
}

func (c *countingRecords) Get(ctx context.Context, id string) (Event, error) {
	c.gets.Add(1)
	return c.Records.Get(ctx, id)
}

func (c *countingRecords) Delivered(ctx context.Context, ids []string) ([]string, error) {
	c.delivered.Add(1)
	return c.Records.Delivered(ctx, ids)
}

// noBackend takes no events: the test writes them itself.
type noBackend struct{}

func (noBackend) Append(context.Context, []NewEvent) ([]Created, error) {
	return nil, errors.New("not in this test")
}

func (noBackend) Consumer(context.Context) (ConsumerStatus, error) {
	return ConsumerStatus{}, errors.New("not in this test")
}

// TestEventWaitersShareTheirRereads: N concurrent GET /events/{id}/wait
// on undelivered events, against the real records, read once each and
// then make one batched query per interval between them; a delivery
// recorded behind the service's back (another instance's consumer) is
// answered by the shared re-read.
func TestEventWaitersShareTheirRereads(t *testing.T) {
	t.Parallel()
	pool := recordsPool(t)
	ctx := kittest.Context(t, time.Minute)
	recs := NewRecords(pool, "on")
	const n = 100
	events := make([]NewEvent, n)
	for i := range events {
		events[i] = NewEvent{ID: ids.New(), Type: "wait", Key: "k", Payload: []byte("{}")}
	}
	created, err := recs.Insert(ctx, events)
	if err != nil {
		t.Fatal(err)
	}
	store := &countingRecords{Records: recs}
	r := httpapi.NewRouter(httpapi.RouterOptions{Logger: slog.New(slog.DiscardHandler)})
	Mount(r, noBackend{}, Options{Records: store, Hub: new(waiter.Hub), Stats: stats.New(stats.Info{}, nil, nil)})
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	urls := make([]string, n)
	for i, e := range events {
		urls[i] = srv.URL + "/events/" + e.ID + "/wait?timeout=60s"
	}
	waits := kittest.StartWaits(t, ctx, urls)
	kittest.Eventually(t, 20*time.Second, "every waiter reading its event once", func() bool { return store.gets.Load() >= n })
	before := store.gets.Load() + store.delivered.Load()
	time.Sleep(time.Second)
	if during := store.gets.Load() + store.delivered.Load() - before; during > 8 {
		t.Errorf("%d waiters made %d reads in 1s, want at most 8 (one batched read per 250ms interval)", n, during)
	}
	// The pool has one connection: the delivery waits for a free one.
	if _, err := recs.Deliver(ctx, []Delivery{{ID: created[0].ID, CreatedAt: created[0].CreatedAt}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	kittest.Eventually(t, 10*time.Second, "the delivered event's wait answering", func() bool { return waits.Status(0) != 0 })
	if s := waits.Status(0); s != http.StatusOK {
		t.Errorf("wait of the delivered event: %d, want 200", s)
	}
	waits.Leave()
}
