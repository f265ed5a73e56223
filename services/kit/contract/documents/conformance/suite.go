package conformance

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/documents"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// Features are capabilities one backend may lack; the suite skips what a
// side does not declare, after checking it fails cleanly (a 422), and the
// skip names the flag.
type Features struct {
	// NestedArrays: arrays directly inside arrays ([[1,2],[3]]) can be
	// stored. Postgres and MongoDB can; FerretDB v1 cannot.
	NestedArrays bool
}

// Target is one running service under test (see kittest.Target).
//
// Restart stops the instance gracefully and starts a new one on the same
// database or schema. Neither side holds anything unconfirmed in the
// process (a write is answered once the database has it), so a side's
// Crash may be a Restart; the suite checks that every answered write
// survives both.
type Target interface {
	kittest.Target
	// BodyLimit is the service's BODY_LIMIT in bytes (at least 3 MiB, for
	// the 2 MB documents).
	BodyLimit() int64
	// SearchMaxBytes is the service's SEARCH_MAX_BYTES (at most a third of
	// BodyLimit, so the suite can store users larger than a page).
	SearchMaxBytes() int64
}

// NewTarget starts a service on fresh storage (a unique Postgres schema, a
// unique MongoDB database) that the test's cleanup removes.
type NewTarget func(t testing.TB) Target

// side is what each test gets: a target and the side's Features.
type side struct {
	Target
	Features Features
}

