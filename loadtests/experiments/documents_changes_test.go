package experiments

import (
	"strings"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// TestDocumentsChangeFeed: the Postgres side delivers every acknowledged
// create on an open stream and on one resumed after a kill, with a
// measured latency; the MongoDB side is measured or says why not (501:
// FerretDB has no change streams).
func TestDocumentsChangeFeed(t *testing.T) {
	t.Parallel()
	if !testing.Short() {
		kittest.Server(t, "MONGO_URL", kittest.DefaultMongoURL)
	}
	r := runSmall(t, DocumentsChangeFeed)
	rates := changeFeedPlan(Small).rates
	for _, rate := range rates {
		p := feedRateKey("pg", rate)
		if r.Metrics[driver.Metric(p+"p99_ms")] <= 0 || r.Metrics[driver.Metric(p+"writes")] <= 0 {
			t.Errorf("Postgres at %d/s: p99 %v ms over %v writes", rate, r.Metrics[driver.Metric(p+"p99_ms")], r.Metrics[driver.Metric(p+"writes")])
		}
		if lost, ok := r.Metrics[driver.Metric(p+"changes_lost")]; !ok || lost != 0 {
			t.Errorf("Postgres at %d/s: changes_lost %v (recorded %v)", rate, lost, ok)
		}
	}
	if lost, ok := r.Metrics["pg_resume_lost"]; !ok || lost != 0 || r.Metrics["pg_resume_acked"] <= 0 {
		t.Errorf("Postgres resume: %v lost (recorded %v) of %v acknowledged", lost, ok, r.Metrics["pg_resume_acked"])
	}
	if r.AckedLost != 0 {
		t.Errorf("AckedLost %d", r.AckedLost)
	}
	if st, ok := r.Settings["mongo_status"]; ok {
		if !strings.HasPrefix(st, "not measured") {
			t.Errorf("mongo_status %q", st)
		}
	} else if r.Metrics[driver.Metric(feedRateKey("mongo", rates[0])+"p99_ms")] <= 0 {
		t.Errorf("the MongoDB side has neither figures nor a status: %v", r.Metrics)
	}
	t.Logf("metrics: %v", r.Metrics)
	t.Logf("settings: %v", r.Settings)
}
