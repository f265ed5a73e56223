package main

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// listenEvents LISTENs on the trigger's channel over a connection of the
// test's own, to count the NOTIFYs that reach Postgres.
func listenEvents(t testing.TB) *pgx.Conn {
	t.Helper()
	return kittest.Listen(t, kittest.PostgresURL(t), notifyChannel)
}

// notificationsFor counts the notifications for schema conn receives
// until none (for any schema) arrives for quiet.
func notificationsFor(t testing.TB, conn *pgx.Conn, schema string, quiet time.Duration) int {
	t.Helper()
	n := 0
	for _, p := range kittest.Notifications(t, conn, quiet) {
		if p == schema {
			n++
		}
	}
	return n
}

// appendEach appends one event to each of n streams from 8 concurrent
// clients: n commits.
func appendEach(t testing.TB, base, prefix string, n int) {
	t.Helper()
	next := make(chan int, n)
	for i := range n {
		next <- i
	}
	close(next)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range next {
				body := `{"expected_version":"no_stream","events":[{"type":"OxygenAdded","data":{"liters":1}}]}`
				if s, raw := kittest.Do(t, http.MethodPost, fmt.Sprintf("%s/streams/%s-%d/events", base, prefix, i), body, nil); s != http.StatusCreated {
					t.Errorf("append: %d %s", s, raw)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestDebouncedNotifyCoalescesAndWakesOtherInstances: 200 append commits
// through one instance in debounced mode reach Postgres as far fewer
// NOTIFYs, counted on a LISTEN connection of the test's own, and a live
// subscription on a second instance whose fallback poll is an hour, so
// that it learns of appends only through those NOTIFYs, receives every
// event; an append after a quiet spell arrives the same way.
func TestDebouncedNotifyCoalescesAndWakesOtherInstances(t *testing.T) {
	t.Parallel()
	url := kittest.PostgresURL(t)
	schema := kittest.Schema(t, url)
	writer := start(t, schema, time.Hour, map[string]string{"NOTIFY_MODE": "debounced", "NOTIFY_INTERVAL": "20ms"})
	reader := start(t, schema, time.Hour)
	sub := subscribeEmpty(t, reader.URL())
	conn := listenEvents(t)

	const n = 200
	begin := time.Now()
	appendEach(t, writer.URL(), "tank-deb", n)
	elapsed := time.Since(begin)
	got := notificationsFor(t, conn, schema, 500*time.Millisecond)
	sent := writer.App().notifier.Sent()
	t.Logf("%d append commits in %v: %d NOTIFYs received, %d sent", n, elapsed.Round(time.Millisecond), got, sent)
	if got < 1 || got >= n/3 || int64(got) != sent {
		t.Errorf("%d NOTIFYs received (%d sent) for %d commits; want between 1 and %d", got, sent, n, n/3)
	}
	seen := map[string]bool{}
	for len(seen) < n {
		if m := nextMsg(t, sub, fmt.Sprintf("live event %d of %d on the other instance", len(seen)+1, n)); m.Event == "event" {
			seen[m.ID] = true
		}
	}
	appendEach(t, writer.URL(), "tank-late", 1)
	awaitEvent(t, sub, "the late event on the other instance", "tank-late-0")
}

// TestCommitModeNotifiesEveryAppend: NOTIFY_MODE=commit leaves the
// trigger on: one notification per append commit, and no Debouncer.
func TestCommitModeNotifiesEveryAppend(t *testing.T) {
	t.Parallel()
	schema := kittest.Schema(t, kittest.PostgresURL(t))
	r := start(t, schema, time.Second, map[string]string{"NOTIFY_MODE": "commit"})
	if r.App().notifier != nil {
		t.Fatal("commit mode built a Debouncer")
	}
	conn := listenEvents(t)
	const n = 30
	appendEach(t, r.URL(), "tank-commit", n)
	if got := notificationsFor(t, conn, schema, 500*time.Millisecond); got != n {
		t.Fatalf("%d NOTIFYs for %d append commits, want one per commit", got, n)
	}
}
