package scenario

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/cost"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// CachePair is the cache pair (issue 10): no-redis (the Postgres side)
// and redis.
var CachePair = Pair{Name: pairs.Cache, A: ServiceOf(pairs.NoRedis), B: ServiceOf(pairs.Redis)}

// CacheMode is one way a side of the cache pair runs: its service and the
// environment that selects the mode. Every mode is a "side" of the cache
// scenario's points, driven identically.
type CacheMode struct {
	// Name labels the mode in points ("redis", "local", "unlogged",
	// "logged", "client-side").
	Name string
	// Service is the side it runs on.
	Service Service
	// Env selects the mode.
	Env map[string]string
}

// CacheProfile is a mix of product reads and updates.
type CacheProfile struct {
	// Name labels the point ("read_heavy").
	Name string
	// ReadPct is the percentage of GETs; the rest are PUTs.
	ReadPct int
}

// CacheOptions parameterize the cache scenario.
type CacheOptions struct {
	// Rate is the product profiles' arrival rate, KVRate the kv points'.
	Rate, KVRate float64
	// Duration is each attack's, Rounds the rounds per point.
	Duration time.Duration
	Rounds   int
	// Keys is the size of the Zipf-distributed product id set (ids 1 to
	// Keys), ZipfS its exponent (> 1).
	Keys  int
	ZipfS float64
	// StampedeN is how many concurrent GETs of one cold key the stampede
	// sends; OriginWorkMS the ORIGIN_WORK_MS the services run with for the
	// stampede and the staleness points, so the loads overlap.
	StampedeN    int
	OriginWorkMS int
	// StaleTTL is the PRODUCT_TTL of the staleness point: the redis and
	// unlogged modes stay stale until it ends.
	StaleTTL time.Duration
	// RawDuration is each raw lookup loop's (pgx vs go-redis, no HTTP).
	RawDuration time.Duration
	// ReadCeiling runs the read ceiling search (CacheReadCeiling) with
	// ReadCeilingOpts, after the raw lookups.
	ReadCeiling     bool
	ReadCeilingOpts CeilingOptions
}

// CacheScenario declares the cache pair's scenario: the modes driven, the
// profiles and the options it runs with by default.
type CacheScenario struct {
	// Pair is the pair driven.
	Pair Pair
	// Modes are the modes, the Postgres table first and Redis second
	// (ratios are first ÷ second).
	Modes []CacheMode
	// Profiles are the product read/write mixes.
	Profiles []CacheProfile
	// CeilingModes are the modes the read ceiling searches, one per side,
	// the Postgres side's first: each side's default (no-redis' CACHE_MODE
	// local, the in-process cache; redis' CACHE_MODE redis).
	CeilingModes []string
	// Defaults are the options the cache command starts from (also the
	// results command's size).
	Defaults CacheOptions
}

// CacheCounters are the /stats counters every cache point records as
// "counter.<name>".
var CacheCounters = []string{"hits", "misses", "origin_loads", "invalidations", "evictions", "bypasses"}

// Cache is the cache pair's scenario: the unlogged table and Redis
// first, then the in-process cache, the logged table and Redis'
// client-side caching (rueidis, RESP3 tracking); three profiles
// at 400/s, kv writes and reads at 400/s, 100 concurrent misses with a
// 100 ms origin, a 3 s TTL for the staleness window. Sized so that
// `results` runs it in under 5 minutes on 2 cores.
var Cache = CacheScenario{
	Pair: CachePair,
	Modes: []CacheMode{
		{Name: "unlogged", Service: ServiceOf(pairs.NoRedis), Env: map[string]string{"CACHE_MODE": "unlogged", "CACHE_TABLE": "unlogged"}},
		{Name: "redis", Service: ServiceOf(pairs.Redis), Env: map[string]string{"CACHE_MODE": "redis"}},
		{Name: "local", Service: ServiceOf(pairs.NoRedis), Env: map[string]string{"CACHE_MODE": "local"}},
		{Name: "logged", Service: ServiceOf(pairs.NoRedis), Env: map[string]string{"CACHE_MODE": "unlogged", "CACHE_TABLE": "logged"}},
		// A key prefix of its own: the redis mode's fills must not be
		// the client-side mode's hits (each mode starts cold).
		{Name: "client-side", Service: ServiceOf(pairs.Redis), Env: map[string]string{"CACHE_MODE": "client-side", "REDIS_KEY_PREFIX": "cache-cs:"}},
	},
	Profiles:     []CacheProfile{{"read_heavy", 95}, {"mixed", 50}, {"write_heavy", 5}},
	CeilingModes: []string{"local", "redis"},
	Defaults: CacheOptions{Rate: 400, KVRate: 400, Duration: 3 * time.Second, Rounds: 2, Keys: 10000, ZipfS: 1.1,
		StampedeN: 100, OriginWorkMS: 100, StaleTTL: 3 * time.Second, RawDuration: 3 * time.Second,
		ReadCeiling: true, ReadCeilingOpts: CacheReadCeilingOpts},
}

