// Area: users and profiles. Creating, reading, patching, replacing and
// deleting users; merge-patch and replace of profiles; duplicate emails;
// 2 MB profiles and nested arrays (Features.NestedArrays); the common
// profile size bound (ProfileSizeBound, ProfileSizeBoundConcurrentPatches).

package conformance

import (
	"encoding/json"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/documents"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
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
		{"ProfileSizeBound", testProfileSizeBound},
		{"ProfileSizeBoundConcurrentPatches", testProfileSizeBoundConcurrent},
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

// testProfileSizeBound: a profile is bounded on every side by the same
// documents.MaxProfileBytes, counted by documents.ProfileSize. Grown by
// PATCHes to exactly the bound it is stored; one byte more, by a PATCH,
// a PUT or a POST, is a 422 naming the bound, and the user is unchanged
// (a refused POST creates nobody). Replacing or removing a key frees
// what it held.
func testProfileSizeBound(t *testing.T, c *client, _ side) {
	const chunk = 2 << 20 // one PATCH's string, under every BODY_LIMIT of the suite
	// Four members "kN" of strings: 5 + 4 × (2 + 2 + 5) + their bytes.
	fixed := int64(5 + 4*(2+2+5))
	last := int(documents.MaxProfileBytes - fixed - 3*chunk)
	str := func(n int, fill string) string { return strings.Repeat(fill, n) }
	rc := rawClient{base: c.base}

	u := c.create(uniqueEmail(t, "bound"), map[string]any{"k0": "a"})
	rc.patch(t, u.ID, map[string]any{"k0": str(chunk, "a")})
	rc.patch(t, u.ID, map[string]any{"k1": str(chunk, "b")})
	rc.patch(t, u.ID, map[string]any{"k2": str(chunk, "c")})
	status, b := rc.do(t, "PATCH", "/users/"+u.ID+"/profile", map[string]any{"k3": str(last+1, "d")})
	refusedAtBound(t, "a PATCH making the profile one byte over the bound", status, b)
	sameKeys(t, "after the refused PATCH", rc.keys(t, u.ID), map[string]int{"k0": chunk, "k1": chunk, "k2": chunk})
	rc.patch(t, u.ID, map[string]any{"k3": str(last, "d")})
	atBound := map[string]int{"k0": chunk, "k1": chunk, "k2": chunk, "k3": last}
	p := rc.profile(t, u.ID)
	sameKeys(t, "a profile of exactly the bound", stringLengths(p), atBound)
	if p["k3"] != str(last, "d") {
		t.Fatalf("k3 came back changed")
	}

	// Replacing a key counts its new value, not both; removing one frees it.
	rc.patch(t, u.ID, map[string]any{"k0": str(chunk, "e")})
	rc.patch(t, u.ID, map[string]any{"k0": nil, "k4": str(chunk, "f")})
	atBound = map[string]int{"k4": chunk, "k1": chunk, "k2": chunk, "k3": last}
	sameKeys(t, "after a replaced and a swapped key", rc.keys(t, u.ID), atBound)
	status, b = c.do("PATCH", "/users/"+u.ID+"/profile", map[string]any{"k5": ""})
	refusedAtBound(t, "a PATCH adding an empty string to a profile at the bound", status, b)
	sameKeys(t, "after the refused PATCH at the bound", rc.keys(t, u.ID), atBound)

	// An array of small numbers is small as JSON and large as stored
	// (indexes and 8-byte numbers): the fewest zeros past the bound (about
	// 540,000, 1 MB of body) so that the two refusals below parse no more
	// of them than they must.
	n := zerosPast(documents.MaxProfileBytes)
	zeros := []byte(`{"zeros":[0` + strings.Repeat(",0", n-1) + `]}`)
	status, b = rc.do(t, "PUT", "/users/"+u.ID+"/profile", zeros)
	refusedAtBound(t, "a PUT of a profile past the bound", status, b)
	sameKeys(t, "after the refused PUT", rc.keys(t, u.ID), atBound)
	email := uniqueEmail(t, "bound-post")
	create := []byte(`{"email":"` + email + `","name":"n","plan":"p","profile":` + string(zeros) + `}`)
	status, b = rc.do(t, "POST", "/users", create)
	refusedAtBound(t, "a POST of a profile past the bound", status, b)
	c.create(email, map[string]any{}) // the refused POST created nobody
}

// rawClient is testProfileSizeBound's client for its large exchanges:
// they skip the OpenAPI check (kin-openapi takes seconds per megabyte of
// profile); the small refusal the test sends with client.do is checked.
type rawClient struct {
	base string
}

// do sends body (encoded as kittest.NewRequest does) with method to
// path, unchecked against the OpenAPI document, and returns the status
// and the raw answer.
func (c rawClient) do(t testing.TB, method, path string, body any) (int, []byte) {
	t.Helper()
	resp, err := kittest.Client.Do(kittest.NewRequest(t, method, c.base+path, body))
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp.StatusCode, b
}

// patch merge-patches the profile of user id with body and fails the
// test unless it is stored (200).
func (c rawClient) patch(t testing.TB, id string, body any) {
	t.Helper()
	if status, b := c.do(t, "PATCH", "/users/"+id+"/profile", body); status != 200 {
		t.Fatalf("PATCH /users/%s/profile: %d %.300s, want 200", id, status, b)
	}
}

// profile decodes the user's profile once (a GET of 8 MiB is the
// test's largest cost after the service's own).
func (c rawClient) profile(t testing.TB, id string) map[string]any {
	t.Helper()
	status, b := c.do(t, "GET", "/users/"+id, nil)
	var u struct {
		Profile map[string]any `json:"profile"`
	}
	if status != 200 || json.Unmarshal(b, &u) != nil {
		t.Fatalf("GET /users/%s: %d %.300s", id, status, b)
	}
	return u.Profile
}

// keys returns the keys of the user's profile with the lengths of their
// strings (stringLengths).
func (c rawClient) keys(t testing.TB, id string) map[string]int {
	t.Helper()
	return stringLengths(c.profile(t, id))
}

// stringLengths maps each key of p to the length of its value as a
// string (0 for a value of another type).
func stringLengths(p map[string]any) map[string]int {
	out := map[string]int{}
	for k, v := range p {
		s, _ := v.(string)
		out[k] = len(s)
	}
	return out
}

// refusedAtBound fails the test unless status and b, the answer to the
// request what names, are a 422 whose error names the bound,
// documents.MaxProfileBytes.
func refusedAtBound(t testing.TB, what string, status int, b []byte) {
	t.Helper()
	bound := strconv.Itoa(documents.MaxProfileBytes)
	var e struct {
		Error string `json:"error"`
	}
	if status != 422 || json.Unmarshal(b, &e) != nil || !strings.Contains(e.Error, bound) {
		t.Fatalf("%s: %d %.300s, want 422 naming the bound %s", what, status, b, bound)
	}
}

// sameKeys fails the test unless got, a profile's keys and string
// lengths (stringLengths), is want.
func sameKeys(t testing.TB, what string, got, want map[string]int) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: keys and string lengths %v, want %v", what, got, want)
	}
	for k, n := range want {
		if got[k] != n {
			t.Fatalf("%s: keys and string lengths %v, want %v", what, got, want)
		}
	}
}

