package experiments

import (
	"strings"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
)

// TestDocumentsSessionExpiry runs documents-session-expiry at Small: the
// Postgres side's delete job removes every expired session within the
// bound and no live session reads 404; the MongoDB side is measured or
// says why not (FerretDB refuses the TTL index).
func TestDocumentsSessionExpiry(t *testing.T) {
	r := runSmall(t, DocumentsSessionExpiry)
	m := r.Metrics
	if m["pg_all_removed_after_s"] <= 0 {
		t.Errorf("pg_all_removed_after_s = %v (present: %v), want > 0", m["pg_all_removed_after_s"], hasSessionMetric(m, "pg_all_removed_after_s"))
	}
	if v, ok := m["pg_left_at_end"]; !ok || v != 0 {
		t.Errorf("pg_left_at_end = %v (present: %v), want 0", v, ok)
	}
	if v, ok := m["pg_live_lost"]; !ok || v != 0 {
		t.Errorf("pg_live_lost = %v (present: %v), want 0", v, ok)
	}
	if !hasSessionMetric(m, "pg_fg_p99_baseline_ms") || m["pg_fg_reads_baseline"] == 0 {
		t.Errorf("no foreground reads before the removal: %v", m)
	}
	status, ok := r.Settings["mongo_status"]
	switch {
	case ok && !strings.HasPrefix(status, "not measured"):
		t.Errorf("mongo_status = %q, want it to start with \"not measured\"", status)
	case !ok && !hasSessionMetric(m, "mongo_expired"):
		t.Errorf("the MongoDB side has neither metrics nor a status: %v %v", m, r.Settings)
	case !ok && m["mongo_live_lost"] != 0:
		t.Errorf("mongo_live_lost = %v, want 0", m["mongo_live_lost"])
	}
}

// hasSessionMetric reports whether m holds k.
func hasSessionMetric(m map[driver.Metric]float64, k driver.Metric) bool {
	_, ok := m[k]
	return ok
}
