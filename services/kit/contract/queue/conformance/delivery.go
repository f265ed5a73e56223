// Area: delivery. A thousand tasks enqueued concurrently are each
// processed once.

package conformance

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// runDelivery checks delivery under concurrent load: every task once.
func runDelivery(t *testing.T, f Features, newTarget NewTarget) {
	runTests(t, f, newTarget, []test{
		{"ThousandConcurrentTasksExactlyOnce", testConcurrent},
	})
}

func testConcurrent(t *testing.T, _ Features, newTarget NewTarget) {
	const n, clients = 1000, 32
	tg := newTarget(t, Settings{Workers: 8})
	base := tg.URL()
	var wg sync.WaitGroup
	next := make(chan int)
	go func() {
		for i := range n {
			next <- i
		}
		close(next)
	}()
	for range clients {
		wg.Go(func() {
			for i := range next {
				enqueue(t, base, queue.TaskRequest{Kind: "fanin", Payload: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))})
			}
		})
	}
	wg.Wait()
	waitAllFinished(t, tg, n, 2*time.Minute)
	tasks := records(tg).Tasks(t)
	done, distinct := 0, map[string]bool{}
	for _, r := range tasks {
		if r.Status == queue.StatusDone && r.Attempts == 1 && r.ProcessedAt != nil {
			done++
		}
		var p struct{ I json.Number }
		if json.Unmarshal(r.Payload, &p) == nil && p.I != "" {
			distinct[p.I.String()] = true
		}
	}
	if done != n {
		t.Errorf("%d of %d tasks done after exactly one delivery", done, n)
	}
	if len(distinct) != n {
		t.Errorf("%d distinct tasks recorded, want %d", len(distinct), n)
	}
	c := kittest.CountersReach(t, 30*time.Second, queue.CounterProcessed, int64(n), base)[0]
	if c[queue.CounterEnqueued] != n || c[queue.CounterDelivered] != n || c[queue.CounterProcessed] != n || c[queue.CounterRetried] != 0 {
		t.Errorf("counters %v: want enqueued = delivered = processed = %d (no task lost, none processed twice)", c, n)
	}
}
