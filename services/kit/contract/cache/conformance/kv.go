// Area: key-value API. Values round-trip byte for byte up to
// MaxValueBytes, and a key answers 404 once its TTL has passed.

package conformance

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/cache"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// runKV checks the key-value API and its expiry.
func runKV(t *testing.T, shared side, own ownTarget) {
	runTests(t, shared, own, []test{
		{"KVRoundTrip", testKV},
		{"KVExpiry", testKVExpiry},
	})
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
