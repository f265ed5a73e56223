// Area: bad input, hostile values. kittest.HostileValues in every JSON
// body of the pair, refused naming the limit, and float-exact big numbers
// kept to the last digit.

package conformance

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/documents"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// testHostileValues sends the one rule's hostile values (kittest.
// HostileValues) in every JSON body of the pair (a lone surrogate was
// stored as U+FFFD), each answered 400 naming the limit, and the big
// numbers a 64-bit float holds exactly, read back to the last digit.
func testHostileValues(t *testing.T, c *client, _ side) {
	u := c.create(uniqueEmail(t, "hostile"), map[string]any{"keep": 1})
	for _, h := range kittest.HostileValues() {
		profile := `{"v":` + h.JSON + `}`
		bodies := []struct{ method, path, body string }{
			{http.MethodPost, "/users", `{"email":"` + uniqueEmail(t, "h") + `","name":"n","plan":"free","profile":` + profile + `}`},
			{http.MethodPatch, "/users/" + u.ID + "/profile", profile},
			{http.MethodPut, "/users/" + u.ID + "/profile", profile},
			{http.MethodPost, "/users/search", `{"profile":` + profile + `}`},
		}
		if strings.HasPrefix(h.JSON, `"`) {
			bodies = append(bodies, struct{ method, path, body string }{http.MethodPatch, "/users/" + u.ID, `{"name":` + h.JSON + `}`})
		}
		for _, b := range bodies {
			status, raw := c.do(b.method, b.path, b.body)
			var e struct{ Error string }
			_ = json.Unmarshal(raw, &e)
			if status != http.StatusBadRequest || !strings.Contains(e.Error, h.Error) {
				t.Errorf("%s in %s %s: %d %.300s, want 400 naming %q", h.Name, b.method, b.path, status, raw, h.Error)
			}
		}
	}
	sameJSON(t, "profile after the refused writes", c.profile(u.ID), map[string]any{"keep": 1})

	profile := `{"v":[` + strings.Join(kittest.FloatExactNumbers, ",") + `]}`
	big := c.create(uniqueEmail(t, "big"), json.RawMessage(profile))
	var got documents.User
	c.must(http.StatusOK, http.MethodGet, "/users/"+big.ID, nil, &got)
	kittest.SameJSONValue(t, "profile read back", got.Profile, []byte(profile))
}
