// Area: delivery. The consumer observes each key's events in write
// order.

package conformance

import (
	"encoding/json"
	"fmt"
	"testing"

	logc "github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/log"
)

// runDelivery checks the order in which the consumer observes events.
func runDelivery(t *testing.T, newTarget NewTarget) {
	runTests(t, newTarget, []test{
		{"OrderingPerKey", testOrdering},
	})
}

func testOrdering(t *testing.T, tg Target) {
	base := tg.URL()
	keyset := []string{"order-1", "order-2", "order-3"}
	var written []logc.Created
	var keys []string
	for i := range 30 {
		k := keyset[i%3]
		written = append(written, Post(t, base, logc.NewEvent{Type: "step", Key: k, Payload: json.RawMessage(fmt.Sprintf(`{"i": %d}`, i))}))
		keys = append(keys, k)
	}
	batch := events(60, keyset...)
	written = append(written, PostBatch(t, base, batch)...)
	for _, e := range batch {
		keys = append(keys, e.Key)
	}
	checkOrder(t, base, written, keys)
}
