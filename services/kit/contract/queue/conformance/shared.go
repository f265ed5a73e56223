// Area: shared endpoints. /openapi.yaml serves the embedded contract,
// /stats names every latency and counter of the pair, /queue counts what is
// queued, running and dead.

package conformance

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue"
)

// runShared checks the shared endpoints: /openapi.yaml, /stats, /queue.
func runShared(t *testing.T, f Features, newTarget NewTarget) {
	runTests(t, f, newTarget, []test{
		{"SharedEndpointsAndStats", testShared},
	})
}

func testShared(t *testing.T, _ Features, newTarget NewTarget) {
	tg := newTarget(t, Settings{})
	base := tg.URL()
	s, raw := call(t, http.MethodGet, base+"/openapi.yaml", nil, nil)
	if s != http.StatusOK || !bytes.Equal(raw, queue.OpenAPI) {
		t.Errorf("/openapi.yaml: %d, %d bytes, want the contract's %d", s, len(raw), len(queue.OpenAPI))
	}
	e := enqueue(t, base, queue.TaskRequest{Kind: "email"})
	waitTask(t, base, e.ID)
	counters, lat := getStats(t, base)
	for _, n := range queue.Latencies {
		if lat[n]["count"] < 1 {
			t.Errorf("/stats latency %q has no observation: %v", n, lat[n])
		}
	}
	for _, n := range queue.Counters {
		if _, ok := counters[n]; !ok {
			t.Errorf("/stats lacks counter %q", n)
		}
	}
	if counters[queue.CounterEnqueued] != 1 || counters[queue.CounterDelivered] != 1 || counters[queue.CounterProcessed] != 1 {
		t.Errorf("counters after one task: %v", counters)
	}
	var d queue.Depth
	if s, raw := call(t, http.MethodGet, base+"/queue", nil, &d); s != http.StatusOK || d.Queued != 0 || d.Running != 0 || d.Dead != 0 {
		t.Errorf("/queue after the task finished: %d %s", s, raw)
	}
}
