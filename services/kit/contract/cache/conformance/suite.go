package conformance

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/cache"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// Features are what distinguishes one side's cache from another's.
type Features struct {
	// SharedCache: the instances share one cache (Redis, a table, the
	// memory Backend), so a value one instance filled is a hit on the
	// other. False for the in-process cache, where each instance fills
	// its own.
	SharedCache bool
	// PushedInvalidation: each instance also keeps a copy of what it read
	// (redis' client-side mode), dropped when the server pushes the
	// invalidation of another instance's write. The peer's GET right
	// after a PUT may race that push, so the suite waits for the peer
	// (bounded, far below PRODUCT_TTL) even with a SharedCache; the
	// instance that wrote must still answer the new value at once.
	PushedInvalidation bool
}

// peerAtOnce reports whether the peer must serve a PUT's value at once
// (a shared cache nothing copies), rather than soon.
func (f Features) peerAtOnce() bool { return f.SharedCache && !f.PushedInvalidation }

// Target is one running side under test (see kittest.Target): an
// instance, and a peer instance on the same origin (the same products
// table) and the same cache namespace (the same Redis key prefix, the
// same kv table, or, for in-process caches, the same invalidation
// channel). Neither side holds anything unconfirmed in the process (a
// write is answered once the origin or the cache has it), so Crash may be
// a Restart.
type Target interface {
	kittest.Target
	// PeerURL is the base URL of the peer instance.
	PeerURL() string
}

// Options are what a subtest asks of the target it starts.
type Options struct {
	// OriginWork is added to every origin load (ORIGIN_WORK_MS; the
	// memory Origin's Work). Zero: none.
	OriginWork time.Duration
}

// NewTarget starts a side on state of its own (a Postgres schema with the
// seeded products, a Redis key prefix), configured by o, and registers
// its cleanup.
type NewTarget func(t testing.TB, o Options) Target

// ownTarget starts a target of the subtest's own.
type ownTarget func(testing.TB, Options) side

// side is what each test gets: a target and the side's Features.
type side struct {
	Target
	Features Features
}

// peerServes reports whether the peer serves want as product id: checked
// once where it must at once (Features.peerAtOnce), else awaited for up
// to 10 s (failing the test if it never does).
func (s side) peerServes(t testing.TB, id int64, want cache.Product) bool {
	t.Helper()
	check := func() bool { p, _ := GetProduct(t, s.PeerURL(), id); return p == want }
	if s.Features.peerAtOnce() {
		return check()
	}
	kittest.Eventually(t, 10*time.Second, "the peer to serve the new value", check)
	return true
}

