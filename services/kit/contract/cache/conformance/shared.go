// Area: shared endpoints. /openapi.yaml serves the embedded contract and
// /stats names every counter and latency of the pair.

package conformance

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/cache"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// runShared checks the shared endpoints: /openapi.yaml and /stats.
func runShared(t *testing.T, shared side, own ownTarget) {
	runTests(t, shared, own, []test{
		{"OpenAPI", testOpenAPI},
		{"StatsNames", testStats},
	})
}

func testOpenAPI(t *testing.T, s side, _ ownTarget) {
	status, body := kittest.Do(t, http.MethodGet, s.URL()+"/openapi.yaml", nil, nil)
	if status != 200 || !bytes.Equal(body, cache.OpenAPI) {
		t.Errorf("GET /openapi.yaml: %d, %d bytes; want the embedded contract", status, len(body))
	}
}

func testStats(t *testing.T, s side, _ ownTarget) {
	GetProduct(t, s.URL(), 505)
	status, st := kittest.GetJSON(t, s.URL()+"/stats")
	if status != 200 {
		t.Fatalf("GET /stats: %d", status)
	}
	counters, _ := st["counters"].(map[string]any)
	for _, n := range cache.Counters {
		if _, ok := counters[n]; !ok {
			t.Errorf("/stats counters lack %q: %v", n, counters)
		}
	}
	lat, _ := st["latencies"].(map[string]any)
	for _, n := range cache.Latencies {
		if _, ok := lat[n]; !ok {
			t.Errorf("/stats latencies lack %q", n)
		}
	}
}
