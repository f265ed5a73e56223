package kittest

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Exec runs one statement on pool (a test's schema, say), failing the
// test, naming the statement, if it fails.
func Exec(t testing.TB, pool *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	if _, err := pool.Exec(t.Context(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// Count runs a query returning one integer (a count(*)) on pool.
func Count(t testing.TB, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(t.Context(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// Counters returns the counters of the service at base (GET /stats,
// the same shape for every service), failing the test unless it answers
// 200.
func Counters(t testing.TB, base string) map[string]int64 {
	t.Helper()
	var st struct {
		Counters map[string]int64 `json:"counters"`
	}
	if s, raw := Do(t, http.MethodGet, base+"/stats", nil, &st); s != http.StatusOK {
		t.Fatalf("GET /stats: %d %s", s, raw)
	}
	return st.Counters
}

// Counter is one of Counters (0 when the service has none of that name).
func Counter(t testing.TB, base, name string) int64 {
	t.Helper()
	return Counters(t, base)[name]
}

// CountersReach waits up to d until the counter name, summed over the
// services at bases, is at least want, and returns each one's counters
// (in the order of bases). A service records an outcome, then counts it:
// a test that saw the records finished reads the counters through this,
// never at once, or it races the count.
func CountersReach(t testing.TB, d time.Duration, name string, want int64, bases ...string) []map[string]int64 {
	t.Helper()
	out := make([]map[string]int64, len(bases))
	Eventually(t, d, fmt.Sprintf("counter %s to reach %d", name, want), func() bool {
		var sum int64
		for i, b := range bases {
			out[i] = Counters(t, b)
			sum += out[i][name]
		}
		return sum >= want
	})
	return out
}

// Status is the status code of GET url.
func Status(t testing.TB, url string) int {
	t.Helper()
	s, _ := Do(t, http.MethodGet, url, nil, nil)
	return s
}
