package records_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue/records"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/ids"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/stats"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/waiter"
)

// counting is the real records.Store, counting the reads the long polls
// make of it. It takes no tasks: the test writes them itself.
type counting struct {
	records.Store
	gets, finished atomic.Int64
}

func (c *counting) Get(ctx context.Context, id string) (queue.Task, error) {
	c.gets.Add(1)
	return c.Store.Get(ctx, id)
}

func (c *counting) Finished(ctx context.Context, ids []string) ([]string, error) {
	c.finished.Add(1)
	return c.Store.Finished(ctx, ids)
}

func (c *counting) Enqueue(context.Context, []queue.NewTask) error {
	return errors.New("not in this test")
}

func (c *counting) Pay(context.Context, queue.NewPayment, bool) error {
	return errors.New("not in this test")
}

func (c *counting) reads() int64 { return c.gets.Load() + c.finished.Load() }

// TestWaitersShareTheirRereads is issue 26's 3,000 waiters in small: N
// concurrent GET /tasks/{id}/wait on tasks that stay queued, against the
// real records on Postgres, read the store once each on arrival and then
// make one batched query per interval between them, whatever N. Tasks
// finished behind the service's back (another instance) are answered
// within an interval or two; when the clients leave, the goroutines the
// test started (kittest.OwnGoroutines: not those of the tests running in
// parallel) go back to where they were, the shared re-read's included.
func TestWaitersShareTheirRereads(t *testing.T) {
	t.Parallel()
	migrations, err := fs.Sub(os.DirFS("../../../../../migrations"), "queue")
	if err != nil {
		t.Fatal(err)
	}
	pool := kittest.MigratedPool(t, migrations, 4)
	ctx := kittest.Context(t, time.Minute)
	const n = 300
	tasks := make([]queue.NewTask, n)
	for i := range tasks {
		tasks[i] = queue.NewTask{ID: ids.New(), Kind: "wait", Payload: []byte("{}"), EnqueuedAt: time.Now().UTC()}
	}
	if err := records.InsertTasks(ctx, pool, tasks); err != nil {
		t.Fatal(err)
	}
	store := &counting{Store: records.Store{Pool: pool}}
	// The goroutines this test starts from here on (its server's, its
	// handlers', the shared re-read's, its clients'), not those of the
	// tests running beside it.
	owned := kittest.OwnGoroutines(t)
	hub := new(waiter.Hub)
	r := httpapi.NewRouter(httpapi.RouterOptions{Logger: slog.New(slog.DiscardHandler)})
	queue.Mount(r, store, queue.Options{Stats: stats.New(stats.Info{}, nil, nil), Hub: hub, Timeout: 10 * time.Second})
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	urls := make([]string, n)
	for i, task := range tasks {
		urls[i] = srv.URL + "/tasks/" + task.ID + "/wait?timeout=60s"
	}

	baseline := owned()
	waits := kittest.StartWaits(t, ctx, urls)
	kittest.Eventually(t, 20*time.Second, "every waiter reading its task once", func() bool { return store.gets.Load() >= n })

	// Two seconds of waiting: eight intervals of 250ms. One query per
	// waiter per interval would be 2,400 reads.
	before := store.reads()
	time.Sleep(2 * time.Second)
	during := store.reads() - before
	t.Logf("%d waiters made %d store reads in 2s (%d batched)", n, during, store.finished.Load())
	if during > 16 {
		t.Errorf("%d waiters made %d store reads in 2s, want at most 16 (one batched read per 250ms interval, not one per waiter)", n, during)
	}
	if store.finished.Load() == 0 {
		t.Error("no batched re-read ran: tasks finished elsewhere would never be seen")
	}

	// Finished behind the service's back: seen by the shared re-read.
	done := make([]string, 10)
	for i := range done {
		done[i] = tasks[i].ID
	}
	if _, err := pool.Exec(ctx, `UPDATE tasks SET status = 'done', processed_at = now() WHERE id = ANY($1::uuid[])`, done); err != nil {
		t.Fatal(err)
	}
	kittest.Eventually(t, 10*time.Second, "the finished tasks' waits answering 200", func() bool {
		for i := range done {
			if waits.Status(i) == 0 {
				return false
			}
		}
		return true
	})
	for i := range done {
		if s := waits.Status(i); s != http.StatusOK {
			t.Errorf("wait of finished task %d: %d, want 200", i, s)
		}
	}

	// The clients leave: nothing stays behind.
	waits.Leave()
	kittest.Eventually(t, 5*time.Second, fmt.Sprintf("the test's goroutines back to the baseline of %d (the shared re-read ended)", baseline), func() bool {
		return owned() <= baseline && hub.Len() == 0
	})
}