// Validate says what is missing or inconsistent in a declared scenario.
func (s CacheScenario) Validate() error {
	var errs []error
	if s.Pair.Name == "" || len(s.Modes) < 2 || len(s.Profiles) == 0 {
		errs = append(errs, fmt.Errorf("cache: a pair, at least two modes and a profile are required"))
	}
	seen := map[string]bool{}
	for _, m := range s.Modes {
		if m.Name == "" || seen[m.Name] || m.Env["CACHE_MODE"] == "" {
			errs = append(errs, fmt.Errorf("cache: mode %q needs a name of its own and a CACHE_MODE", m.Name))
		}
		if m.Service != s.Pair.A && m.Service != s.Pair.B {
			errs = append(errs, fmt.Errorf("cache: mode %q runs on %q, not a side of the pair", m.Name, m.Service.Name))
		}
		seen[m.Name] = true
	}
	for _, p := range s.Profiles {
		if p.Name == "" || p.ReadPct < 0 || p.ReadPct > 100 {
			errs = append(errs, fmt.Errorf("cache: profile %q needs a name and a read percentage in [0, 100]", p.Name))
		}
	}
	d := s.Defaults
	if d.Rate <= 0 || d.KVRate <= 0 || d.Duration <= 0 || d.Rounds < 1 || d.Keys < 2 || d.ZipfS <= 1 ||
		d.StampedeN < 2 || d.OriginWorkMS <= 0 || d.StaleTTL <= 0 || d.RawDuration <= 0 {
		errs = append(errs, fmt.Errorf("cache: defaults %+v incomplete", d))
	}
	return errors.Join(append(errs, s.validateCeiling())...)
}

// Sides returns the modes' names, in order.
func (s CacheScenario) Sides() []string {
	out := make([]string, len(s.Modes))
	for i, m := range s.Modes {
		out[i] = m.Name
	}
	return out
}

// InstanceName is the launcher's name of instance j of mode i
// ("no-redis@local-1").
func (s CacheScenario) InstanceName(i, j int) string {
	return s.Modes[i].Service.Name + "@" + s.Modes[i].Name + "-" + strconv.Itoa(j)
}

// InstancePort is the port of instance j (0 or 1) of mode i: the side's
// port plus the offset plus 100 per instance slot, so every instance has
// a port of its own beside the services on their default ports.
func (s CacheScenario) InstancePort(e *Env, i, j int) int {
	return s.Modes[i].Service.Port + e.PortOffset + 100*(1+2*i+j)
}

// Estimate returns the expected duration of a run with o, each ceiling
// step's wait for its start bounded by 1.5 × settle.
func (s CacheScenario) Estimate(o CacheOptions, settle time.Duration) Estimate {
	modes := len(s.Modes)
	// Every instance started twice (plain, then slow origin and short TTL).
	start := time.Duration(2*2*modes) * 1500 * time.Millisecond
	e := Estimate{Typical: start, Bound: 2 * start}
	e = e.Add(attacks((len(s.Profiles)+2)*modes*o.Rounds, o.Duration, 0))
	raw := time.Duration(2*o.Rounds) * o.RawDuration
	e = e.Add(Estimate{Attacks: 2 * o.Rounds, Typical: raw, Bound: raw})
	origin := time.Duration(o.OriginWorkMS) * time.Millisecond
	per := time.Duration(modes*o.Rounds) * (2*(origin+300*time.Millisecond) + o.StaleTTL/2 + time.Second)
	bound := time.Duration(modes*o.Rounds) * (2*(origin+300*time.Millisecond) + o.StaleTTL + 3*time.Second)
	e = e.Add(Estimate{Typical: per, Bound: bound})
	if o.ReadCeiling {
		e = e.Add(o.ReadCeilingOpts.opEstimate(len(s.CeilingModes), settle, true))
	}
	return e
}

