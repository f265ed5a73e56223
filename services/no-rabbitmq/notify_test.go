package main

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue/conformance"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pglisten"
)

// listenQueue LISTENs on the schema's queue channel over a connection of
// the test's own, to count the NOTIFYs that reach Postgres.
func (sc schema) listenQueue(t testing.TB) *pgx.Conn {
	t.Helper()
	return kittest.Listen(t, sc.url, notifyChannel(sc.name))
}

// postEach enqueues n single tasks from 8 concurrent clients: n commits.
func postEach(t testing.TB, base string, n int) {
	t.Helper()
	var wg sync.WaitGroup
	next := make(chan struct{}, n)
	for range n {
		next <- struct{}{}
	}
	close(next)
	for range 8 {
		wg.Go(func() {
			for range next {
				if s, raw := kittest.Do(t, http.MethodPost, base+"/tasks", queue.TaskRequest{Kind: "t"}, nil); s != http.StatusAccepted {
					t.Errorf("POST /tasks: %d %s", s, raw)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestDebouncedNotifyCoalescesAndWakesOtherInstances: 300 enqueue commits
// through an API-only instance in debounced mode reach Postgres as far
// fewer NOTIFYs, counted on a LISTEN connection of the test's own, and a
// worker instance whose fallback poll is a minute, so that it learns of
// tasks only through those NOTIFYs, processes every one; a task enqueued
// after a quiet spell is also woken by a NOTIFY.
func TestDebouncedNotifyCoalescesAndWakesOtherInstances(t *testing.T) {
	t.Parallel()
	sc := newSchema(t)
	api := sc.start(t, conformance.Settings{}, map[string]string{"WORKERS": "0", "NOTIFY_MODE": "debounced", "NOTIFY_INTERVAL": "20ms"})
	worker := sc.start(t, conformance.Settings{Workers: 4}, map[string]string{"POLL_INTERVAL": "1m"})
	kittest.Eventually(t, 30*time.Second, "the listener", worker.App().listener.Listening)
	conn := sc.listenQueue(t)

	const n = 300
	start := time.Now()
	postEach(t, api.URL(), n)
	elapsed := time.Since(start)
	got := len(kittest.Notifications(t, conn, 500*time.Millisecond))
	sent := api.App().notifier.Sent()
	t.Logf("%d enqueue commits in %v: %d NOTIFYs received, %d sent", n, elapsed.Round(time.Millisecond), got, sent)
	if got < 1 || got >= n/3 || int64(got) != sent {
		t.Errorf("%d NOTIFYs received (%d sent) for %d commits; want between 1 and %d", got, sent, n, n/3)
	}
	kittest.Eventually(t, 40*time.Second, "every task done by the other instance", func() bool { return doneCount(t, sc.pool) == n })

	post(t, api.URL(), 1) // after a quiet spell: notified at once
	kittest.Eventually(t, 40*time.Second, "the late task done", func() bool { return doneCount(t, sc.pool) == n+1 })
}

// TestCommitModeNotifiesEveryCommit: NOTIFY_MODE=commit keeps pg_notify
// in the enqueue transaction: one notification per commit, and no
// Debouncer.
func TestCommitModeNotifiesEveryCommit(t *testing.T) {
	t.Parallel()
	sc := newSchema(t)
	api := sc.start(t, conformance.Settings{}, map[string]string{"WORKERS": "0", "NOTIFY_MODE": "commit"})
	if api.App().notifier != nil {
		t.Fatal("commit mode built a Debouncer")
	}
	conn := sc.listenQueue(t)
	const n = 40
	postEach(t, api.URL(), n)
	post(t, api.URL(), 10) // a batch is one commit, one NOTIFY
	if got := len(kittest.Notifications(t, conn, 500*time.Millisecond)); got != n+1 {
		t.Fatalf("%d NOTIFYs for %d commits, want one per commit", got, n+1)
	}
}

// TestDeliveryLatencyByNotifyMode logs the delivery latency a worker
// instance sees for tasks enqueued through another instance, in each
// mode: first for tasks enqueued one at a time 10 ms apart (the wake-up
// path alone), then for a burst from 8 clients. The figures are noisy (a
// shared, busy machine, both modes at once); the test only checks that
// every task arrives.
func TestDeliveryLatencyByNotifyMode(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{pglisten.ModeCommit, pglisten.ModeDebounced} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			sc := newSchema(t)
			api := sc.start(t, conformance.Settings{}, map[string]string{"WORKERS": "0", "NOTIFY_MODE": mode})
			worker := sc.start(t, conformance.Settings{Workers: 4}, map[string]string{"POLL_INTERVAL": "1m"})
			kittest.Eventually(t, 30*time.Second, "the listener", worker.App().listener.Listening)
			st := worker.App().stats
			const paced, burst = 30, 400
			for range paced {
				post(t, api.URL(), 1)
				time.Sleep(10 * time.Millisecond)
			}
			kittest.Eventually(t, 40*time.Second, "the paced tasks done", func() bool { return doneCount(t, sc.pool) == paced })
			p := st.Snapshot().Latencies[queue.LatencyDelivery]
			st.Reset()
			start := time.Now()
			postEach(t, api.URL(), burst)
			elapsed := time.Since(start)
			kittest.Eventually(t, 40*time.Second, "the burst done", func() bool { return doneCount(t, sc.pool) == paced+burst })
			b := st.Snapshot().Latencies[queue.LatencyDelivery]
			t.Logf("NOTIFY_MODE=%s (noisy): paced delivery p50 %.1f ms, max %.1f ms; burst of %d enqueues in %v, delivery p50 %.1f ms, p99 %.1f ms",
				mode, p.P50MS, p.MaxMS, burst, elapsed.Round(time.Millisecond), b.P50MS, b.P99MS)
		})
	}
}
