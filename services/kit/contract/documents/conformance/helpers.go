// Helpers shared by every area: the subtest table, the side, the HTTP
// client and JSON comparison.

package conformance

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/documents"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// test is one named subtest of the suite.
type test = struct {
	Name string
	Fn   func(*testing.T, *client, side)
}

// runTests runs tests as parallel subtests of t, each on the shared
// target tg with a client of its own.
func runTests(t *testing.T, c *client, tg side, tests []test) {
	kittest.RunParallel(t, tests, func(t *testing.T, fn func(*testing.T, *client, side)) { fn(t, c.with(t), tg) })
}

// side is what each test gets: a target and the side's Features.
type side struct {
	Target
	Features Features
}

type client struct {
	t    testing.TB
	base string
}

func (c *client) with(t testing.TB) *client { return &client{t: t, base: c.base} }

// do sends body (encoded as kittest.NewRequest does: a string or []byte
// as is, anything else as JSON) and returns the status and the raw answer.
func (c *client) do(method, path string, body any) (int, []byte) {
	c.t.Helper()
	return kittest.Do(c.t, method, c.base+path, body, nil)
}

// must sends the request and fails the test unless the status is want;
// the answer is decoded into out when out is not nil.
func (c *client) must(want int, method, path string, body, out any) {
	c.t.Helper()
	status, raw := c.do(method, path, body)
	if status != want {
		c.t.Fatalf("%s %s: status %d, want %d: %.300s", method, path, status, want, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			c.t.Fatalf("%s %s: %v: %.300s", method, path, err, raw)
		}
	}
}

func (c *client) create(email string, profile any) documents.User {
	c.t.Helper()
	var u documents.User
	c.must(201, "POST", "/users", map[string]any{"email": email, "name": "N " + email, "plan": "free", "profile": profile}, &u)
	return u
}

func (c *client) profile(id string) any {
	c.t.Helper()
	var u documents.User
	c.must(200, "GET", "/users/"+id, nil, &u)
	return generic(c.t, u.Profile)
}

// generic decodes JSON into plain Go values (maps, float64), for equality
// as JSON values regardless of key order and number spelling.
func generic(t testing.TB, raw []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("not JSON: %v: %.200s", err, raw)
	}
	return v
}

func sameJSON(t testing.TB, what string, got any, want any) {
	t.Helper()
	wantRaw, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	if w := generic(t, wantRaw); !reflect.DeepEqual(got, w) {
		g, _ := json.Marshal(got)
		t.Errorf("%s:\n got %.400s\nwant %.400s", what, g, wantRaw)
	}
}

func uniqueEmail(t testing.TB, tag string) string {
	return kittest.UniqueName(t, tag) + "@example.com"
}

// bigProfile returns a profile of about size bytes of JSON: many nested
// objects with strings, numbers, arrays and nulls.
func bigProfile(size int, seed uint64) map[string]any {
	r := rand.New(rand.NewPCG(seed, 1))
	items := []any{}
	n := 0
	for i := 0; n < size; i++ {
		item := map[string]any{
			"i": i, "f": float64(r.IntN(1e6)) / 64, "s": strings.Repeat(string(rune('a'+i%26)), r.IntN(200)),
			"tags": []any{"x", i % 7, nil, true}, "nested": map[string]any{"k": fmt.Sprint(r.Uint64()), "u": "é✓😀\"\\\n"},
		}
		b, _ := json.Marshal(item)
		n += len(b) + 1
		items = append(items, item)
	}
	return map[string]any{"items": items, "count": len(items)}
}

// mustJSON encodes v.
func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