// cacheRun is one run of the scenario: its environment and options.
type cacheRun struct {
	s      CacheScenario
	e      *Env
	o      CacheOptions
	schema string
	ids    []int
	reads  []bool
	costs  map[string]cost.Set
}

// Run runs the scenario with o on e, recording every point in run. It
// starts two instances of every mode itself (on ports of their own, see
// InstancePort) and stops them at the end; it needs a launcher.
func (s CacheScenario) Run(ctx context.Context, e *Env, run *driver.Run, o CacheOptions) error {
	if e.Launcher == nil {
		return errors.New("the cache scenario starts two instances of every mode itself: run it with -start auto or always")
	}
	r := &cacheRun{s: s, e: e, o: o, schema: e.ServiceVar(s.Pair.A.Name, "DATABASE_SCHEMA", "cache")}
	r.settings(run)
	defer r.stopAll()

	// The key sequence: Zipf-distributed ids, and which requests read.
	rnd := rand.New(rand.NewPCG(1, 10))
	z := rand.NewZipf(rnd, o.ZipfS, 1, uint64(o.Keys-1))
	r.ids, r.reads = make([]int, 1<<16), make([]bool, 1<<16)
	for i := range r.ids {
		r.ids[i] = int(z.Uint64()) + 1
	}
	if err := r.startAll(ctx, nil); err != nil {
		return err
	}
	r.costs = map[string]cost.Set{}
	for i, m := range s.Modes {
		r.costs[m.Name] = r.costSet(ctx, i)
	}
	if err := r.profiles(ctx, run, rnd); err != nil {
		return err
	}
	for _, step := range []func(context.Context, *driver.Run) error{r.kv, r.rawLookups, r.readCeiling, r.slowOrigin} {
		if err := step(ctx, run); err != nil {
			return err
		}
	}
	return nil
}

// settings records the options and the modes in run's settings.
func (r *cacheRun) settings(run *driver.Run) {
	o, s := r.o, r.s
	run.Settings["rate"] = o.Rate
	run.Settings["kv_rate"] = o.KVRate
	run.Settings["duration_s"] = o.Duration.Seconds()
	run.Settings["rounds"] = o.Rounds
	run.Settings["keys"] = o.Keys
	run.Settings["zipf_s"] = o.ZipfS
	run.Settings["stampede_n"] = o.StampedeN
	run.Settings["origin_work_ms"] = o.OriginWorkMS
	run.Settings["stale_ttl_s"] = o.StaleTTL.Seconds()
	run.Settings["raw_duration_s"] = o.RawDuration.Seconds()
	var modes []string
	for _, m := range s.Modes {
		mode := m.Name + ": " + m.Service.Name
		for _, k := range slices.Sorted(maps.Keys(m.Env)) {
			mode += " " + k + "=" + m.Env[k]
		}
		modes = append(modes, mode)
	}
	run.Settings["modes"] = strings.Join(modes, "; ")
}

// cacheNotes explains a cache run's figures (none for another run): how
// Run lays out the instances, which points have fixed rates and what the
// read ceiling searched, what the CPU columns count (costSet) and, once
// slowOrigin ran, what it restarted the instances with. Read from run's
// settings, points and ceilings.
func cacheNotes(run *driver.Run) []string {
	var o struct {
		Rate         float64 `json:"rate"`
		KVRate       float64 `json:"kv_rate"`
		OriginWorkMS int     `json:"origin_work_ms"`
		StaleTTLS    float64 `json:"stale_ttl_s"`
	}
	if !hasPoint(run, CacheProfileScenario) && !hasPoint(run, CacheKVWriteScenario) {
		return nil
	}
	_ = run.Setting("rate", &o.Rate)
	_ = run.Setting("kv_rate", &o.KVRate)
	rates := fmt.Sprintf("no ceiling point: the open-loop rates are fixed (%g/s products, %g/s kv)", o.Rate, o.KVRate)
	if len(run.Ceilings) > 0 {
		rates = fmt.Sprintf("the profiles' and kv points' open-loop rates are fixed (%g/s products, %g/s kv); the read ceiling (%s) searches each side's default mode, its first instance, judged by a read's server p99, hit or miss (at most the p99 of both together)",
			o.Rate, o.KVRate, CacheReadCeiling)
	}
	out := []string{
		"every mode runs as two instances on ports of their own (the side's port + offset + 100 per instance); the load goes to the first, the staleness point reads both",
		rates,
		"CPU-seconds per 1,000 operations: the service is the mode's first instance, postgres the whole server (other activity on it counts too), redis the redis-server process (every mode's column shows it; only the redis and client-side modes use it)",
	}
	if !hasPoint(run, CacheStampedeScenario) {
		return out
	}
	_ = run.Setting("origin_work_ms", &o.OriginWorkMS)
	_ = run.Setting("stale_ttl_s", &o.StaleTTLS)
	ttl := time.Duration(o.StaleTTLS * float64(time.Second))
	return append(out, fmt.Sprintf("stampede and staleness points: every instance restarted with ORIGIN_WORK_MS=%d and PRODUCT_TTL=%s; a staleness window includes the reload, so the %d ms origin work", o.OriginWorkMS, ttl, o.OriginWorkMS))
}

