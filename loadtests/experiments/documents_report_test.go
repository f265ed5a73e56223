package experiments

import (
	"strings"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/scenario"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// TestDocumentsReport: every report runs on the Postgres side at both
// sizes, with and without the expression index, the GIN index built and
// sized; the MongoDB side answers the counts (FerretDB too) and says why
// when it cannot average.
func TestDocumentsReport(t *testing.T) {
	t.Parallel()
	if !testing.Short() {
		kittest.Server(t, "MONGO_URL", kittest.DefaultMongoURL)
	}
	r := runSmall(t, DocumentsReport)
	for _, p := range reportPlans(Small) {
		k := scenario.ScaleLabel(p.users)
		for _, q := range []string{"counts", "average", "gold", "counts_expr"} {
			if r.Metrics[driver.Metric("pg_"+k+"_"+q+"_p50_ms")] <= 0 || r.Metrics[driver.Metric("pg_"+k+"_"+q+"_runs")] < 3 {
				t.Errorf("Postgres %s %s: p50 %v ms over %v runs", k, q, r.Metrics[driver.Metric("pg_"+k+"_"+q+"_p50_ms")], r.Metrics[driver.Metric("pg_"+k+"_"+q+"_runs")])
			}
		}
		if r.Metrics[driver.Metric("pg_"+k+"_gin_mb")] <= 0 || r.Metrics[driver.Metric("pg_"+k+"_gin_build_s")] <= 0 {
			t.Errorf("Postgres %s: GIN %v MB built in %v s", k, r.Metrics[driver.Metric("pg_"+k+"_gin_mb")], r.Metrics[driver.Metric("pg_"+k+"_gin_build_s")])
		}
		if st, ok := r.Settings["mongo_"+k+"_status"]; ok {
			t.Errorf("MongoDB side %s: %s", k, st)
		}
		if r.Metrics[driver.Metric("mongo_"+k+"_counts_p50_ms")] <= 0 {
			t.Errorf("MongoDB side %s: counts p50 %v ms", k, r.Metrics[driver.Metric("mongo_"+k+"_counts_p50_ms")])
		}
	}
}

// TestCardClauses: each beyond-CRUD result gives its card clause from its
// figures; a result that could not measure, or lacks a figure its clause
// reads, says "failed" and why instead of printing a 0.
func TestCardClauses(t *testing.T) {
	t.Parallel()
	f := &File{Results: []Result{
		{Name: DocumentsChangeFeed, Error: "postgres side: no insert arrived"},
		{Name: DocumentsReport, Metrics: map[driver.Metric]float64{"pg_1m_average_p50_ms": 3000}},
		{Name: ToastRewrite},
	}}
	got := CardClauses(f)
	if len(got) != 2 {
		t.Fatalf("%d clauses, want 2 (toast-rewrite has none): %q", len(got), got)
	}
	if !strings.Contains(got[0], "failed: postgres side: no insert arrived") {
		t.Errorf("an experiment that could not measure: %q", got[0])
	}
	if !strings.Contains(got[1], "failed: the results file lacks") || strings.Contains(got[1], " 0 ms") {
		t.Errorf("a result lacking figures: %q", got[1])
	}
	if CardClauses(nil) != nil {
		t.Error("no file: clauses")
	}
}
