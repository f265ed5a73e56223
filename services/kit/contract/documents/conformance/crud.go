// Area: users and profiles. Creating, reading, patching, replacing and
// deleting users; merge-patch and replace of profiles; duplicate emails;
// 2 MB profiles and nested arrays (Features.NestedArrays).

package conformance

import (
	"slices"
	"strings"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/documents"
)

// runCRUD checks creating, reading, patching, replacing and deleting
// users and their profiles, large and nested ones included.
func runCRUD(t *testing.T, c *client, tg side) {
	runTests(t, c, tg, []test{
		{"CRUD", testCRUD},
		{"DuplicateEmailConflicts", testDuplicateEmail},
		{"MergePatchNullRemoves", testMerge},
		{"ReplaceProfile", testReplace},
		{"LargeDocumentsRoundTrip", testLarge},
		{"NestedArrays", testNestedArrays},
	})
}

func testCRUD(t *testing.T, c *client, _ side) {
	email := uniqueEmail(t, "crud")
	profile := map[string]any{"lang": "en", "tags": []any{"a", 1, nil, true}, "address": map[string]any{"city": "Oslo", "zip": "0150"}}
	u := c.create(email, profile)
	if !documents.ValidID(u.ID) || u.Email != email || u.Plan != "free" || u.CreatedAt.IsZero() || u.UpdatedAt.IsZero() {
		t.Fatalf("created %+v", u)
	}
	sameJSON(t, "created profile", generic(t, u.Profile), profile)
	var got documents.User
	c.must(200, "GET", "/users/"+u.ID, nil, &got)
	if got.ID != u.ID || got.Email != email || got.Name != "N "+email {
		t.Errorf("GET: %+v", got)
	}
	sameJSON(t, "GET profile", generic(t, got.Profile), profile)

	var patched documents.User
	c.must(200, "PATCH", "/users/"+u.ID, map[string]any{"plan": "pro"}, &patched)
	if patched.Plan != "pro" || patched.Name != u.Name || patched.Profile != nil || patched.UpdatedAt.Before(u.UpdatedAt) {
		t.Errorf("PATCH plan: %+v", patched)
	}
	c.must(200, "PATCH", "/users/"+u.ID, map[string]any{"name": "Renamed"}, &patched)
	c.must(200, "GET", "/users/"+u.ID, nil, &got)
	if got.Name != "Renamed" || got.Plan != "pro" {
		t.Errorf("after PATCH: %+v", got)
	}
	sameJSON(t, "profile untouched by PATCH", generic(t, got.Profile), profile)

	c.must(204, "DELETE", "/users/"+u.ID, nil, nil)
	for _, r := range []struct{ method, path string }{
		{"GET", ""}, {"DELETE", ""}, {"PATCH", ""}, {"PATCH", "/profile"}, {"PUT", "/profile"},
	} {
		var body any
		switch {
		case r.method == "PATCH" && r.path == "":
			body = map[string]any{"name": "x"}
		case r.path != "":
			body = map[string]any{"a": 1}
		}
		status, raw := c.do(r.method, "/users/"+u.ID+r.path, body)
		if status != 404 || !strings.Contains(string(raw), `"error"`) {
			t.Errorf("%s after delete: %d %s, want 404", r.method+" "+r.path, status, raw)
		}
	}
	// The email is free again.
	c.create(email, map[string]any{})
}

func testDuplicateEmail(t *testing.T, c *client, _ side) {
	email := uniqueEmail(t, "dup")
	first := c.create(email, map[string]any{"a": 1})
	status, raw := c.do("POST", "/users", map[string]any{"email": email, "name": "other", "plan": "free"})
	if status != 409 || !strings.Contains(string(raw), `"error"`) {
		t.Fatalf("duplicate email: %d %s, want 409", status, raw)
	}
	sameJSON(t, "first user unchanged", c.profile(first.ID), map[string]any{"a": 1})
}

