// Area: shared endpoints. /openapi.yaml serves the embedded contract,
// /backend names the side, /stats names every latency and counter of the
// pair.

package conformance

import (
	"bytes"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/documents"
)

// runShared checks the shared endpoints: /openapi.yaml, /backend and
// /stats.
func runShared(t *testing.T, c *client, tg side) {
	runTests(t, c, tg, []test{
		{"OpenAPIAndBackend", testOpenAPIAndBackend},
		{"StatsNames", testStats},
	})
}

func testOpenAPIAndBackend(t *testing.T, c *client, _ side) {
	status, body := c.do("GET", "/openapi.yaml", nil)
	if status != 200 || !bytes.Equal(body, documents.OpenAPI) {
		t.Errorf("GET /openapi.yaml: %d, %d bytes; want the embedded contract", status, len(body))
	}
	var b documents.BackendInfo
	c.must(200, "GET", "/backend", nil, &b)
	if (b.Backend != "postgres" && b.Backend != "mongodb") || b.Server == "" || b.Notes == nil {
		t.Errorf("GET /backend: %+v", b)
	}
	t.Logf("backend %s: %s, notes %q", b.Backend, b.Server, b.Notes)
}

func testStats(t *testing.T, c *client, _ side) {
	u := c.create(uniqueEmail(t, "stats"), map[string]any{})
	c.must(200, "GET", "/users/"+u.ID, nil, nil)
	var s struct {
		Latencies map[string]any `json:"latencies"`
		Counters  map[string]any `json:"counters"`
	}
	c.must(200, "GET", "/stats", nil, &s)
	for _, n := range documents.Latencies {
		if _, ok := s.Latencies[n]; !ok {
			t.Errorf("/stats lacks latency %q: %v", n, s.Latencies)
		}
	}
	for _, n := range documents.Counters {
		if _, ok := s.Counters[n]; !ok {
			t.Errorf("/stats lacks counter %q", n)
		}
	}
}
