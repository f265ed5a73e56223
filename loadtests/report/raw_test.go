package report

import (
	"math"
	"strings"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/raw"
)

// TestRawSection renders the raw loops and the services' shares of their
// engine's limit from the fixture's ceilings and batch throughput.
func TestRawSection(t *testing.T) {
	r := raw.Results{ID: "20260102T025000Z-raw", Settings: map[string]any{"duration_s": 3}, Loops: []raw.Result{
		{Engine: raw.Postgres, Loop: raw.InsertBatch, Desc: "rows", Items: 300, Seconds: 3, Rate: 100000},
		{Engine: raw.Postgres, Loop: raw.ClaimDelete, Desc: "rows", Items: 300, Seconds: 3, Rate: 25000},
		{Engine: raw.Postgres, Loop: raw.Wal2JSON, Desc: "rows", Items: 300, Seconds: 3, Rate: 100000},
		{Engine: raw.Kafka, Loop: raw.Produce, Error: "broker down"},
	}}
	md := RawSection(r, append(fixture(), throughputFixture()))
	for _, want := range []string{
		"## " + RawTitle,
		"| postgres | claim_delete | rows | 300 | 3 | 25000 |",
		"not measured: broker down",
		// insert_batch then claim_delete: 1 / (1/100000 + 1/25000) = 20000.
		// the throughput fixture's best no-rabbitmq end-to-end: 14050 at batch 1000.
		"| no-rabbitmq | postgres insert_batch → claim_delete | 20000 | 6500 (32% of 20000/s) | – | 14050 at batch 1000 (70% of 20000/s) |",
		// no-kafka: 50000/s limit; ceiling 16000, batch throughput 40000.
		"| no-kafka | postgres insert_batch → wal2json_decode | 50000 | 16000 (32% of 50000/s) | 40000 (80% of 50000/s) | 40050 at batch 1000 (80% of 50000/s) |",
		"| kafka | produce → fetch | not measured |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("missing %q in\n%s", want, md)
		}
	}
	if p, ok := PercentOfRaw(r, "no-kafka", 25000); !ok || math.Abs(p-50) > 1e-9 {
		t.Errorf("PercentOfRaw = %v %v", p, ok)
	}
}