// profiles measures each profile's point: the Zipf key sequence, read
// or written as the profile's share of reads (drawn from rnd) says.
func (r *cacheRun) profiles(ctx context.Context, run *driver.Run, rnd *rand.Rand) error {
	s, e, o := r.s, r.e, r.o
	for _, pr := range s.Profiles {
		p := driver.Point{Scenario: CacheProfileScenario, Name: pr.Name, Rate: o.Rate, DurationS: o.Duration.Seconds(), Sides: s.Sides()}
		for i := range r.reads {
			r.reads[i] = rnd.IntN(100) < pr.ReadPct
		}
		reads := append([]bool(nil), r.reads...)
		e.logf("cache %s (%d%% reads): %g/s for %s, %d rounds", pr.Name, pr.ReadPct, o.Rate, o.Duration, o.Rounds)
		err := r.attackPoint(ctx, run, p, pr.Name, func(base string, n uint64) driver.Request {
			k := n % uint64(len(r.ids))
			id := strconv.Itoa(r.ids[k])
			if reads[k] {
				return driver.Request{Method: http.MethodGet, URL: base + "/products/" + id}
			}
			return driver.Request{Method: http.MethodPut, URL: base + "/products/" + id,
				Body: fmt.Appendf(nil, `{"name":"product %s","price_cents":%d,"stock":%d}`, id, 100+n%1000, n%500)}
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// kv measures kv writes, then reads of what was written: logged vs
// unlogged.
func (r *cacheRun) kv(ctx context.Context, run *driver.Run) error {
	s, e, o := r.s, r.e, r.o
	pad := `"` + strings.Repeat("x", 200) + `"`
	for _, kv := range []struct {
		scenario driver.ScenarioName
		phase    string
		req      func(base string, n uint64) driver.Request
	}{
		{CacheKVWriteScenario, "kv_put", func(base string, n uint64) driver.Request {
			return driver.Request{Method: http.MethodPut, URL: base + "/kv/load-" + strconv.FormatUint(n%1000, 10) + "?ttl=5m",
				Body: fmt.Appendf(nil, `{"n":%d,"pad":%s}`, n, pad)}
		}},
		{CacheKVReadScenario, "kv_get", func(base string, n uint64) driver.Request {
			return driver.Request{Method: http.MethodGet, URL: base + "/kv/load-" + strconv.FormatUint(n%1000, 10)}
		}},
	} {
		p := driver.Point{Scenario: kv.scenario, Name: driver.Label(o.KVRate), Rate: o.KVRate, DurationS: o.Duration.Seconds(), Sides: s.Sides()}
		e.logf("cache %s: %g/s for %s, %d rounds", kv.scenario, o.KVRate, o.Duration, o.Rounds)
		if err := r.attackPoint(ctx, run, p, kv.phase, kv.req); err != nil {
			return err
		}
	}
	return nil
}

// attackPoint measures p, o.Rounds rounds, each mode attacked (attack)
// at p's rate with phase's requests req, and appends it to run's points
// (on error too).
func (r *cacheRun) attackPoint(ctx context.Context, run *driver.Run, p driver.Point, phase string, req func(base string, n uint64) driver.Request) error {
	rate := p.Rate
	err := driver.RunPoint(ctx, &p, r.o.Rounds, func(ctx context.Context, mode string, _ int) (*driver.SideResult, error) {
		return r.attack(ctx, mode, phase, rate, req)
	})
	run.Points = append(run.Points, p)
	return err
}

// rawLookups measures one lookup by key without HTTP: pgx against
// go-redis, one connection each.
func (r *cacheRun) rawLookups(ctx context.Context, run *driver.Run) error {
	s, e, o := r.s, r.e, r.o
	redisURL := e.ServiceVar(s.Pair.B.Name, "REDIS_URL", "redis://localhost:6379/0")
	rp := driver.Point{Scenario: CacheRawScenario, Name: "by key", DurationS: o.RawDuration.Seconds(), Sides: []string{RawSidePostgres, RawSideRedis}}
	e.logf("cache raw lookup: pgx vs go-redis, one connection each, %s per loop, %d rounds", o.RawDuration, o.Rounds)
	err := driver.RunPoint(ctx, &rp, o.Rounds, func(ctx context.Context, side string, _ int) (*driver.SideResult, error) {
		res := &driver.SideResult{Metrics: map[driver.Metric]float64{}}
		c, err := RawLookup(ctx, side, RawLookupSpec{PostgresURL: e.PostgresURL, RedisURL: redisURL, Schema: r.schema, Keys: o.Keys, Duration: o.RawDuration, Progress: e.Progress})
		res.Phases = append(res.Phases, driver.Phase{Name: "lookup", Client: c})
		driver.FlattenClient(res.Metrics, driver.ClientPrefix, c)
		return res, err
	})
	run.Points = append(run.Points, rp)
	return err
}

// slowOrigin restarts every instance with a slow origin and a short
// TTL, then measures the stampede and the staleness window.
func (r *cacheRun) slowOrigin(ctx context.Context, run *driver.Run) error {
	s, o := r.s, r.o
	slow := map[string]string{"ORIGIN_WORK_MS": strconv.Itoa(o.OriginWorkMS), "PRODUCT_TTL": o.StaleTTL.String()}
	if err := r.startAll(ctx, slow); err != nil {
		return err
	}
	sp := driver.Point{Scenario: CacheStampedeScenario, Name: fmt.Sprintf("%d GETs", o.StampedeN), Sides: s.Sides()}
	err := driver.RunPoint(ctx, &sp, o.Rounds, func(ctx context.Context, mode string, round int) (*driver.SideResult, error) {
		return r.stampede(ctx, r.modeIndex(mode), round)
	})
	run.Points = append(run.Points, sp)
	if err != nil {
		return err
	}
	st := driver.Point{Scenario: CacheStalenessScenario, Name: "TTL " + o.StaleTTL.String(), Sides: s.Sides()}
	err = driver.RunPoint(ctx, &st, o.Rounds, func(ctx context.Context, mode string, round int) (*driver.SideResult, error) {
		return r.staleness(ctx, r.modeIndex(mode), round)
	})
	run.Points = append(run.Points, st)
	return err
}

func (r *cacheRun) modeIndex(name string) int { return modeIndexOf(r.s.Modes, name) }

// url is instance j of mode i.
func (r *cacheRun) url(i, j int) string {
	return fmt.Sprintf("http://%s:%d", r.e.host(), r.s.InstancePort(r.e, i, j))
}

// startAll (re)starts both instances of every mode with the mode's
// environment plus extra.
func (r *cacheRun) startAll(ctx context.Context, extra map[string]string) error {
	for i := range r.s.Modes {
		for j := range 2 {
			if err := r.start(ctx, i, j, extra); err != nil {
				return err
			}
		}
	}
	return nil
}

// start (re)starts instance j of mode i with the mode's environment plus
// extra.
func (r *cacheRun) start(ctx context.Context, i, j int, extra map[string]string) error {
	m := r.s.Modes[i]
	env := map[string]string{}
	maps.Copy(env, r.e.ServiceEnv[m.Service.Name])
	maps.Copy(env, m.Env)
	maps.Copy(env, extra)
	name := r.s.InstanceName(i, j)
	if r.e.Launcher.Running(name) != nil {
		if err := r.e.Launcher.Stop(name, 30*time.Second); err != nil {
			return err
		}
	}
	port := r.s.InstancePort(r.e, i, j)
	r.e.logf("starting %s on :%d with %v", name, port, env)
	_, err := r.e.Launcher.Start(ctx, name, port, env, 90*time.Second)
	return err
}

func (r *cacheRun) stopAll() {
	for i := range r.s.Modes {
		for j := range 2 {
			_ = r.e.Launcher.Stop(r.s.InstanceName(i, j), 30*time.Second)
		}
	}
}

// costSet finds the processes of mode i's load: its first instance,
// Postgres and redis-server.
func (r *cacheRun) costSet(ctx context.Context, i int) cost.Set {
	service := cost.Process("service", 0, r.s.InstancePort(r.e, i, 0))
	pg := cost.Postgres(StackDir(""), backendPID(ctx, r.e.PostgresURL))
	return cost.Set{service, pg, cost.Redis(StackDir(""))}
}

// attack runs one open-loop attack on mode's first instance and records
// the client's view, /stats (counters, hit ratio) and the CPU-seconds
// per 1,000 operations of the service, Postgres and Redis.
func (r *cacheRun) attack(ctx context.Context, mode, phase string, rate float64, req func(base string, n uint64) driver.Request) (*driver.SideResult, error) {
	res := &driver.SideResult{Metrics: map[driver.Metric]float64{}}
	i := r.modeIndex(mode)
	base := r.url(i, 0)
	if err := driver.ResetStats(ctx, base); err != nil {
		return res, err
	}
	set := r.costs[mode]
	before := set.Sample()
	c := driver.Attack(ctx, driver.AttackSpec{
		Name: fmt.Sprintf("%-9s %s %g/s", mode, phase, rate), Rate: rate, Duration: r.o.Duration,
		MaxWorkers: r.e.MaxWorkers, Progress: r.e.Progress,
		Next: func(n uint64) driver.Request { return req(base, n) },
	})
	used := set.Sample().Sub(before)
	res.Phases = append(res.Phases, driver.Phase{Name: phase, Client: c})
	m := res.Metrics
	driver.FlattenClient(m, driver.ClientPrefix, c)
	var total float64
	for g, v := range used {
		m[MetricCPUSecondsOf.Of(g)] = math.Round(v*1e4) / 1e4
		total += v
		if pk := cost.PerThousand(v, c.OK); !math.IsNaN(pk) {
			m[MetricCPUPerKOf.Of(g)] = pk
		}
	}
	if pk := cost.PerThousand(total, c.OK); !math.IsNaN(pk) {
		m[MetricCPUPerKOf.Of(CostTotal)] = pk
	}
	st, err := driver.GetStats(ctx, base)
	res.Stats = st
	driver.FlattenServer(m, st)
	cacheCounters(m, st)
	return res, err
}

// cacheCounters adds the cache counters and the hit ratio to m.
func cacheCounters(m map[driver.Metric]float64, st *driver.ServerStats) {
	if st == nil {
		return
	}
	for _, n := range CacheCounters {
		m[driver.Counter(n)] = float64(st.Counters[n])
	}
	if h, ms := st.Counters["hits"], st.Counters["misses"]; h+ms > 0 {
		m[MetricHitRatio] = math.Round(float64(h)/float64(h+ms)*1e4) / 1e4
	}
}

// invalidate makes product id cold on mode i (a PUT through the first
// instance invalidates it everywhere) and waits for the NOTIFY (local) or
// the tracking push (client-side) to reach the second instance.
func (r *cacheRun) invalidate(ctx context.Context, i, id int) error {
	code, b, err := driver.Do(ctx, http.MethodPut, r.url(i, 0)+"/products/"+strconv.Itoa(id), fmt.Appendf(nil, `{"name":"stampede %d","price_cents":1,"stock":1}`, id))
	if err != nil {
		return err
	}
	if code != http.StatusOK {
		return fmt.Errorf("PUT /products/%d: %d %s", id, code, b)
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(300 * time.Millisecond):
	}
	return nil
}

// stampede sends StampedeN concurrent GETs of one cold key to the first
// instance, then (another cold key) half to each instance, and records
// the origin loads each caused (/stats deltas).
func (r *cacheRun) stampede(ctx context.Context, i, round int) (*driver.SideResult, error) {
	res := &driver.SideResult{Metrics: map[driver.Metric]float64{}}
	for k, spread := range []int{1, 2} {
		id := 50000 + 100*round + 10*i + k
		if err := r.invalidate(ctx, i, id); err != nil {
			return res, err
		}
		for j := range spread {
			if err := driver.ResetStats(ctx, r.url(i, j)); err != nil {
				return res, err
			}
		}
		gate := make(chan struct{})
		var wg sync.WaitGroup
		var mu sync.Mutex
		var failed int
		for n := range r.o.StampedeN {
			wg.Go(func() {
				<-gate
				code, _, err := driver.Do(ctx, http.MethodGet, r.url(i, n%spread)+"/products/"+strconv.Itoa(id), nil)
				if err != nil || code != http.StatusOK {
					mu.Lock()
					failed++
					mu.Unlock()
				}
			})
		}
		t0 := time.Now()
		close(gate)
		wg.Wait()
		name := []string{StampedeOneInstance, StampedeTwoInstances}[k]
		res.Metrics[MetricStampedeElapsedOf.Of(name)] = float64(time.Since(t0).Milliseconds())
		res.Metrics[MetricStampedeErrorsOf.Of(name)] = float64(failed)
		var loads int64
		for j := range spread {
			st, err := driver.GetStats(ctx, r.url(i, j))
			if err != nil {
				return res, err
			}
			loads += st.Counters["origin_loads"]
			if j == 0 && k == 0 {
				res.Stats = st
			}
		}
		res.Metrics[MetricStampedeOriginLoadsOf.Of(name)] = float64(loads)
	}
	return res, nil
}

// staleness warms ten products on both instances of mode i, updates them
// with one UPDATE ... WHERE through pgx (outside the service), and
// measures the milliseconds until both instances serve the new value;
// "fresh" is 0 when one still served the old value StaleTTL + 2 s later.
func (r *cacheRun) staleness(ctx context.Context, i, round int) (*driver.SideResult, error) {
	res := &driver.SideResult{Metrics: map[driver.Metric]float64{}}
	first := 70000 + 100*round + 10*i
	id := first + 5
	for range 2 {
		for j := range 2 {
			if _, err := productStock(ctx, r.url(i, j), id); err != nil {
				return res, err
			}
		}
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(cctx, r.e.PostgresURL)
	if err != nil {
		return res, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var stock int64
	q := fmt.Sprintf(`UPDATE %s.products SET stock = stock + 1 WHERE id BETWEEN $1 AND $2`, pgx.Identifier{r.schema}.Sanitize())
	if _, err := conn.Exec(cctx, q, first, first+9); err != nil {
		return res, err
	}
	t0 := time.Now()
	if err := conn.QueryRow(cctx, fmt.Sprintf(`SELECT stock FROM %s.products WHERE id = $1`, pgx.Identifier{r.schema}.Sanitize()), id).Scan(&stock); err != nil {
		return res, err
	}
	deadline := t0.Add(r.o.StaleTTL + 2*time.Second)
	fresh := [2]bool{}
	var worst time.Duration
	for time.Now().Before(deadline) && !(fresh[0] && fresh[1]) {
		for j := range 2 {
			if fresh[j] {
				continue
			}
			got, err := productStock(ctx, r.url(i, j), id)
			if err != nil {
				return res, err
			}
			if got == stock {
				fresh[j] = true
				worst = max(worst, time.Since(t0))
				res.Metrics[MetricStaleInstance(j)] = float64(time.Since(t0).Milliseconds())
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	res.Metrics[MetricStaleTTLMS] = float64(r.o.StaleTTL.Milliseconds())
	if fresh[0] && fresh[1] {
		res.Metrics[MetricFresh] = 1
		res.Metrics[MetricStaleMS] = float64(worst.Milliseconds())
	} else {
		res.Metrics[MetricFresh] = 0
	}
	return res, nil
}

// productStock GETs a product and returns its stock.
func productStock(ctx context.Context, base string, id int) (int64, error) {
	code, b, err := driver.Do(ctx, http.MethodGet, base+"/products/"+strconv.Itoa(id), nil)
	if err != nil {
		return 0, err
	}
	if code != http.StatusOK {
		return 0, fmt.Errorf("GET %s/products/%d: %d %s", base, id, code, b)
	}
	var p struct {
		Stock int64 `json:"stock"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return 0, err
	}
	return p.Stock, nil
}
