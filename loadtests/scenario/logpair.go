package scenario

import (
	"math"
	"strconv"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

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
	Variant:        "sync_off",
	VariantEnv: map[string]map[string]string{
		pairs.NoKafka: {"SYNCHRONOUS_COMMIT": "off"},
		pairs.Kafka:   {"SYNCHRONOUS_COMMIT": "off"},
	},
	Defaults: RateOptions{
		Rates:   []float64{100, 150, 200},
		Ceiling: true,
		// The search starts at 1000/s: the fixed rates measure the low
		// end, and give the knee its low-rate p99.
		CeilingOpts: CeilingOptions{Start: 1000, Factor: math.Sqrt2, Max: 32000, Bisect: 2,
			Step: 4 * time.Second, Rounds: 3, P99: 100 * time.Millisecond, KneeFactor: DefaultKneeFactor},
		Variant: true, VariantRate: 200,
	},
}