// Run is the cache pair's conformance suite: both services' tests call it
// with their side's Features and NewTarget, and both must pass it
// unchanged. Read-only subtests share one target and use product ids of
// their own; the others start their own target.
func Run(t *testing.T, f Features, newTarget NewTarget) {
	kittest.ValidateOpenAPI(t, kittest.NewOpenAPI(t, cache.OpenAPI))
	shared := side{Target: newTarget(t, Options{}), Features: f}
	own := func(t testing.TB, o Options) side { return side{Target: newTarget(t, o), Features: f} }
	tests := []struct {
		Name string
		Fn   func(*testing.T, side, ownTarget)
	}{
		{"OpenAPI", testOpenAPI},
		{"ReadThrough", testReadThrough},
		{"UnknownProductIs404", testUnknown},
		{"PutInvalidatesEverywhere", testPutInvalidates},
		{"KVRoundTrip", testKV},
		{"KVExpiry", testKVExpiry},
		{"BadInputIs4xx", testBadInput},
		{"HostileValues", testHostileValues},
		{"StampedeLoadsOnce", testStampede},
		{"PutDuringSlowLoadWins", testFillRace},
		{"StatsNames", testStats},
	}
	kittest.RunParallel(t, tests, func(t *testing.T, fn func(*testing.T, side, ownTarget)) { fn(t, shared, own) })
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

func testOpenAPI(t *testing.T, s side, _ ownTarget) {
	status, body := kittest.Do(t, http.MethodGet, s.URL()+"/openapi.yaml", nil, nil)
	if status != 200 || !bytes.Equal(body, cache.OpenAPI) {
		t.Errorf("GET /openapi.yaml: %d, %d bytes; want the embedded contract", status, len(body))
	}
}

// testReadThrough: a first GET is a miss from the origin, the next a hit
// from the cache, with the same product; on the peer a hit when the cache
// is shared, else a miss and then a hit.
func testReadThrough(t *testing.T, s side, _ ownTarget) {
	const id = 101
	first, xc := GetProduct(t, s.URL(), id)
	if xc != cache.Miss || first.ID != id || first.Name == "" {
		t.Fatalf("first GET: X-Cache %q, %+v; want a miss with product %d", xc, first, id)
	}
	status, xc, layer, _ := Get(t, fmt.Sprintf("%s/products/%d", s.URL(), id))
	if status != 200 || xc != cache.Hit || layer == cache.LayerOrigin || layer == "" {
		t.Fatalf("second GET: %d, X-Cache %q, layer %q; want a hit from the cache layer", status, xc, layer)
	}
	again, _ := GetProduct(t, s.URL(), id)
	if again != first {
		t.Errorf("hit %+v, miss %+v: want the same product", again, first)
	}
	want := cache.Miss
	if s.Features.SharedCache {
		want = cache.Hit
	}
	if p, xc := GetProduct(t, s.PeerURL(), id); xc != want || p != first {
		t.Errorf("peer GET: X-Cache %q, %+v; want %q with %+v (Features.SharedCache %v)", xc, p, want, first, s.Features.SharedCache)
	}
	if _, xc := GetProduct(t, s.PeerURL(), id); xc != cache.Hit {
		t.Errorf("peer's second GET: X-Cache %q, want hit", xc)
	}
}

func testUnknown(t *testing.T, s side, _ ownTarget) {
	for _, id := range []int64{cache.Products + 1, 9999999999999999} {
		if status, _, _, raw := Get(t, fmt.Sprintf("%s/products/%d", s.URL(), id)); status != 404 {
			t.Errorf("GET /products/%d: %d %s, want 404", id, status, raw)
		}
		u := cache.ProductUpdate{Name: "x", PriceCents: 1, Stock: 1}
		if status, raw := kittest.Do(t, http.MethodPut, fmt.Sprintf("%s/products/%d", s.URL(), id), u, nil); status != 404 {
			t.Errorf("PUT /products/%d: %d %s, want 404", id, status, raw)
		}
	}
}

// testPutInvalidates: with the product cached on both instances, a PUT on
// one makes the next GET there return the new value at once, and the
// peer's soon (at once for a shared cache; once the invalidation has
// arrived for an in-process one).
func testPutInvalidates(t *testing.T, _ side, own ownTarget) {
	s := own(t, Options{})
	const id = 202
	for range 2 {
		GetProduct(t, s.URL(), id)
		GetProduct(t, s.PeerURL(), id)
	}
	name := kittest.UniqueName(t, "renamed")
	put := PutProduct(t, s.URL(), id, cache.ProductUpdate{Name: name, PriceCents: 4242, Stock: 7})
	if put.ID != id || put.Name != name || put.PriceCents != 4242 || put.Stock != 7 {
		t.Fatalf("PUT answered %+v", put)
	}
	if p, xc := GetProduct(t, s.URL(), id); p != put || xc != cache.Miss {
		t.Errorf("GET after PUT: X-Cache %q, %+v; want a miss with %+v", xc, p, put)
	}
	if !s.peerServes(t, id, put) {
		t.Errorf("peer GET after PUT on a shared cache: old value")
	}
	if _, xc := GetProduct(t, s.PeerURL(), id); xc != cache.Hit {
		t.Errorf("peer's GET after the refill: X-Cache %q, want hit", xc)
	}
}

func kvURL(s side, key string) string { return s.URL() + "/kv/" + key }

func testKV(t *testing.T, s side, _ ownTarget) {
	values := []string{`{"a":[1,2,{"b":null}],"s":"é\u00e9"}`, `[]`, `"text"`, `42`, `null`, `true`, strings.Repeat(" ", 10) + `{"padded": 1}`,
		`"` + strings.Repeat("x", cache.MaxValueBytes-2) + `"`}
	for i, v := range values {
		key := kittest.UniqueName(t, fmt.Sprintf("k%d", i))
		if status, raw := kittest.Do(t, http.MethodPut, kvURL(s, key)+"?ttl=1h", v, nil); status != 204 {
			t.Fatalf("PUT value %d: %d %s", i, status, raw)
		}
		status, xc, layer, raw := Get(t, kvURL(s, key))
		if status != 200 || xc != cache.Hit || layer == cache.LayerOrigin || string(raw) != v {
			t.Fatalf("GET value %d: %d, X-Cache %q, layer %q, %.80q; want the stored bytes", i, status, xc, layer, raw)
		}
		if status, raw := kittest.Do(t, http.MethodDelete, kvURL(s, key), nil, nil); status != 204 {
			t.Fatalf("DELETE: %d %s", status, raw)
		}
		if status, _, _, raw := Get(t, kvURL(s, key)); status != 404 {
			t.Fatalf("GET after DELETE: %d %.80s, want 404", status, raw)
		}
	}
	key := kittest.UniqueName(t, "overwrite")
	kittest.Do(t, http.MethodPut, kvURL(s, key), `1`, nil)
	kittest.Do(t, http.MethodPut, kvURL(s, key), `2`, nil)
	if _, _, _, raw := Get(t, kvURL(s, key)); string(raw) != "2" {
		t.Errorf("after two PUTs: %s, want 2", raw)
	}
	if status, raw := kittest.Do(t, http.MethodDelete, kvURL(s, kittest.UniqueName(t, "absent")), nil, nil); status != 204 {
		t.Errorf("DELETE of an absent key: %d %s, want 204", status, raw)
	}
}

// testKVExpiry: a key with a short TTL answers 404 once it has passed,
// whether or not the side has removed it yet; a long TTL keeps it.
func testKVExpiry(t *testing.T, s side, _ ownTarget) {
	short, long := kittest.UniqueName(t, "short"), kittest.UniqueName(t, "long")
	kittest.Do(t, http.MethodPut, kvURL(s, long)+"?ttl=1h", `"kept"`, nil)
	if status, raw := kittest.Do(t, http.MethodPut, kvURL(s, short)+"?ttl=300ms", `"gone"`, nil); status != 204 {
		t.Fatalf("PUT ttl=300ms: %d %s", status, raw)
	}
	start := time.Now()
	kittest.Eventually(t, 10*time.Second, "the short key to expire", func() bool {
		status, _, _, _ := Get(t, kvURL(s, short))
		return status == 404
	})
	if time.Since(start) < 250*time.Millisecond {
		t.Logf("expired after %v (the first GET may have come late)", time.Since(start))
	}
	if status, _, _, raw := Get(t, kvURL(s, long)); status != 200 || string(raw) != `"kept"` {
		t.Errorf("long key: %d %s", status, raw)
	}
	// Outside [MinTTL, MaxTTL] a ttl the pattern admits is clamped, not
	// refused: 0s expires at once, 9999h is kept.
	zero, huge := kittest.UniqueName(t, "zero"), kittest.UniqueName(t, "huge")
	for key, ttl := range map[string]string{zero: "0s", huge: "9999h"} {
		if status, raw := kittest.Do(t, http.MethodPut, kvURL(s, key)+"?ttl="+ttl, `0`, nil); status != 204 {
			t.Fatalf("PUT ttl=%s: %d %s", ttl, status, raw)
		}
	}
	kittest.Eventually(t, 10*time.Second, "the ttl=0s key to expire", func() bool {
		status, _, _, _ := Get(t, kvURL(s, zero))
		return status == 404
	})
	if status, _, _, raw := Get(t, kvURL(s, huge)); status != 200 {
		t.Errorf("ttl=9999h key: %d %s", status, raw)
	}
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

// testStampede: 100 concurrent GETs of one uncached product make one
// origin load on the instance (singleflight, and a second look into the
// cache before loading); all get the same product.
func testStampede(t *testing.T, _ side, own ownTarget) {
	s := own(t, Options{})
	const id, n = 404, 100
	before := kittest.Counter(t, s.URL(), cache.CounterOriginLoads)
	var wg sync.WaitGroup
	bodies := make([]string, n)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			status, _, _, raw := Get(t, fmt.Sprintf("%s/products/%d", s.URL(), id))
			if status != 200 {
				t.Errorf("GET %d: %d %s", i, status, raw)
			}
			bodies[i] = string(raw)
		})
	}
	close(start)
	wg.Wait()
	for i := range bodies {
		if bodies[i] != bodies[0] {
			t.Fatalf("answer %d differs: %s vs %s", i, bodies[i], bodies[0])
		}
	}
	if loads := kittest.Counter(t, s.URL(), cache.CounterOriginLoads) - before; loads != 1 {
		t.Errorf("%d concurrent misses made %d origin loads, want 1", n, loads)
	}
}

