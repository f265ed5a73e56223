// Area: invalidation. A PUT invalidates every instance's cache (the peer's
// at once or once the invalidation arrives), and a fill racing a PUT is
// refused, so no stale value is cached.

package conformance

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/cache"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// runInvalidation checks that a write invalidates every instance's
// cache, even while a load of the old value is running.
func runInvalidation(t *testing.T, shared side, own ownTarget) {
	runTests(t, shared, own, []test{
		{"PutInvalidatesEverywhere", testPutInvalidates},
		{"PutDuringSlowLoadWins", testFillRace},
	})
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
