package scenario

import (
	"math"
	"strconv"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// VariantSyncOff is the log pair's variant (PairScenarioName
// "log.sync_off").
const VariantSyncOff = "sync_off"

// LogScenario is the log pair's: POST /events over 64 keys at fixed rates,
// a ceiling search on delivery p99 with the consumer keeping up (the
// services without an in-flight bound), and the
// synchronous_commit=off variant on both services' write path.
var LogScenario = RateScenario{
	Pair: LogPair,
	Load: Load{Phase: "write", Path: "/events", Body: func(n uint64) []byte {
		s := strconv.FormatUint(n, 10)
		return []byte(`{"type":"load.tick","key":"k` + strconv.FormatUint(n%64, 10) + `","payload":{"n":` + s + `}}`)
	}},
	CeilingLatency: "delivery",
	// the producer's answer too: a step whose consumer keeps up while
	// the write waits past the bound does not pass
	CeilingAck: "write",
	Variant:    VariantSyncOff,
	VariantEnv: map[string]map[string]string{
		pairs.NoKafka: {"SYNCHRONOUS_COMMIT": "off"},
		pairs.Kafka:   {"SYNCHRONOUS_COMMIT": "off"},
	},
	// The tuning table's before and after (docs/log.md), each a search of
	// the kafka side alone: kafka-go's Writer against franz-go's batching
	// producer, a commit after every batch against one a second, and 6
	// partitions against 3 (a topic and group of their own: a topic's
	// partitions are set when it is created).
	CeilingDesigns: []Extra{
		{Name: "kafka-go", Env: map[string]map[string]string{pairs.Kafka: {"KAFKA_PRODUCER": "kafka-go"}}},
		{Name: "sync-commit", Env: map[string]map[string]string{pairs.Kafka: {"KAFKA_COMMIT_INTERVAL": "0"}}},
		{Name: "partitions-6", Env: map[string]map[string]string{pairs.Kafka: {"KAFKA_PARTITIONS": "6", "KAFKA_TOPIC": "events-p6", "KAFKA_GROUP": "events-p6"}}},
	},
	// The producer's before at the variant's rate: write p50/p99 at
	// 200/s with kafka-go's Writer (no-kafka unchanged).
	Extras: []Extra{{Name: "kafka-go", Env: map[string]map[string]string{pairs.Kafka: {"KAFKA_PRODUCER": "kafka-go"}}}},
	Defaults: RateOptions{
		Rates:   []float64{100, 150, 200},
		Ceiling: true,
		// Each step first offers its rate for CeilingWarmup, so a first
		// step at 500/s is not a cold one.
		CeilingOpts: CeilingOptions{Start: 500, Factor: math.Sqrt2, Max: 32000, Bisect: 2,
			Warmup: CeilingWarmup, Step: CeilingStep, Rounds: CeilingRounds, P99: CeilingP99},
		Variant: true, VariantRate: 200, Extras: 1, Designs: true,
	},
}
