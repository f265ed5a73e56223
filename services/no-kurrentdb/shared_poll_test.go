package main

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/eventstore/conformance"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// TestSubscribersShareTheFallbackPoll: N idle subscriptions make one
// query per POLL_INTERVAL between them, not three each; an event written
// behind the service's back reaches all of them; when they leave, the
// shared poll ends and the goroutines the test started
// (kittest.OwnGoroutines: not those of the tests running in parallel) go
// back to where they were.
func TestSubscribersShareTheFallbackPoll(t *testing.T) {
	t.Parallel()
	url := kittest.PostgresURL(t)
	schema := kittest.Schema(t, url)
	// The goroutines this test starts from here on (its service's, its
	// subscriptions', the shared poll's, its clients'), not those of the
	// services the tests running beside it start.
	owned := kittest.OwnGoroutines(t)
	r := start(t, schema, 50*time.Millisecond)
	pool := kittest.Pool(t, url, schema)
	time.Sleep(100 * time.Millisecond)
	baseline := owned()

	const n = 50
	var got atomic.Int64
	leave := conformance.HoldSubscribers(t, r.URL(), n, func(line string) {
		if strings.Contains(line, "tank-behind-the-back") {
			got.Add(1)
		}
	})
	// Past the shared poll's first tick, which wakes everyone once.
	time.Sleep(200 * time.Millisecond)
	s := r.App()
	reads, polls := s.reads.Load(), s.sharedPolls.Load()
	time.Sleep(time.Second)
	reads, polls = s.reads.Load()-reads, s.sharedPolls.Load()-polls
	t.Logf("%d idle subscribers in 1s at POLL_INTERVAL 50ms: %d reads of their own, %d shared polls", n, reads, polls)
	if reads > 2*n || polls < 5 || polls > 30 {
		// Each re-reading on its own timer: 20 rounds of 3 queries each.
		t.Errorf("%d idle subscribers made %d reads and %d shared polls in 1s, want at most %d reads (nothing changed) and about 20 polls", n, reads, polls, 2*n)
	}
	// Written straight into the table: only the shared poll or the
	// trigger's NOTIFY (NOTIFY_MODE=commit) can wake them.
	if _, err := pool.Exec(kittest.Context(t, 30*time.Second),
		`INSERT INTO events (stream_id, version, event_type, data) VALUES ('tank-behind-the-back', 0, 'OxygenAdded', '{"liters":1}')`); err != nil {
		t.Fatal(err)
	}
	kittest.Eventually(t, 10*time.Second, fmt.Sprintf("all %d subscribers receiving the event", n), func() bool { return got.Load() == n })

	leave()
	kittest.Eventually(t, 5*time.Second, fmt.Sprintf("the test's goroutines back to the baseline of %d and the shared poll ended", baseline), func() bool {
		s.hub.mu.Lock()
		polling := s.hub.polling
		s.hub.mu.Unlock()
		return owned() <= baseline && !polling
	})
}
