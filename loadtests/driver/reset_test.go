package driver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestResetStatsRefusedNamesTheSetting checks that a service refusing
// POST /stats/reset (403 now, 404 from a build without the route) stops
// the driver with an error telling the user to set STATS_RESET=true, and
// that an allowed reset is no error.
func TestResetStatsRefusedNamesTheSetting(t *testing.T) {
	t.Parallel()
	for _, code := range []int{http.StatusForbidden, http.StatusNotFound, http.StatusOK} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodPost || r.URL.Path != "/stats/reset" {
				t.Errorf("driver sent %s %s", r.Method, r.URL.Path)
			}
			w.WriteHeader(code)
			_, _ = w.Write([]byte(`{"error":"no"}`))
		}))
		err := ResetStats(context.Background(), srv.URL)
		srv.Close()
		switch {
		case code == http.StatusOK && err != nil:
			t.Errorf("200: %v", err)
		case code != http.StatusOK && (err == nil || !strings.Contains(err.Error(), "STATS_RESET=true")):
			t.Errorf("%d: error %v, want one naming STATS_RESET=true", code, err)
		}
	}
}
