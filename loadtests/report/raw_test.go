package report

import (
	"math"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/raw"
)

// TestRawSection renders the raw loops and the services' shares of their
// engine's limit from the fixture's ceilings and batch throughput.
func TestRawSection(t *testing.T) {
	r := raw.Results{ID: "20260102T025000Z-raw", Settings: map[string]any{"duration_s": 3}, Loops: []raw.Result{
		{Engine: raw.Postgres, Loop: raw.InsertBatch, Desc: "rows", Items: 300, Seconds: 3, Rate: 100000},
		{Engine: raw.Postgres, Loop: raw.ClaimDelete, Desc: "rows", Items: 300, Seconds: 3, Rate: 25000},
		{Engine: raw.Postgres, Loop: raw.RecordUpdate, Desc: "rows", Items: 300, Seconds: 3, Rate: 50000},
		{Engine: raw.Postgres, Loop: raw.Wal2JSON, Desc: "rows", Items: 300, Seconds: 3, Rate: 100000},
		{Engine: raw.RabbitMQ, Loop: raw.Publish, Desc: "messages", Items: 300, Seconds: 3, Rate: 20000},
		{Engine: raw.RabbitMQ, Loop: raw.Consume, Desc: "messages", Items: 300, Seconds: 3, Rate: 40000},
		{Engine: raw.Kafka, Loop: raw.Produce, Error: "broker down"},
	}}
	md := RawSection(r, append(fixture(), throughputFixture()))
	wantContains(t, "section", md,
		"## "+RawTitle,
		"| postgres | claim_delete | rows | 300 | 3 | 25000 |",
		"not measured: broker down",
		// no-rabbitmq: insert_batch ×2, claim_delete, record_update ×2:
		// 1 / (2/100000 + 1/25000 + 2/50000) = 10000. The throughput
		// fixture's best no-rabbitmq end-to-end: 14050 at batch 1000.
		"| no-rabbitmq | postgres insert_batch ×2 → postgres claim_delete → postgres record_update ×2 | 10000 | 6500 (65% of 10000/s) | not measured | 14050 at batch 1000 (141% of 10000/s) | the same path (no other engine) |",
		// rabbitmq: 1 / (1/100000 + 1/20000 + 1/40000 + 2/50000) = 8000;
		// RabbitMQ alone: 1 / (1/20000 + 1/40000) = 13333.
		"| rabbitmq | postgres insert_batch → rabbitmq publish → rabbitmq consume → postgres record_update ×2 | 8000 |",
		"rabbitmq publish → rabbitmq consume: ",
		"% of 13333/s |",
		// no-kafka: 1 / (1/100000 + 1/100000 + 1/100000) = 33333; ceiling
		// 16000, batch throughput 40000.
		"| no-kafka | postgres insert_batch → postgres wal2json_decode → postgres insert_batch | 33333 | 16000 (48% of 33333/s) | 40000 (120% of 33333/s) | 40050 at batch 1000 (120% of 33333/s) |",
		"| kafka | postgres insert_batch → kafka produce → kafka fetch → postgres insert_batch | not measured |",
	)
	if p, ok := PercentOfRaw(r, "no-kafka", 25000); !ok || math.Abs(p-75) > 1e-6 {
		t.Errorf("PercentOfRaw = %v %v", p, ok)
	}
}
