// Area: read-through. A miss loads from the origin and the next read hits
// (on the peer too when the cache is shared); an unknown product is a 404;
// a stampede of concurrent misses makes one origin load.

package conformance

import (
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/cache"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// runReadThrough checks reads through the cache: a miss loads from the
// origin (once, however many ask), the next read hits.
func runReadThrough(t *testing.T, shared side, own ownTarget) {
	runTests(t, shared, own, []test{
		{"ReadThrough", testReadThrough},
		{"UnknownProductIs404", testUnknown},
		{"StampedeLoadsOnce", testStampede},
	})
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