func testStats(t *testing.T, s side, _ ownTarget) {
	GetProduct(t, s.URL(), 505)
	status, st := kittest.GetJSON(t, s.URL()+"/stats")
	if status != 200 {
		t.Fatalf("GET /stats: %d", status)
	}
	counters, _ := st["counters"].(map[string]any)
	for _, n := range cache.Counters {
		if _, ok := counters[n]; !ok {
			t.Errorf("/stats counters lack %q: %v", n, counters)
		}
	}
	lat, _ := st["latencies"].(map[string]any)
	for _, n := range cache.Latencies {
		if _, ok := lat[n]; !ok {
			t.Errorf("/stats latencies lack %q", n)
		}
	}
}

// SlowLoad is the origin work of testFillRace (and of the sides' own
// variants): long enough for a PUT to commit and invalidate while a load
// that read the old row is still running.
const SlowLoad = 400 * time.Millisecond

// DuringSlowLoad starts a GET of product id on base, waits until that
// GET has missed (the counter misses has grown) and a little more, so that
// the origin load is running on its snapshot, then runs change (an update
// the load does not see). It returns the product the GET answered.
// Whether change really landed inside the load is timing, on a shared
// machine; the caller checks the answer was the old value (the race was
// driven) before it draws conclusions.
func DuringSlowLoad(t testing.TB, base string, id int64, change func()) cache.Product {
	t.Helper()
	misses := kittest.Counter(t, base, cache.CounterMisses)
	got := make(chan cache.Product, 1)
	go func() {
		// Not GetProduct: Fatal is for the test's goroutine.
		status, _, _, raw := Get(t, fmt.Sprintf("%s/products/%d", base, id))
		var p cache.Product
		if err := json.Unmarshal(raw, &p); status != http.StatusOK || err != nil {
			t.Errorf("slow GET /products/%d: %d %s", id, status, raw)
		}
		got <- p
	}()
	kittest.Eventually(t, 10*time.Second, "the slow GET to miss", func() bool {
		return kittest.Counter(t, base, cache.CounterMisses) > misses
	})
	time.Sleep(SlowLoad / 4)
	change()
	return <-got
}

