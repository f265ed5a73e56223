// Area: search containment. Search answers what jsonb's @> answers: a
// varied data set on a target of its own, every containment rule and
// sub-documents of stored profiles, each checked against
// documents.Contains.

package conformance

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/documents"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

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
	stored := createProfiles(t, c, ds, profiles)
	start := time.Now()
	queries := withSubDocuments(r, profiles)
	total := checkSearches(t, c, ds, stored, queries)
	t.Logf("%d queries over %d users, %d matches in all, in %v", len(queries), n, total, time.Since(start))
	if total < n {
		t.Errorf("only %d matches in all: the data set is not exercising search", total)
	}
}

// createProfiles creates a user of data set ds for each of profiles,
// concurrently, and returns each id's profile as the service stored it;
// it stops the test if any create failed.
func createProfiles(t testing.TB, c *client, ds string, profiles []map[string]any) map[string]any {
	t.Helper()
	n := len(profiles)
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
	if t.Failed() {
		t.FailNow()
	}
	return stored
}

// withSubDocuments returns searchQueries plus 15 sub-documents of
// profiles picked with r: each matches at least its source.
func withSubDocuments(r *rand.Rand, profiles []map[string]any) []string {
	queries := slices.Clone(searchQueries)
	for i := range 15 {
		src := profiles[r.IntN(len(profiles))]
		sub := map[string]any{}
		for k, v := range src {
			if r.IntN(2) == 0 || i%5 == 0 {
				sub[k] = v
			}
		}
		b, _ := json.Marshal(sub)
		queries = append(queries, string(b))
	}
	return queries
}

// checkSearches searches data set ds for each of queries (with "ds"
// added), checks the ids found are those of stored that
// documents.Contains matches, and returns how many were found in all.
func checkSearches(t testing.TB, c *client, ds string, stored map[string]any, queries []string) (total int) {
	t.Helper()
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
	return total
}
