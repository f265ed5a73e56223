// Area: bad input, hostile values. kittest.HostileValues in every JSON
// body of the pair, refused naming the limit, and the big numbers the
// rule allows read back exactly.

package conformance

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	logc "github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/log"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// testHostileValues sends the one rule's hostile values (kittest.
// HostileValues) in every JSON body of the pair, each answered 400 naming
// the limit, and the big numbers the rule allows, read back to the last
// digit.
func testHostileValues(t *testing.T, tg Target) {
	base := tg.URL()
	for _, h := range kittest.HostileValues() {
		bodies := []struct{ path, body string }{
			{"/events", `{"type":"t","key":"k","payload":{"v":` + h.JSON + `}}`},
			{"/events/batch", `{"events":[{"type":"t","key":"k"},{"type":"t","key":"k","payload":{"v":` + h.JSON + `}}]}`},
		}
		if strings.HasPrefix(h.JSON, `"`) {
			bodies = append(bodies, struct{ path, body string }{"/events", `{"type":` + h.JSON + `,"key":"k"}`})
		}
		for _, c := range bodies {
			status, raw := kittest.Do(t, http.MethodPost, base+c.path, c.body, nil)
			var e struct{ Error string }
			_ = json.Unmarshal(raw, &e)
			if status != http.StatusBadRequest || !strings.Contains(e.Error, h.Error) {
				t.Errorf("%s in POST %s: %d %.300s, want 400 naming %q", h.Name, c.path, status, raw, h.Error)
			}
		}
	}
	payload := `{"v":[` + strings.Join(kittest.BigNumbers, ",") + `]}`
	created := PostDelivered(t, base, logc.NewEvent{Type: "big-numbers", Key: "k", Payload: json.RawMessage(payload)})
	kittest.SameJSONValue(t, "payload read back", Get(t, base, created.ID).Payload, []byte(payload))
}
