// Area: search pages and bounds. Pagination by keyset cursor, the bounds
// of a search document (values inside arrays, bytes) and of a page
// (SEARCH_MAX_BYTES); runSearch, the area's one call, also starts the
// containment test (containment.go).

package conformance

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/documents"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// runSearch checks search: containment as jsonb's @> on a data set of
// its own target (searchTarget), pagination and the bounds of a search
// and of a page.
func runSearch(t *testing.T, c *client, tg, searchTarget side) {
	t.Run("SearchMatchesJSONBContainment", func(t *testing.T) {
		t.Parallel()
		testSearchEquivalence(t, &client{t: t, base: searchTarget.URL()}, searchTarget)
	})
	runTests(t, c, tg, []test{
		{"SearchPagination", testPagination},
		{"SearchFilterLimits", testSearchLimits},
		{"SearchPagesBoundedInBytes", testSearchBytes},
	})
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
