// Area: rate limits. A fixed window per key: exactly the limit admitted
// under 32 concurrent clients on both instances, 429 with Retry-After
// after, a new window after the reset, and bad input.

package conformance

import (
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/cache"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// runLimits checks the rate-limit role.
func runLimits(t *testing.T, shared side, own ownTarget) {
	runTests(t, shared, own, []test{
		{"LimitAccurateUnderConcurrency", testLimitAccuracy},
		{"LimitWindowResets", testLimitReset},
		{"LimitBadInput", testLimitBadInput},
	})
}

// TakeURL is the URL of key's take on base.
func TakeURL(base, key string) string { return base + "/limits/" + key + "/take" }

// TakeOnce sends one take and returns the status, the answer and the
// Retry-After header.
func TakeOnce(t testing.TB, base, key string, limit int64, window time.Duration) (int, cache.Take, string) {
	t.Helper()
	var tk cache.Take
	resp, raw := kittest.DoResponse(t, http.MethodPost, TakeURL(base, key), map[string]any{"limit": limit, "window_ms": window.Milliseconds()}, nil)
	if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusTooManyRequests {
		if err := decode(raw, &tk); err != nil {
			t.Errorf("take: %d %s: %v", resp.StatusCode, raw, err)
		}
	}
	return resp.StatusCode, tk, resp.Header.Get("Retry-After")
}

// testLimitAccuracy: 32 clients, half on each instance, take 10 times
// each from one key with a limit of 50 in a 30 s window: exactly 50 are
// admitted (each with its own remaining count, 49 down to 0), the other
// 270 are 429s with Retry-After.
func testLimitAccuracy(t *testing.T, s side, _ ownTarget) {
	key := kittest.UniqueName(t, "acc")
	const clients, each, limit = 32, 10, 50
	var (
		mu        sync.Mutex
		admitted  int
		refused   int
		remaining = map[int64]int{}
		wg        sync.WaitGroup
	)
	for c := range clients {
		base := s.URL()
		if c%2 == 1 {
			base = s.PeerURL()
		}
		wg.Go(func() {
			for range each {
				st, tk, ra := TakeOnce(t, base, key, limit, 30*time.Second)
				mu.Lock()
				switch st {
				case http.StatusOK:
					admitted++
					remaining[tk.Remaining]++
				case http.StatusTooManyRequests:
					refused++
					if n, err := strconv.Atoi(ra); err != nil || n < 1 || n > 31 || tk.Remaining != 0 || tk.Limit != limit {
						t.Errorf("429: Retry-After %q, %+v; want the rest of the window, remaining 0, limit %d", ra, tk, limit)
					}
				default:
					t.Errorf("take: %d", st)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if admitted != limit || refused != clients*each-limit {
		t.Errorf("%d takes of a limit of %d: %d admitted, %d refused; want %d and %d", clients*each, limit, admitted, refused, limit, clients*each-limit)
	}
	for r := range int64(limit) {
		if remaining[r] != 1 {
			t.Errorf("remaining %d answered %d times, want once (each admitted take counts once)", r, remaining[r])
		}
	}
}

// testLimitReset: limit 2 in a 2 s window: 200 (remaining 1), 200
// (remaining 0), 429 with Retry-After of 1 or 2 s; after the window,
// 200 again. A round whose three takes did not fit in the window (a
// stalled machine) proves nothing and is tried again with a new key.
func testLimitReset(t *testing.T, s side, _ ownTarget) {
	const window = 2 * time.Second
	for round := 1; ; round++ {
		key := kittest.UniqueName(t, "reset"+strconv.Itoa(round))
		start := time.Now()
		var answers [3]cache.Take
		var statuses [3]int
		var retryAfter string
		for i := range 2 {
			statuses[i], answers[i], _ = TakeOnce(t, s.URL(), key, 2, window)
		}
		statuses[2], answers[2], retryAfter = TakeOnce(t, s.PeerURL(), key, 2, window)
		if time.Since(start) >= window-100*time.Millisecond && round < 5 {
			continue // the window may have ended between the takes
		}
		for i, want := range []int64{1, 0} {
			if tk := answers[i]; statuses[i] != http.StatusOK || tk.Remaining != want || tk.Limit != 2 || tk.ResetMS < 0 || tk.ResetMS > window.Milliseconds() {
				t.Fatalf("take %d: %d %+v; want 200, remaining %d, reset within %v", i+1, statuses[i], tk, want, window)
			}
		}
		if tk := answers[2]; statuses[2] != http.StatusTooManyRequests || (retryAfter != "1" && retryAfter != "2") || tk.ResetMS > window.Milliseconds() {
			t.Fatalf("third take: %d %+v, Retry-After %q; want 429, Retry-After 1 or 2", statuses[2], tk, retryAfter)
		}
		kittest.Eventually(t, 10*time.Second, "a new window", func() bool {
			st, tk, _ := TakeOnce(t, s.URL(), key, 2, window)
			return st == http.StatusOK && tk.Remaining == 1
		})
		return
	}
}

func testLimitBadInput(t *testing.T, s side, _ ownTarget) {
	u := TakeURL(s.URL(), kittest.UniqueName(t, "badlimit"))
	for _, body := range []string{`{}`, `{"limit":1}`, `{"window_ms":100}`, `{"limit":0,"window_ms":100}`, `{"limit":-1,"window_ms":100}`,
		`{"limit":1000000001,"window_ms":100}`, `{"limit":1,"window_ms":0}`, `{"limit":1,"window_ms":86400001}`, `{"limit":1.5,"window_ms":100}`,
		`{"limit":1,"window_ms":100,"burst":3}`, `not json`} {
		checkError(t, http.MethodPost, u, body, http.StatusBadRequest)
	}
	for _, key := range []string{"a%20b", "%C3%A9", "x+y"} {
		checkError(t, http.MethodPost, TakeURL(s.URL(), key), `{"limit":1,"window_ms":100}`, http.StatusBadRequest)
	}
}