// Run is the conformance suite of the documents pair: both services' tests
// call it with their side's Features and NewTarget, and both must pass it
// unchanged. It starts two targets: one for the search-equivalence data
// set alone (so that its scans never meet the 2 MB documents: FerretDB
// scans every document), one shared by the other subtests; the restart
// test starts its own. Subtests run in parallel; each uses its own emails
// and dataset tag, so they do not see each other's users.
func Run(t *testing.T, f Features, newTarget NewTarget) {
	kittest.ValidateOpenAPI(t, kittest.NewOpenAPI(t, documents.OpenAPI))
	tg := side{Target: newTarget(t), Features: f}
	searchTarget := side{Target: newTarget(t), Features: f}
	c := &client{t: t, base: tg.URL()}
	t.Run("SearchMatchesJSONBContainment", func(t *testing.T) {
		t.Parallel()
		testSearchEquivalence(t, &client{t: t, base: searchTarget.URL()}, searchTarget)
	})
	t.Run("WritesSurviveRestartAndCrash", func(t *testing.T) {
		t.Parallel()
		testRestartCrash(t, side{Target: newTarget(t), Features: f})
	})
	tests := []struct {
		Name string
		Fn   func(*testing.T, *client, side)
	}{
		{"OpenAPIAndBackend", testOpenAPIAndBackend},
		{"CRUD", testCRUD},
		{"DuplicateEmailConflicts", testDuplicateEmail},
		{"BadInputIs4xx", testBadInput},
		{"HostileValues", testHostileValues},
		{"MergePatchNullRemoves", testMerge},
		{"ReplaceProfile", testReplace},
		{"LargeDocumentsRoundTrip", testLarge},
		{"SearchPagination", testPagination},
		{"SearchFilterLimits", testSearchLimits},
		{"SearchPagesBoundedInBytes", testSearchBytes},
		{"StatsNames", testStats},
		{"NestedArrays", testNestedArrays},
	}
	kittest.RunParallel(t, tests, func(t *testing.T, fn func(*testing.T, *client, side)) { fn(t, c.with(t), tg) })
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

func testOpenAPIAndBackend(t *testing.T, c *client, _ side) {
	status, body := c.do("GET", "/openapi.yaml", nil)
	if status != 200 || !bytes.Equal(body, documents.OpenAPI) {
		t.Errorf("GET /openapi.yaml: %d, %d bytes; want the embedded contract", status, len(body))
	}
	var b documents.BackendInfo
	c.must(200, "GET", "/backend", nil, &b)
	if (b.Backend != "postgres" && b.Backend != "mongodb") || b.Server == "" || b.Notes == nil {
		t.Errorf("GET /backend: %+v", b)
	}
	t.Logf("backend %s: %s, notes %q", b.Backend, b.Server, b.Notes)
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

// genProfile makes varied profiles: the same keys with values of different
// JSON types, arrays of scalars, objects and arrays, nested objects, nulls.
func genProfile(r *rand.Rand, ds string, nested bool) map[string]any {
	pick := func(vs ...any) any { return vs[r.IntN(len(vs))] }
	p := map[string]any{"ds": ds}
	if r.IntN(4) > 0 {
		p["tier"] = pick("gold", "silver", 1, "1", 1.5, true, false, nil, map[string]any{"name": "gold"}, []any{"gold"})
	}
	if r.IntN(4) > 0 {
		tags := []any{}
		for _, tg := range []any{"a", "b", "c", 1, "1", nil, true, []any{"x", "y"}, []any{"x"}} {
			if _, isArray := tg.([]any); isArray && !nested {
				continue
			}
			if r.IntN(3) == 0 {
				tags = append(tags, tg)
			}
		}
		p["tags"] = pick(tags, tags, tags, "a", map[string]any{"a": true})
	}
	if r.IntN(3) > 0 {
		addr := map[string]any{"city": pick("Oslo", "Lima", "Kyiv", nil)}
		if r.IntN(2) == 0 {
			addr["geo"] = map[string]any{"lat": pick(1, 2, 2.0, "2"), "lng": pick(10, 20)}
		}
		if r.IntN(3) == 0 {
			addr["zip"] = pick("0150", 150, []any{"0150"})
		}
		p["address"] = addr
	}
	if r.IntN(3) > 0 {
		pets := []any{}
		for range r.IntN(4) {
			pet := map[string]any{"kind": pick("cat", "dog", "fish")}
			if r.IntN(2) == 0 {
				pet["age"] = pick(1, 2, 3, "3", nil)
			}
			if r.IntN(3) == 0 {
				pet["toys"] = pick([]any{"ball"}, []any{"ball", "rope"}, []any{})
			}
			pets = append(pets, pet)
		}
		p["pets"] = pets
	}
	if r.IntN(5) == 0 && nested {
		p["matrix"] = pick([]any{[]any{1, 2}, []any{3}}, []any{[]any{1}}, []any{1, 2, 3})
	}
	if r.IntN(6) == 0 {
		p["empty"] = pick(map[string]any{}, []any{}, nil, "")
	}
	if r.IntN(3) == 0 {
		p["0"] = pick(0, "zero", map[string]any{"0": 0})
	}
	return p
}

// searchQueries are containment documents exercising every rule; "ds" is
// added to each.
var searchQueries = []string{
	`{}`,
	`{"tier":"gold"}`, `{"tier":1}`, `{"tier":"1"}`, `{"tier":1.0}`, `{"tier":1.5}`, `{"tier":true}`, `{"tier":null}`,
	`{"tier":{}}`, `{"tier":[]}`, `{"tier":{"name":"gold"}}`, `{"tier":["gold"]}`,
	`{"tags":["a"]}`, `{"tags":["a","b"]}`, `{"tags":["b","a","a"]}`, `{"tags":"a"}`, `{"tags":[1]}`, `{"tags":["1"]}`,
	`{"tags":[null]}`, `{"tags":[true]}`, `{"tags":[]}`, `{"tags":[["x"]]}`, `{"tags":[["y","x"]]}`, `{"tags":[[]]}`,
	`{"tags":{"a":true}}`, `{"tags":{}}`,
	`{"address":{}}`, `{"address":{"city":"Oslo"}}`, `{"address":{"city":null}}`, `{"address":{"geo":{"lat":2}}}`,
	`{"address":{"geo":{"lat":"2"}}}`, `{"address":{"geo":{}}}`, `{"address":{"zip":"0150"}}`, `{"address":{"zip":["0150"]}}`,
	`{"address":{"zip":150,"city":"Lima"}}`,
	`{"pets":[]}`, `{"pets":[{}]}`, `{"pets":[{"kind":"cat"}]}`, `{"pets":[{"kind":"cat"},{"kind":"dog"}]}`,
	`{"pets":[{"kind":"cat","age":3}]}`, `{"pets":[{"age":"3"}]}`, `{"pets":[{"age":null}]}`, `{"pets":[{"toys":[]}]}`,
	`{"pets":[{"toys":["rope"]}]}`, `{"pets":[{"toys":"ball"}]}`, `{"pets":{"kind":"cat"}}`,
	`{"matrix":[[1]]}`, `{"matrix":[1]}`, `{"matrix":[[3],[1,2]]}`, `{"matrix":[[]]}`,
	`{"empty":{}}`, `{"empty":[]}`, `{"empty":null}`, `{"empty":""}`,
	`{"0":0}`, `{"0":{"0":0}}`, `{"0":{}}`,
	`{"tier":"gold","tags":["a"]}`, `{"nope":1}`,
}

func testSearchEquivalence(t *testing.T, c *client, tg side) {
	ds := kittest.UniqueName(t, "ds")
	r := rand.New(rand.NewPCG(42, 7))
	const n = 300
	profiles := make([]map[string]any, n)
	for i := range profiles {
		profiles[i] = genProfile(r, ds, tg.Features.NestedArrays)
	}
	// Create concurrently; keep each id's profile as the service stored it.
	start := time.Now()
	stored := map[string]any{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	work := make(chan int, n) // buffered: a worker that dies cannot block the feed
	for i := range n {
		work <- i
	}
	close(work)
	for range 6 {
		wg.Go(func() {
			for i := range work {
				// Not c.create: t.Fatal must not run outside the test's
				// goroutine.
				body := map[string]any{"email": fmt.Sprintf("%s-%d@example.com", ds, i), "name": "n", "plan": "free", "profile": profiles[i]}
				status, raw := c.do("POST", "/users", body)
				var u documents.User
				if status != 201 || json.Unmarshal(raw, &u) != nil {
					t.Errorf("POST /users: %d %.300s", status, raw)
					continue
				}
				v, err := documents.Parse(u.Profile)
				if err != nil {
					t.Error(err)
					continue
				}
				mu.Lock()
				stored[u.ID] = v
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	t.Logf("created %d users in %v", n, time.Since(start))
	start = time.Now()
	if t.Failed() {
		t.FailNow()
	}
	queries := slices.Clone(searchQueries)
	// Plus sub-documents of stored profiles: each matches at least its source.
	for i := range 15 {
		src := profiles[r.IntN(n)]
		sub := map[string]any{}
		for k, v := range src {
			if r.IntN(2) == 0 || i%5 == 0 {
				sub[k] = v
			}
		}
		b, _ := json.Marshal(sub)
		queries = append(queries, string(b))
	}
	total := 0
	for _, qs := range queries {
		qv, err := documents.Parse([]byte(qs))
		if err != nil {
			t.Fatalf("query %s: %v", qs, err)
		}
		q := append(documents.Object{{Key: "ds", Value: ds}}, qv.(documents.Object)...)
		var want []string
		for id, p := range stored {
			if documents.Contains(p, q) {
				want = append(want, id)
			}
		}
		slices.Sort(want)
		got := searchAll(c, q, 100)
		total += len(got)
		if !slices.Equal(got, want) {
			t.Errorf("search %s: %d users, want %d (jsonb @> semantics)\n got %v\nwant %v", qs, len(got), len(want), got, want)
		}
	}
	t.Logf("%d queries over %d users, %d matches in all, in %v", len(queries), n, total, time.Since(start))
	if total < n {
		t.Errorf("only %d matches in all: the data set is not exercising search", total)
	}
}

// searchAll pages through every match, checking order and cursors, and
// returns the ids.
func searchAll(c *client, q documents.Object, limit int) []string {
	c.t.Helper()
	var ids []string
	after := ""
	for page := 0; ; page++ {
		body := map[string]any{"profile": q, "limit": limit}
		if after != "" {
			body["after"] = after
		}
		var res documents.SearchResponse
		c.must(200, "POST", "/users/search", body, &res)
		for _, u := range res.Users {
			if len(ids) > 0 && u.ID <= ids[len(ids)-1] {
				c.t.Fatalf("search %s: id %s after %s: not ascending", documents.Encode(q), u.ID, ids[len(ids)-1])
			}
			if len(u.Profile) == 0 {
				c.t.Fatalf("search result without profile")
			}
			ids = append(ids, u.ID)
		}
		if res.Next == nil {
			return ids
		}
		if len(res.Users) != limit {
			c.t.Fatalf("search page %d: %d users with a next cursor, want %d", page, len(res.Users), limit)
		}
		after = *res.Next
	}
}

func testPagination(t *testing.T, c *client, _ side) {
	ds := kittest.UniqueName(t, "pg")
	var ids []string
	for i := range 7 {
		ids = append(ids, c.create(fmt.Sprintf("%s-%d@example.com", ds, i), map[string]any{"ds": ds, "i": i}).ID)
	}
	slices.Sort(ids)
	q := documents.Object{{Key: "ds", Value: ds}}
	for _, limit := range []int{1, 3, 7, 8, 1000} {
		if got := searchAll(c, q, limit); !slices.Equal(got, ids) {
			t.Errorf("limit %d: %v, want %v", limit, got, ids)
		}
	}
	var res documents.SearchResponse
	c.must(200, "POST", "/users/search", map[string]any{"profile": q, "limit": 7}, &res)
	if len(res.Users) != 7 || res.Next != nil {
		t.Errorf("exact page: %d users, next %v; want 7 and null", len(res.Users), res.Next)
	}
	// A cursor stays valid when its user is deleted (keyset, not offset).
	c.must(200, "POST", "/users/search", map[string]any{"profile": q, "limit": 2}, &res)
	c.must(204, "DELETE", "/users/"+res.Users[1].ID, nil, nil)
	var rest documents.SearchResponse
	c.must(200, "POST", "/users/search", map[string]any{"profile": q, "limit": 10, "after": *res.Next}, &rest)
	if len(rest.Users) != 5 || rest.Users[0].ID != ids[2] {
		t.Errorf("after a deleted cursor user: %d users", len(rest.Users))
	}
	// Default limit and an empty answer.
	c.must(200, "POST", "/users/search", map[string]any{"profile": map[string]any{"ds": ds, "i": 99}}, &res)
	if len(res.Users) != 0 || res.Next != nil || res.Users == nil {
		t.Errorf("no match: %+v", res)
	}
}

func testStats(t *testing.T, c *client, _ side) {
	u := c.create(uniqueEmail(t, "stats"), map[string]any{})
	c.must(200, "GET", "/users/"+u.ID, nil, nil)
	var s struct {
		Latencies map[string]any `json:"latencies"`
		Counters  map[string]any `json:"counters"`
	}
	c.must(200, "GET", "/stats", nil, &s)
	for _, n := range documents.Latencies {
		if _, ok := s.Latencies[n]; !ok {
			t.Errorf("/stats lacks latency %q: %v", n, s.Latencies)
		}
	}
	for _, n := range documents.Counters {
		if _, ok := s.Counters[n]; !ok {
			t.Errorf("/stats lacks counter %q", n)
		}
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

// numbers returns a JSON array of n distinct integers.
func numbers(n int) []any {
	a := make([]any, n)
	for i := range a {
		a[i] = i
	}
	return a
}

// testSearchLimits: a search document is bounded (values inside arrays,
// bytes) so that no backend evaluates a containment it cannot cancel; a
// document past a bound is a 422 naming it, before the backend sees it.
func testSearchLimits(t *testing.T, c *client, _ side) {
	ds := kittest.UniqueName(t, "lim")
	u := c.create(uniqueEmail(t, "lim"), map[string]any{"ds": ds, "a": numbers(documents.MaxSearchArrayValues)})
	var res documents.SearchResponse
	c.must(200, "POST", "/users/search", map[string]any{"profile": map[string]any{"ds": ds, "a": numbers(documents.MaxSearchArrayValues)}}, &res)
	if len(res.Users) != 1 || res.Users[0].ID != u.ID {
		t.Errorf("search at the array limit: %d users, want the one stored", len(res.Users))
	}
	pets := []any{}
	for range documents.MaxSearchArrayValues / 4 {
		pets = append(pets, map[string]any{"toys": []any{"ball", "rope"}, "kind": "cat"}) // 5 values each
	}
	limit := fmt.Sprint(documents.MaxSearchArrayValues)
	for _, tc := range []struct {
		name  string
		query any
		limit string
	}{
		{"one array past the limit", map[string]any{"a": numbers(documents.MaxSearchArrayValues + 1)}, limit},
		{"the issue's 100,000 elements", map[string]any{"a": numbers(100_000)}, limit},
		{"values inside arrays in all", map[string]any{"a": numbers(documents.MaxSearchArrayValues / 2), "b": map[string]any{"c": numbers(documents.MaxSearchArrayValues/2 + 1)}}, limit},
		{"objects inside arrays count their values", map[string]any{"pets": pets}, limit},
		{"bytes", map[string]any{"s": strings.Repeat("x", documents.MaxSearchBytes)}, fmt.Sprint(documents.MaxSearchBytes)},
	} {
		status, raw := c.do("POST", "/users/search", map[string]any{"profile": tc.query})
		var e struct{ Error string }
		if status != 422 || json.Unmarshal(raw, &e) != nil || !strings.Contains(e.Error, "limit is "+tc.limit) {
			t.Errorf("%s: %d %.300s, want 422 naming the limit %s", tc.name, status, raw, tc.limit)
		}
	}
}

// testSearchBytes: a search page is bounded in bytes as well as in count
// (SEARCH_MAX_BYTES), with a next cursor where the bytes cut it; a user
// larger than the bound comes alone.
func testSearchBytes(t *testing.T, c *client, tg side) {
	max := tg.SearchMaxBytes()
	if max*3 > tg.BodyLimit() {
		t.Fatalf("SearchMaxBytes %d, BodyLimit %d: the suite needs SEARCH_MAX_BYTES at most a third of BODY_LIMIT", max, tg.BodyLimit())
	}
	ds := kittest.UniqueName(t, "bytes")
	sizes := []int64{max * 6 / 5, max * 2 / 5, max * 2 / 5, max * 2 / 5, 10}
	var ids []string
	for i, size := range sizes {
		p := bigProfile(int(size), uint64(i))
		p["ds"] = ds
		ids = append(ids, c.create(fmt.Sprintf("%s-%d@example.com", ds, i), p).ID)
	}
	q := documents.Object{{Key: "ds", Value: ds}}
	var pages [][]string
	after := ""
	for len(pages) < 10 {
		body := map[string]any{"profile": q, "limit": documents.MaxLimit}
		if after != "" {
			body["after"] = after
		}
		status, raw := c.do("POST", "/users/search", body)
		var res documents.SearchResponse
		if status != 200 || json.Unmarshal(raw, &res) != nil {
			t.Fatalf("search: %d %.300s", status, raw)
		}
		var page []string
		var total int64
		for _, u := range res.Users {
			page = append(page, u.ID)
			total += documents.UserBytes(u)
		}
		if len(page) > 1 && total > max {
			t.Errorf("page %d: %d users, %d bytes: above SEARCH_MAX_BYTES %d (answer %d bytes)", len(pages), len(page), total, max, len(raw))
		}
		pages = append(pages, page)
		if res.Next == nil {
			break
		}
		after = *res.Next
	}
	want := [][]string{{ids[0]}, {ids[1], ids[2]}, {ids[3], ids[4]}}
	if !reflect.DeepEqual(pages, want) {
		t.Errorf("pages by size (SEARCH_MAX_BYTES %d, users of %v bytes):\n got %v\nwant %v", max, sizes, pages, want)
	}
	if got := searchAll(c, q, 1); !slices.Equal(got, ids) {
		t.Errorf("limit 1: %v, want %v", got, ids)
	}
}

// testRestartCrash checks that what a side answered survives a graceful
// restart and a crash: users created, patched and deleted before are
// found (or not found) as answered after.
func testRestartCrash(t *testing.T, tg side) {
	c := &client{t: t, base: tg.URL()}
	kept := c.create(uniqueEmail(t, "kept"), map[string]any{"n": 1})
	c.must(200, "PATCH", "/users/"+kept.ID+"/profile", map[string]any{"n": 2, "tag": "patched"}, nil)
	gone := c.create(uniqueEmail(t, "gone"), map[string]any{"n": 3})
	c.must(204, "DELETE", "/users/"+gone.ID, nil, nil)
	check := func(after string) {
		t.Helper()
		c := &client{t: t, base: tg.URL()}
		sameJSON(t, "profile after "+after, c.profile(kept.ID), map[string]any{"n": 2, "tag": "patched"})
		if status, raw := c.do("GET", "/users/"+gone.ID, nil); status != 404 {
			t.Errorf("deleted user after %s: %d %s, want 404", after, status, raw)
		}
		if status, raw := c.do("POST", "/users", map[string]any{"email": kept.Email, "name": "n", "plan": "p"}); status != 409 {
			t.Errorf("duplicate email after %s: %d %s, want 409 (the unique index survived)", after, status, raw)
		}
	}
	tg.Restart(t)
	check("a restart")
	tg.Crash(t)
	check("a crash")
}
