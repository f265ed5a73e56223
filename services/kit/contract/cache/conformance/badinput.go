// Area: bad input. Bad requests get a 4xx JSON error; runBadInput also
// runs the hostile values (hostile.go).

package conformance

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/cache"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// runBadInput checks that bad requests get a 4xx JSON error, and that
// hostile values are refused or kept exactly.
func runBadInput(t *testing.T, shared side, own ownTarget) {
	runTests(t, shared, own, []test{
		{"BadInputIs4xx", testBadInput},
		{"HostileValues", testHostileValues},
	})
}

func testBadInput(t *testing.T, s side, _ ownTarget) {
	check := func(method, path string, body any, want int) {
		t.Helper()
		status, raw := kittest.Do(t, method, s.URL()+path, body, nil)
		var e struct {
			Error string `json:"error"`
		}
		if status != want || json.Unmarshal(raw, &e) != nil || e.Error == "" {
			t.Errorf("%s %s: %d %.200s, want %d with a JSON error", method, path, status, raw, want)
		}
	}
	good := cache.ProductUpdate{Name: "n", PriceCents: 1, Stock: 1}
	for _, id := range []string{"0", "-1", "abc", "01", "1.5", "99999999999999999999"} {
		check("GET", "/products/"+id, nil, 400)
		check("PUT", "/products/"+id, good, 400)
	}
	for _, body := range []any{`{}`, `{"name":"n"}`, `{"name":" ","price_cents":1,"stock":1}`, `{"name":"n","price_cents":-1,"stock":1}`,
		`{"name":"n","price_cents":1,"stock":1,"extra":1}`, `not json`, `{"name":null,"price_cents":1,"stock":1}`} {
		check("PUT", "/products/303", body, 400)
	}
	long := strings.Repeat("k", cache.MaxKeyLen+1)
	for _, key := range []string{long, "a%20b", "a+b", "%C3%A9"} {
		check("GET", "/kv/"+key, nil, 400)
		check("PUT", "/kv/"+key, `1`, 400)
		check("DELETE", "/kv/"+key, nil, 400)
	}
	key := kittest.UniqueName(t, "bad")
	for _, ttl := range []string{"abc", "-1s", "1", "", "5%20s", "5s&ttl=6s"} {
		check("PUT", "/kv/"+key+"?ttl="+ttl, `1`, 400)
	}
	for _, body := range []string{`not json`, `{"a":`, `1 2`, ``} {
		check("PUT", "/kv/"+key, body, 400)
	}
	check("PUT", "/kv/"+key, `"`+strings.Repeat("x", cache.MaxValueBytes-1)+`"`, 413)
	if status, _, _, _ := Get(t, kvURL(s, key)); status != 404 {
		t.Errorf("a refused PUT stored something: GET %d", status)
	}
}