// testFillRace: a GET misses and its origin load (SlowLoad long) reads
// the row; meanwhile a PUT on the same instance commits and invalidates;
// the load then ends and fills. The fill must be refused (Backend.Fill:
// the key was invalidated since the miss), so the next GET on each
// instance returns the PUT's value, not the old one until PRODUCT_TTL.
// With an in-process cache the peer holds the product beforehand and is
// told by its own invalidation. Tried on up to three products until the
// slow GET did answer the old value, i.e. its load really ran across the
// PUT.
func testFillRace(t *testing.T, _ side, own ownTarget) {
	s := own(t, Options{OriginWork: SlowLoad})
	for attempt := int64(1); ; attempt++ {
		id := 600 + attempt
		if !s.Features.SharedCache {
			GetProduct(t, s.PeerURL(), id)
		}
		var put cache.Product
		name := kittest.UniqueName(t, fmt.Sprintf("race%d", attempt))
		old := DuringSlowLoad(t, s.URL(), id, func() {
			put = PutProduct(t, s.URL(), id, cache.ProductUpdate{Name: name, PriceCents: attempt, Stock: 1})
		})
		if p, xc := GetProduct(t, s.URL(), id); p != put {
			t.Fatalf("GET after a PUT that committed during a slow load: X-Cache %q, %+v; want %+v (the load's fill outlived the invalidation)", xc, p, put)
		}
		if !s.peerServes(t, id, put) {
			t.Fatalf("peer GET after the race: the old value")
		}
		if old != put {
			return
		}
		if attempt == 3 {
			t.Logf("the PUT never landed inside the slow load in %d attempts: the race was not driven", attempt)
			return
		}
	}
}
