package service

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/stats"
)

// resetStats builds a service from env, records one latency, posts
// /stats/reset and returns the answer and the count /stats shows after.
func resetStats(t testing.TB, env map[string]string) (int, map[string]any, int64) {
	t.Helper()
	c := ReadCommon(config.FromMap(env), ":0", 1<<20)
	svc := New(stats.Info{Service: "test", Pair: "none", Backend: "none"}, c.HTTP, slog.New(slog.DiscardHandler), []string{"work"}, nil)
	svc.Stats.Observe("work", time.Millisecond)
	rec := httptest.NewRecorder()
	svc.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/stats/reset", nil))
	var body map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatalf("POST /stats/reset: %d, body not JSON: %q", rec.Code, rec.Body.String())
	}
	return rec.Code, body, svc.Stats.Snapshot().Latencies["work"].Count
}

// TestStatsResetNeedsTheSetting checks that anyone cannot wipe a
// service's numbers: POST /stats/reset answers 403 naming STATS_RESET and
// zeroes nothing unless STATS_RESET=true, which the load driver sets.
func TestStatsResetNeedsTheSetting(t *testing.T) {
	t.Parallel()
	for _, env := range []map[string]string{nil, {"STATS_RESET": "false"}} {
		code, body, count := resetStats(t, env)
		if msg, _ := body["error"].(string); code != http.StatusForbidden || !strings.Contains(msg, "STATS_RESET=true") {
			t.Errorf("env %v: reset answered %d %v, want 403 naming STATS_RESET=true", env, code, body)
		}
		if count != 1 {
			t.Errorf("env %v: a refused reset left count %d, want 1", env, count)
		}
	}
	code, body, count := resetStats(t, map[string]string{"STATS_RESET": "true"})
	if code != http.StatusOK || body["latencies"] == nil || count != 0 {
		t.Errorf("STATS_RESET=true: reset answered %d %v and left count %d, want 200 with the numbers, then 0", code, body, count)
	}
}
