package scenario

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/cost"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/cache"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/cache/pgorigin"
)

// CacheReadLatency names the server latency a read ceiling step is
// judged by: a read's, hit or miss. /stats keeps a hit's (get_hit) and a
// miss's (get_miss, the origin's load included) apart; the step's p99 is
// unionP99's bound over both, the p99 itself when every read hit.
const CacheReadLatency = "get"

// CacheReadCeilingOpts is the read ceiling's declared ladder: from
// 1,000/s, √2 apart, up to 32,000/s. A hit is a map lookup in the
// process or one Redis GET, so both sides' ceilings are in the
// thousands, bounded by HTTP on 2 cores (the load driver's share
// included).
var CacheReadCeilingOpts = CeilingOptions{Start: 1000, Factor: math.Sqrt2, Max: 32000, Bisect: CeilingBisect,
	Warmup: CeilingWarmup, Step: CeilingStep, Rounds: CeilingRounds, P99: CeilingP99}

// readOp is the read ceiling's operation: GET /products/{id} of the
// profiles' Zipf sequence ids, in turn.
func readOp(ids []int) CeilingOp {
	return CeilingOp{Scenario: CacheReadCeiling, Latency: CacheReadLatency,
		Requests: func(base string) func(uint64) driver.Request {
			return func(n uint64) driver.Request {
				return driver.Request{Method: http.MethodGet, URL: base + "/products/" + strconv.Itoa(ids[n%uint64(len(ids))])}
			}
		},
		ServerP99: func(st *driver.ServerStats) (float64, bool) {
			if st == nil {
				return 0, false
			}
			return unionP99([]driver.Summary{st.Latencies[cache.StatGetHit], st.Latencies[cache.StatGetMiss]})
		}}
}

// productsWhy says what is wrong with an origin's count of the key
// space's products ("" when it holds all keys).
func productsWhy(got int64, err error, keys int) string {
	switch {
	case err != nil:
		return fmt.Sprintf("products not counted: %v", err)
	case got != int64(keys):
		return fmt.Sprintf("the origin holds %d of the %d products of the key space", got, keys)
	}
	return ""
}

// countProducts counts the products of ids 1 to keys in schema's origin
// table.
func (e *Env) countProducts(ctx context.Context, schema string, keys int) (int64, error) {
	return e.countRows(ctx, pgx.Identifier{schema, "products"}, "id BETWEEN 1 AND $1", keys)
}

// readCeiling runs the read ceiling search (when o asks) on each side's
// default mode (s.CeilingModes), on its first instance restarted with the
// search's in-flight bound. Every step proves its start: the side's
// origin holds the key space, both instances searched are quiet, a probe
// read is answered.
func (r *cacheRun) readCeiling(ctx context.Context, run *driver.Run) error {
	if !r.o.ReadCeiling {
		return nil
	}
	o := r.o.ReadCeilingOpts
	var quiet cost.Set
	for _, name := range r.s.CeilingModes {
		i := r.modeIndex(name)
		quiet = append(quiet, cost.Process(r.s.InstanceName(i, 0), 0, r.s.InstancePort(r.e, i, 0)))
	}
	var sides []ceilingSide
	modes := map[string]string{}
	for _, name := range r.s.CeilingModes {
		i := r.modeIndex(name)
		inFlight, err := r.boundFor(ctx, run, i, o)
		if err != nil {
			return err
		}
		svc := r.s.Modes[i].Service.Name
		schema := r.e.ServiceVar(svc, "DATABASE_SCHEMA", pgorigin.DefaultSchema)
		sides = append(sides, ceilingSide{name: svc, base: r.url(i, 0), costs: r.costSet(ctx, i), quiet: quiet, inFlight: inFlight,
			ready: func(ctx context.Context) string {
				n, err := r.e.countProducts(ctx, schema, r.o.Keys)
				return productsWhy(n, err, r.o.Keys)
			}})
		modes[svc] = name
	}
	run.Settings["read_ceiling_modes"] = modes
	return r.e.runOpCeiling(ctx, run, readOp(r.ids), sides, o)
}

// boundFor restarts mode i's first instance with o.MaxInFlight (unless
// o leaves the services' own bound) and returns the bound it runs with.
func (r *cacheRun) boundFor(ctx context.Context, run *driver.Run, i int, o CeilingOptions) (*int, error) {
	if o.MaxInFlight < 0 {
		return nil, nil
	}
	env := map[string]string{"MAX_IN_FLIGHT": strconv.Itoa(o.MaxInFlight)}
	if err := r.start(ctx, i, 0, env); err != nil {
		return nil, err
	}
	run.Settings["read_ceiling_env"] = env
	n := o.MaxInFlight
	return &n, nil
}

// validateCeiling says what is wrong with the read ceiling's declaration:
// one mode of each side, the Postgres side's first, and options that
// can climb.
func (s CacheScenario) validateCeiling() error {
	var errs []error
	if len(s.CeilingModes) != 2 {
		errs = append(errs, fmt.Errorf("cache: the read ceiling needs one mode of each side, got %v", s.CeilingModes))
	}
	for k, name := range s.CeilingModes {
		i := modeIndexOf(s.Modes, name)
		if i < 0 || s.Modes[i].Service != []Service{s.Pair.A, s.Pair.B}[min(k, 1)] {
			errs = append(errs, fmt.Errorf("cache: read ceiling mode %q is not a mode of side %d", name, k+1))
		}
	}
	return errors.Join(append(errs, s.Defaults.ReadCeilingOpts.validate(string(CacheReadCeiling)))...)
}

// modeIndexOf is the index of the mode named name in modes, or -1.
func modeIndexOf(modes []CacheMode, name string) int {
	for i, m := range modes {
		if m.Name == name {
			return i
		}
	}
	return -1
}
