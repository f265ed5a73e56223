package scenario

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/cost"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// EventStoreAppendCeiling is the event store's ceiling search: appends
// per second, each a first event appended to a stream of its own with
// the expected version the engine can check.
const EventStoreAppendCeiling = "eventstore.append.ceiling"

// EventStoreAppendLatency is the /stats latency of an append, which a
// step is judged by.
const EventStoreAppendLatency = "append"

// EventStoreAppendCeilingOpts is the append ceiling's declared ladder:
// from 250/s, √2 apart, up to 16,000/s. An append commits one
// transaction on Postgres and one acknowledged produce on Kafka, so both
// ceilings are expected in the hundreds to thousands.
var EventStoreAppendCeilingOpts = CeilingOptions{Start: 250, Factor: math.Sqrt2, Max: 16000, Bisect: CeilingBisect,
	Warmup: CeilingWarmup, Step: CeilingStep, Rounds: CeilingRounds, P99: CeilingP99}

// EventStoreCeilingServices are the services the append ceiling searches:
// no-kurrentdb and kafka-eventstore, and kurrentdb when KURRENTDB_URL is
// set (KurrentDB cannot be installed on the native stack: its service
// has no server to talk to otherwise, and the bench reports it "not
// measured here").
func (e *Env) EventStoreCeilingServices() []Service {
	svcs := []Service{ServiceOf(pairs.NoKurrentDB), ServiceOf(pairs.KafkaEventStore)}
	if e.ServiceVar(pairs.KurrentDB, "KURRENTDB_URL", "") != "" {
		svcs = append(svcs, ServiceOf(pairs.KurrentDB))
	}
	return svcs
}

// appendOp is the append ceiling's operation: POST
// /streams/{stream}/events of one TankRegistered event to a stream no
// request sent before (a prefix of the run's, a number per attack, the
// request's number), expecting "no_stream" where the engine checks
// expected versions (expected[base] set: no-kurrentdb, kurrentdb) and
// "any" where it cannot (Kafka, which refuses any other). A fresh stream
// per append keeps every append the same work all step long (no stream
// grows, no append conflicts with another); the bench's growing and
// reset series measure appends in order to a stream.
func appendOp(prefix string, conditional map[string]bool) CeilingOp {
	var attacks atomic.Uint64
	body := func(expected string) []byte {
		return []byte(`{"expected_version":"` + expected + `","events":[{"type":"TankRegistered","data":{"capacity_liters":1000}}]}`)
	}
	checked, anyVersion := body("no_stream"), body("any")
	return CeilingOp{Scenario: EventStoreAppendCeiling, Latency: EventStoreAppendLatency,
		Requests: func(base string) func(uint64) driver.Request {
			stream := base + "/streams/" + prefix + "-" + strconv.FormatUint(attacks.Add(1), 10) + "-"
			b := anyVersion
			if conditional[base] {
				b = checked
			}
			return func(n uint64) driver.Request {
				return driver.Request{Method: http.MethodPost, URL: stream + strconv.FormatUint(n, 10) + "/events", Body: b}
			}
		}}
}

// conditionalAppend asks base's /capabilities whether it checks an
// append's expected version.
func conditionalAppend(ctx context.Context, base string) (bool, error) {
	code, b, err := driver.Do(ctx, http.MethodGet, base+"/capabilities", nil)
	if err != nil {
		return false, err
	}
	if code != http.StatusOK {
		return false, fmt.Errorf("GET /capabilities answered %d", code)
	}
	var caps struct {
		Conditional bool `json:"conditional_append"`
	}
	err = json.Unmarshal(b, &caps)
	return caps.Conditional, err
}

// RunEventStoreCeiling runs the append ceiling search with o on the
// services of EventStoreCeilingServices, each started (or restarted) with
// the search's in-flight bound, into run. Every step proves its start:
// the services quiet, a probe append answered. The Postgres side's
// events table and Kafka's topic grow by every step's appends: an append
// to a new stream costs the same whatever the table's size.
func RunEventStoreCeiling(ctx context.Context, e *Env, run *driver.Run, o CeilingOptions) error {
	svcs := e.EventStoreCeilingServices()
	if o.MaxInFlight < 0 {
		// ceilingInFlight starts them otherwise, with the bound.
		if err := e.Ensure(ctx, svcs, nil, nil); err != nil {
			return err
		}
	}
	inFlight, _, err := e.ceilingInFlight(ctx, run, ceilingScenario{name: CeilingScenarioName(pairs.EventStore, "")}, svcs, o)
	if err != nil {
		return err
	}
	conditional, expected := map[string]bool{}, map[string]string{}
	kafka := cost.Kafka(e.stackDir())
	kafka.Name = "kafka"
	quiet := e.ownQuiet(svcs)
	var sides []ceilingSide
	for _, s := range svcs {
		base := e.URL(s.Name)
		c, err := conditionalAppend(ctx, base)
		if err != nil {
			return fmt.Errorf("%s: %w", s.Name, err)
		}
		conditional[base], expected[s.Name] = c, "any"
		if c {
			expected[s.Name] = "no_stream"
		}
		sides = append(sides, ceilingSide{name: s.Name, base: base, costs: e.sideCosts(ctx, s, kafka), quiet: quiet, inFlight: inFlight[s.Name]})
	}
	run.Settings["expected_version"] = expected
	prefix := "ceiling-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	run.Settings["stream_prefix"] = prefix
	return e.runOpCeiling(ctx, run, appendOp(prefix, conditional), sides, o)
}

// EventStoreCeilingEstimate is the expected duration of the append
// ceiling with o on e's services: their starts, then the search.
func (e *Env) EventStoreCeilingEstimate(o CeilingOptions, settle time.Duration) Estimate {
	n := len(e.EventStoreCeilingServices())
	start := time.Duration(n) * serviceStart
	return Estimate{Typical: start, Bound: start}.Add(o.opEstimate(n, settle, true))
}
