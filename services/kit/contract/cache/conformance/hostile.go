// Area: bad input, hostile values. kittest.HostileValues as kv values and
// in a product update, each refused with a 400 naming the limit, and the
// big numbers the rule allows kept exactly.

package conformance

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// testHostileValues sends the one rule's hostile values (kittest.
// HostileValues) as kv values and in a product update, each answered 400
// naming the limit (a lone surrogate was stored as U+FFFD in a product's
// name), and the big numbers the rule allows as kv values, which come
// back byte for byte.
func testHostileValues(t *testing.T, s side, _ ownTarget) {
	for i, h := range kittest.HostileValues() {
		bodies := []struct{ method, url, body string }{
			{http.MethodPut, kvURL(s, kittest.UniqueName(t, fmt.Sprintf("h%d", i))), `{"v":` + h.JSON + `}`},
			{http.MethodPut, kvURL(s, kittest.UniqueName(t, fmt.Sprintf("h%d", i))), h.JSON},
		}
		if strings.HasPrefix(h.JSON, `"`) {
			bodies = append(bodies, struct{ method, url, body string }{http.MethodPut, s.URL() + "/products/1",
				`{"name":` + h.JSON + `,"price_cents":1,"stock":1}`})
		}
		for _, c := range bodies {
			status, raw := kittest.Do(t, c.method, c.url, c.body, nil)
			var e struct{ Error string }
			_ = json.Unmarshal(raw, &e)
			if status != http.StatusBadRequest || !strings.Contains(e.Error, h.Error) {
				t.Errorf("%s in %s %s: %d %.300s, want 400 naming %q", h.Name, c.method, c.url, status, raw, h.Error)
			}
			if c.method == http.MethodPut && strings.Contains(c.url, "/kv/") {
				if status, _, _, raw := Get(t, c.url); status != http.StatusNotFound {
					t.Errorf("%s: GET after the refused PUT: %d %.80s, want 404", h.Name, status, raw)
				}
			}
		}
	}
	value := `{"v":[` + strings.Join(kittest.BigNumbers, ",") + `]}`
	url := kvURL(s, kittest.UniqueName(t, "big"))
	if status, raw := kittest.Do(t, http.MethodPut, url, value, nil); status != http.StatusNoContent {
		t.Fatalf("PUT big numbers: %d %s", status, raw)
	}
	if status, _, _, raw := Get(t, url); status != http.StatusOK || string(raw) != value {
		t.Errorf("GET big numbers: %d %.300s, want the stored bytes %s", status, raw, value)
	}
}
