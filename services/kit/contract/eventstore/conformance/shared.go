// Area: shared endpoints. Every service's shared endpoints
// (kittest.CheckShared), /openapi.yaml serving the embedded contract, and
// /capabilities equal to the side's Features.

package conformance

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/eventstore"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// runShared checks the shared endpoints: /openapi.yaml, /stats and
// /capabilities.
func runShared(t *testing.T, newSide func(testing.TB) side) {
	runTests(t, newSide, []test{
		{"SharedEndpointsOpenAPIAndCapabilities", testShared},
	})
}

func testShared(t *testing.T, tg side) {
	service, backend := tg.Names()
	kittest.CheckShared(t, tg.URL(), service, "eventstore", backend)
	status, b := kittest.Do(t, http.MethodGet, tg.URL()+"/openapi.yaml", nil, nil)
	if status != 200 || !bytes.Equal(b, eventstore.OpenAPI) {
		t.Errorf("/openapi.yaml: %d, %d bytes; want the contract's %d bytes", status, len(b), len(eventstore.OpenAPI))
	}
	status, b = kittest.Do(t, http.MethodGet, tg.URL()+"/capabilities", nil, nil)
	var c eventstore.Capabilities
	decode(t, b, &c)
	if status != 200 || c != tg.Features {
		t.Errorf("/capabilities: %d %+v; the target declares %+v", status, c, tg.Features)
	}
	var raw map[string]any
	decode(t, b, &raw)
	for _, k := range []string{"conditional_append", "server_side_stream_read", "push_subscription"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("/capabilities lacks %q: %s", k, b)
		}
	}
}
