package pglisten_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pglisten"
)

// newDebouncer returns a Debouncer on a channel of the test's own, with a
// connection listening on it.
func newDebouncer(t testing.TB, interval time.Duration) (*pglisten.Debouncer, *pgx.Conn) {
	t.Helper()
	url := kittest.PostgresURL(t)
	channel := kittest.UniqueName(t, "d")
	d := &pglisten.Debouncer{DB: kittest.Pool(t, url, ""), Channel: channel, Payload: "p", Interval: interval,
		OnError: func(err error) { t.Errorf("NOTIFY failed: %v", err) }}
	t.Cleanup(func() { _ = d.Close(context.Background()) })
	return d, kittest.Listen(t, url, channel)
}

// TestDebouncerCoalescesABurst: 2,000 pokes from 8 goroutines within a
// few hundred milliseconds reach the listener as a handful of NOTIFYs, and
// the last one is sent after the last poke.
func TestDebouncerCoalescesABurst(t *testing.T) {
	t.Parallel()
	d, conn := newDebouncer(t, 20*time.Millisecond)
	const goroutines, each = 8, 250
	start := time.Now()
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for i := range each {
				d.Poke()
				if i%25 == 0 {
					time.Sleep(5 * time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	lastPoke := time.Now()
	got := len(kittest.Notifications(t, conn, time.Second))
	elapsed := lastPoke.Sub(start)
	// At most one per interval, plus the leading one and the trailing one.
	most := int(elapsed/(20*time.Millisecond)) + 2
	t.Logf("%d pokes in %v: %d NOTIFYs received, %d sent", d.Pokes(), elapsed.Round(time.Millisecond), got, d.Sent())
	if got < 1 || got > most || int64(got) != d.Sent() {
		t.Fatalf("%d NOTIFYs received (%d sent) for %d pokes in %v, want 1..%d", got, d.Sent(), d.Pokes(), elapsed, most)
	}
}

// TestDebouncerIdlePokeIsImmediate: after a quiet spell a poke is sent at
// once, not at the end of an interval (here an hour).
func TestDebouncerIdlePokeIsImmediate(t *testing.T) {
	t.Parallel()
	d, conn := newDebouncer(t, time.Hour)
	start := time.Now()
	d.Poke()
	ctx := kittest.Context(t, 10*time.Second)
	if _, err := conn.WaitForNotification(ctx); err != nil {
		t.Fatalf("no NOTIFY for an idle poke: %v", err)
	}
	t.Logf("idle poke to notification: %v", time.Since(start))
}

// TestDebouncerCloseFlushes: a poke held back by an hour-long interval is
// sent by Close at once; Close is safe twice and later pokes are dropped.
func TestDebouncerCloseFlushes(t *testing.T) {
	t.Parallel()
	d, conn := newDebouncer(t, time.Hour)
	d.Poke() // sent at once, opening the hour
	ctx := kittest.Context(t, 10*time.Second)
	if _, err := conn.WaitForNotification(ctx); err != nil {
		t.Fatal(err)
	}
	d.Poke() // pending until the hour ends, or Close
	if n := len(kittest.Notifications(t, conn, 200*time.Millisecond)); n != 0 {
		t.Fatalf("%d NOTIFYs within the interval, want 0", n)
	}
	if err := d.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(ctx); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	d.Poke()
	if n := len(kittest.Notifications(t, conn, 300*time.Millisecond)); n != 1 || d.Sent() != 2 {
		t.Fatalf("after Close: %d NOTIFYs received, %d sent in all; want the flushed one, 2", n, d.Sent())
	}
}

// TestDebouncerCloseWithoutPoke: nothing pending, nothing sent.
func TestDebouncerCloseWithoutPoke(t *testing.T) {
	t.Parallel()
	d := &pglisten.Debouncer{DB: kittest.Pool(t, kittest.PostgresURL(t), ""), Channel: "unused"}
	if err := d.Close(kittest.Context(t, 10*time.Second)); err != nil || d.Sent() != 0 {
		t.Fatalf("Close = %v with %d sent", err, d.Sent())
	}
}
