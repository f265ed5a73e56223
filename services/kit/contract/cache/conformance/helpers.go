// Helpers shared by every area, and by the sides' own tests: the subtest
// table, the side, and GET and PUT of products.

package conformance

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/cache"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// test is one named subtest of the suite.
type test = struct {
	Name string
	Fn   func(*testing.T, side, ownTarget)
}

// runTests runs tests as parallel subtests of t, each given the shared
// target and own.
func runTests(t *testing.T, shared side, own ownTarget, tests []test) {
	kittest.RunParallel(t, tests, func(t *testing.T, fn func(*testing.T, side, ownTarget)) { fn(t, shared, own) })
}

// ownTarget starts a target of the subtest's own.
type ownTarget func(testing.TB, Options) side

// side is what each test gets: a target and the side's Features.
type side struct {
	Target
	Features Features
}

// Get sends GET url and returns the status, the X-Cache and
// X-Cache-Layer headers and the body.
func Get(t testing.TB, url string) (status int, xcache, layer string, body []byte) {
	t.Helper()
	resp, raw := kittest.DoResponse(t, http.MethodGet, url, nil, nil)
	return resp.StatusCode, resp.Header.Get(cache.HeaderCache), resp.Header.Get(cache.HeaderLayer), raw
}

// GetProduct reads product id from base, failing the test unless it
// answers 200, and returns it with its X-Cache value.
func GetProduct(t testing.TB, base string, id int64) (cache.Product, string) {
	t.Helper()
	status, xc, _, raw := Get(t, fmt.Sprintf("%s/products/%d", base, id))
	if status != http.StatusOK {
		t.Fatalf("GET /products/%d: %d %s", id, status, raw)
	}
	var p cache.Product
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatalf("GET /products/%d: %v: %s", id, err, raw)
	}
	return p, xc
}

// PutProduct updates product id through base, failing the test unless it
// answers 200.
func PutProduct(t testing.TB, base string, id int64, u cache.ProductUpdate) cache.Product {
	t.Helper()
	var p cache.Product
	if status, raw := kittest.Do(t, http.MethodPut, fmt.Sprintf("%s/products/%d", base, id), u, &p); status != http.StatusOK {
		t.Fatalf("PUT /products/%d: %d %s", id, status, raw)
	}
	return p
}

// checkError sends method url with body and fails the test unless the
// answer is want with a JSON {"error": ...} body.
func checkError(t testing.TB, method, url string, body any, want int) {
	t.Helper()
	status, raw := kittest.Do(t, method, url, body, nil)
	var e struct {
		Error string `json:"error"`
	}
	if status != want || json.Unmarshal(raw, &e) != nil || e.Error == "" {
		t.Errorf("%s %s: %d %.200s, want %d with a JSON error", method, url, status, raw, want)
	}
}

// decode unmarshals a JSON answer.
func decode(raw []byte, v any) error { return json.Unmarshal(raw, v) }