// zerosPast returns the fewest zeros whose array, as the only member of
// a profile, documents.ProfileSize counts past bound (within 2%).
func zerosPast(bound int64) int {
	zero := json.Number("0")
	for n := int(bound / 16); ; n += n / 50 {
		zs := make([]any, n)
		for i := range zs {
			zs[i] = zero
		}
		if documents.ProfileSize(documents.Object{{Key: "zeros", Value: zs}}) > bound {
			return n
		}
	}
}

// testProfileSizeBoundConcurrent: PATCHes that each fit but together
// pass documents.MaxProfileBytes, sent at once, cannot all be stored:
// the size check and the write are atomic on every side. On a profile of
// one 2 MiB string, four PATCHes each add another: two fit (three would
// make 8 MiB plus 41 bytes), so exactly two are answered 200 and two
// 422, and the profile holds the two that won.
func testProfileSizeBoundConcurrent(t *testing.T, c *client, _ side) {
	const chunk = 2 << 20
	u := c.create(uniqueEmail(t, "bound-race"), map[string]any{"k0": "a"})
	send := func(body any) (int, []byte) {
		resp, err := kittest.Client.Do(kittest.NewRequest(t, "PATCH", c.base+"/users/"+u.ID+"/profile", body))
		if err != nil {
			return 0, []byte(err.Error())
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	if status, b := send(map[string]any{"k0": strings.Repeat("a", chunk)}); status != 200 {
		t.Fatalf("PATCH k0: %d %.300s", status, b)
	}
	keys := []string{"k1", "k2", "k3", "k4"}
	statuses := make([]int, len(keys))
	answers := make([][]byte, len(keys))
	var wg sync.WaitGroup
	for i, k := range keys {
		wg.Go(func() { statuses[i], answers[i] = send(map[string]any{k: strings.Repeat(k[1:], chunk)}) })
	}
	wg.Wait()
	var won []string
	for i, k := range keys {
		switch statuses[i] {
		case 200:
			won = append(won, k)
		case 422:
		default:
			t.Errorf("concurrent PATCH of %s: %d %.300s, want 200 or 422", k, statuses[i], answers[i])
		}
	}
	if len(won) != 2 {
		t.Fatalf("concurrent PATCHes stored: %v, want exactly two of %v (statuses %v)", won, keys, statuses)
	}
	var got documents.User
	c.must(200, "GET", "/users/"+u.ID, nil, &got)
	p, _ := generic(t, got.Profile).(map[string]any)
	if len(p) != 3 || p["k0"] == nil || p[won[0]] == nil || p[won[1]] == nil {
		names := make([]string, 0, len(p))
		for k := range p {
			names = append(names, k)
		}
		t.Fatalf("profile after the concurrent PATCHes has keys %v, want k0 and %v", names, won)
	}
}
