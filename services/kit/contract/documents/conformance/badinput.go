// Area: bad input. Malformed, forbidden and out-of-range requests get a
// 400 (or 415) JSON error and change nothing; runBadInput also runs the
// hostile values (hostile.go).

package conformance

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/documents"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// runBadInput checks that bad requests get a 4xx JSON error and change
// nothing, and that hostile values are refused or kept exactly.
func runBadInput(t *testing.T, c *client, tg side) {
	runTests(t, c, tg, []test{
		{"BadInputIs4xx", testBadInput},
		{"HostileValues", testHostileValues},
	})
}

func testBadInput(t *testing.T, c *client, _ side) {
	u := c.create(uniqueEmail(t, "bad"), map[string]any{"keep": 1})
	id := u.ID
	user := func(profile string) string {
		return `{"email":"x@example.com","name":"n","plan":"p","profile":` + profile + `}`
	}
	forbidden := []string{
		`{"$x":1}`, `{"a.b":1}`, `{"":1}`, `{"ok":{"$where":"1"}}`, `{"ok":{"x.y":{}}}`,
		`{"ok":[{"$x":1}]}`, `{"ok":[[{"a.b":1}]]}`, `{"k\u0000":1}`, `{"s":"a\u0000b"}`, `{"n":1e400}`,
		// Numbers a float64 would change: MongoDB would store 0 or a
		// rounded value where Postgres keeps them exactly.
		`{"n":1e-400}`, `{"n":123456789012345678901234567890}`, `{"n":[0.10000000000000000001]}`,
		`{"n":{"m":9007199254740993.0}}`,
		`{"deep":` + strings.Repeat("[", documents.MaxDepth+1) + strings.Repeat("]", documents.MaxDepth+1) + `}`,
		// White space around a key: FerretDB stored it, then failed every
		// PATCH and search naming it (a 500); both sides refuse it.
		`{" a":1}`, `{"a ":1}`, `{"ok":{"\tb":1}}`, `{"ok":[{"b\n":1}]}`, `{"\u00a0c":1}`, `{"d\u2003":1}`,
	}
	cases := []struct{ name, method, path, body string }{
		{"create missing email", "POST", "/users", `{"name":"n","plan":"p"}`},
		{"create bad email", "POST", "/users", `{"email":"nope","name":"n","plan":"p"}`},
		{"create blank name", "POST", "/users", `{"email":"a@b","name":" ","plan":"p"}`},
		{"create unknown field", "POST", "/users", `{"email":"a@b","name":"n","plan":"p","age":3}`},
		{"create profile array", "POST", "/users", user(`[1]`)},
		{"create profile null", "POST", "/users", user(`null`)},
		{"create profile string", "POST", "/users", user(`"x"`)},
		{"create malformed", "POST", "/users", `{"email":`},
		{"get bad id", "GET", "/users/not-a-uuid", ``},
		{"patch nothing", "PATCH", "/users/" + id, `{}`},
		{"patch email", "PATCH", "/users/" + id, `{"email":"a@b"}`},
		{"patch blank plan", "PATCH", "/users/" + id, `{"plan":""}`},
		{"patch profile array", "PATCH", "/users/" + id + "/profile", `[1]`},
		{"put profile number", "PUT", "/users/" + id + "/profile", `5`},
		{"search limit", "POST", "/users/search", `{"limit":1001}`},
		{"search negative limit", "POST", "/users/search", `{"limit":-1}`},
		{"search cursor", "POST", "/users/search", `{"after":"garbage"}`},
		{"search profile array", "POST", "/users/search", `{"profile":[1]}`},
		{"search operator", "POST", "/users/search", `{"profile":{"a":{"$gt":1}}}`},
	}
	for i, f := range forbidden {
		cases = append(cases,
			struct{ name, method, path, body string }{fmt.Sprintf("create forbidden %d", i), "POST", "/users", user(f)},
			struct{ name, method, path, body string }{fmt.Sprintf("patch forbidden %d", i), "PATCH", "/users/" + id + "/profile", f},
			struct{ name, method, path, body string }{fmt.Sprintf("put forbidden %d", i), "PUT", "/users/" + id + "/profile", f},
			struct{ name, method, path, body string }{fmt.Sprintf("search forbidden %d", i), "POST", "/users/search", `{"profile":` + f + `}`},
		)
	}
	for _, tc := range cases {
		var body any
		if tc.body != "" {
			body = tc.body
		}
		status, raw := c.do(tc.method, tc.path, body)
		var e struct{ Error string }
		if status != 400 || json.Unmarshal(raw, &e) != nil || e.Error == "" {
			t.Errorf("%s: %d %s, want 400 with an error", tc.name, status, raw)
		}
	}
	req := kittest.NewRequest(t, "POST", c.base+"/users", user(`{}`))
	req.Header.Set("Content-Type", "text/plain")
	if resp, raw := kittest.Send(t, req); resp.StatusCode != 415 {
		t.Errorf("text/plain body: %d %s, want 415", resp.StatusCode, raw)
	}
	// Nothing above changed the user.
	sameJSON(t, "profile after rejected writes", c.profile(id), map[string]any{"keep": 1})
}