func testMerge(t *testing.T, c *client, _ side) {
	u := c.create(uniqueEmail(t, "merge"), map[string]any{
		"a": 1, "b": map[string]any{"c": 1, "d": 2}, "drop": []any{1}, "n": nil,
	})
	var s documents.User
	c.must(200, "PATCH", "/users/"+u.ID+"/profile",
		`{"b":{"x":2,"y":null},"drop":null,"absent":null,"e":"new","a":1.5}`, &s)
	if s.ID != u.ID || s.Profile != nil {
		t.Errorf("PATCH profile answer: %+v", s)
	}
	// Shallow: b is replaced (its nested null kept), top-level nulls remove
	// keys, an existing null stays.
	sameJSON(t, "merged", c.profile(u.ID), map[string]any{
		"a": 1.5, "b": map[string]any{"x": 2, "y": nil}, "e": "new", "n": nil,
	})
	c.must(200, "PATCH", "/users/"+u.ID+"/profile", `{}`, nil)
	c.must(200, "PATCH", "/users/"+u.ID+"/profile", `{"n":null,"e":null,"a":null,"b":null}`, nil)
	sameJSON(t, "all removed", c.profile(u.ID), map[string]any{})
	c.must(200, "PATCH", "/users/"+u.ID+"/profile", `{"z":[1,{"k":"v"}]}`, nil)
	sameJSON(t, "set on empty", c.profile(u.ID), map[string]any{"z": []any{1, map[string]any{"k": "v"}}})
}

func testReplace(t *testing.T, c *client, _ side) {
	u := c.create(uniqueEmail(t, "replace"), map[string]any{"a": 1, "b": 2})
	var s documents.User
	c.must(200, "PUT", "/users/"+u.ID+"/profile", `{"c":{"d":[null,false]},"b":"2"}`, &s)
	if s.Profile != nil || s.Email != u.Email {
		t.Errorf("PUT answer: %+v", s)
	}
	sameJSON(t, "replaced", c.profile(u.ID), map[string]any{"c": map[string]any{"d": []any{nil, false}}, "b": "2"})
	c.must(200, "PUT", "/users/"+u.ID+"/profile", `{}`, nil)
	sameJSON(t, "replaced by empty", c.profile(u.ID), map[string]any{})
}

func testLarge(t *testing.T, c *client, tg side) {
	if tg.BodyLimit() < 3<<20 {
		t.Fatalf("BodyLimit %d: the suite needs at least 3 MiB for 2 MB profiles", tg.BodyLimit())
	}
	p1 := bigProfile(2<<20, 1)
	u := c.create(uniqueEmail(t, "large"), p1)
	got := c.profile(u.ID)
	sameJSON(t, "2 MB profile after create", got, p1)
	p2 := bigProfile(2<<20, 2)
	c.must(200, "PUT", "/users/"+u.ID+"/profile", p2, nil)
	sameJSON(t, "2 MB profile after replace", c.profile(u.ID), p2)
	c.must(200, "PATCH", "/users/"+u.ID, map[string]any{"plan": "big"}, nil)
	sameJSON(t, "2 MB profile after neighbour write", c.profile(u.ID), p2)

	over := []byte(`{"pad":"` + strings.Repeat("x", int(tg.BodyLimit())) + `"}`)
	status, raw := c.do("PUT", "/users/"+u.ID+"/profile", over)
	if status != 413 || !strings.Contains(string(raw), "limit") {
		t.Errorf("body above BODY_LIMIT: %d %.200s, want 413", status, raw)
	}
}

func testNestedArrays(t *testing.T, c *client, tg side) {
	profile := map[string]any{"matrix": []any{[]any{1, 2}, []any{[]any{"deep"}}}}
	if !tg.Features.NestedArrays {
		status, raw := c.do("POST", "/users", map[string]any{"email": uniqueEmail(t, "nested"), "name": "n", "plan": "p", "profile": profile})
		if status != 422 || !strings.Contains(string(raw), "nested arrays") {
			t.Errorf("nested arrays on a backend without them: %d %s, want 422", status, raw)
		}
		t.Skip("Features.NestedArrays is false: the backend (FerretDB) does not store arrays inside arrays (checked: a clean 422)")
	}
	u := c.create(uniqueEmail(t, "nested"), profile)
	sameJSON(t, "nested arrays", c.profile(u.ID), profile)
	var res documents.SearchResponse
	c.must(200, "POST", "/users/search", map[string]any{"profile": map[string]any{"matrix": []any{[]any{2}, []any{[]any{}}}}}, &res)
	if !slices.ContainsFunc(res.Users, func(x documents.User) bool { return x.ID == u.ID }) {
		t.Errorf("nested array containment did not find the user")
	}
}
