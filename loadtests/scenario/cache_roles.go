package scenario

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/cost"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/stats"
)

// The roles beyond the cache (issue 41): locks, pub/sub and rate limits
// on both sides of the cache pair, measured after the cache scenario in
// the same run (`go run ./loadtests cache`, `make results`).

// CacheRolesOptions parameterize the roles' points.
type CacheRolesOptions struct {
	// Off leaves the roles out (the cache command's -cache-roles=false).
	Off bool
	// Duration is each lock and rate-limit loop's; Rounds the rounds of
	// those points and of the handover.
	Duration time.Duration
	Rounds   int
	// Contenders clients contend on LockNames names in the contended
	// lock point.
	Contenders, LockNames int
	// Lease is the handover point's lease.
	Lease time.Duration
	// Subscribers are the ladders' subscriber counts; Rates the publish
	// rates each climbs (per second), each for Step; a step passes while
	// the delivery p99 stays at most P99Bound, nothing is missed, no
	// subscription ends, under 1% of publishes fail and the driver sends
	// at least SendShare (95%) of the rate: the one rule of every step.
	Subscribers []int
	Rates       []float64
	Step        time.Duration
	P99Bound    time.Duration
	// Bisect halvings follow each ladder, between the last rate passed
	// and the first failed (the ceiling searches' CeilingBisect).
	Bisect int
	// LimitClients clients take from one key with Limit per Window.
	LimitClients int
	Limit        int
	Window       time.Duration
}

// CacheRolesScenario declares the roles' points: the sides (one instance
// each, in the default cache mode) and the default options.
type CacheRolesScenario struct {
	// Pair is the cache pair.
	Pair Pair
	// Sides are the two instances, the Postgres side first (ratios are
	// first ÷ second).
	Sides []CacheMode
	// Defaults are the options the cache command starts from (also the
	// results command's size).
	Defaults CacheRolesOptions
}

// CacheRoles is the roles' scenario, on the ceiling searches' rule
// (CeilingStep, CeilingRounds, CeilingBisect, CeilingP99): 15 s loops,
// 3 rounds, 16 contenders on 8 names, a 1 s lease, ladders of 1, 10 and
// 100 subscribers from 1,000 to 32,000 publishes per second in 15 s
// steps with a 100 ms p99 bound and 2 bisections (below 1,000 when that
// fails), 32 clients taking from a limit of 200 per second. About 30
// minutes on 2 cores, 40 at the bound.
var CacheRoles = CacheRolesScenario{
	Pair: CachePair,
	Sides: []CacheMode{
		{Name: pairs.NoRedis, Service: ServiceOf(pairs.NoRedis), Env: map[string]string{"CACHE_MODE": "local"}},
		{Name: pairs.Redis, Service: ServiceOf(pairs.Redis), Env: map[string]string{"CACHE_MODE": "redis", "REDIS_KEY_PREFIX": "cache-roles:"}},
	},
	Defaults: CacheRolesOptions{Duration: CeilingStep, Rounds: CeilingRounds, Contenders: 16, LockNames: 8, Lease: time.Second,
		Subscribers: []int{1, 10, 100}, Rates: []float64{1000, 2000, 4000, 8000, 16000, 32000},
		Step: CeilingStep, P99Bound: CeilingP99, Bisect: CeilingBisect, LimitClients: 32, Limit: 200, Window: time.Second},
}

// The pub/sub ceiling is a rate offered in every round: its figure is
// the rate 2 of 3 rounds passed, not a mean.
func init() { driver.MarkOfferedRate(MetricMaxPublishRate) }

// Validate says what is missing or inconsistent in o.
func (o CacheRolesOptions) Validate() error {
	if o.Off {
		return nil
	}
	if o.Duration <= 0 || o.Rounds < 1 || o.Contenders < 1 || o.LockNames < 1 || o.Lease <= 0 || len(o.Subscribers) == 0 ||
		len(o.Rates) == 0 || o.Step <= 0 || o.P99Bound <= 0 || o.Bisect < 0 || o.LimitClients < 1 || o.Limit < 1 || o.Window <= 0 {
		return fmt.Errorf("cache roles: options %+v incomplete", o)
	}
	if !slices.IsSorted(o.Rates) || slices.ContainsFunc(o.Rates, func(r float64) bool { return r <= 0 }) {
		return fmt.Errorf("cache roles: the rates %v must be positive and rising", o.Rates)
	}
	if slices.ContainsFunc(o.Subscribers, func(n int) bool { return n < 1 }) {
		return fmt.Errorf("cache roles: subscriber counts %v must be positive", o.Subscribers)
	}
	return nil
}

// rolesDrain bounds the wait, after a step, for its last deliveries.
const rolesDrain = 2 * time.Second

// Estimate returns the expected duration of the roles' points with o.
func (s CacheRolesScenario) Estimate(o CacheRolesOptions) Estimate {
	if o.Off {
		return Estimate{}
	}
	sides := len(s.Sides)
	start := time.Duration(sides) * serviceStart
	e := Estimate{Typical: start, Bound: start}
	e = e.Add(attacks(2*sides*o.Rounds, o.Duration, 0)) // the lock points
	e = e.Add(attacks(sides*o.Rounds, o.Duration, 0))   // the rate limit
	handover := time.Duration(sides*o.Rounds) * (o.Lease + time.Second)
	e = e.Add(Estimate{Typical: handover, Bound: handover + time.Duration(sides*o.Rounds)*5*time.Second})
	// Typically half of each ladder and its bisections; at most all of it.
	ladders := len(o.Subscribers) * sides * o.Rounds
	typical, bound := ladders*(len(o.Rates)/2+o.Bisect), ladders*len(o.Rates)
	e = e.Add(Estimate{Attacks: typical, Typical: time.Duration(typical) * (o.Step + attackOverhead + rolesDrain/4)})
	e.Bound += time.Duration(bound) * (o.Step + attackOverhead + rolesDrain)
	return e
}

// rolesRun is one run of the roles' points.
type rolesRun struct {
	s     CacheRolesScenario
	e     *Env
	o     CacheRolesOptions
	id    string // names this run's locks, keys and channels
	costs map[string]cost.Set
	sse   *http.Client
}

// Run measures the roles with o on e into run. It starts one instance of
// each side itself (on ports of their own, RolesPort) and stops them at
// the end; it needs a launcher.
func (s CacheRolesScenario) Run(ctx context.Context, e *Env, run *driver.Run, o CacheRolesOptions) error {
	if o.Off {
		return nil
	}
	if err := o.Validate(); err != nil {
		return err
	}
	if e.Launcher == nil {
		return errors.New("the cache roles start an instance of each side themselves: run them with -start auto or always")
	}
	r := &rolesRun{s: s, e: e, o: o, id: strconv.FormatInt(time.Now().UnixNano()%1e9, 36),
		sse: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}}
	r.settings(run)
	defer r.stopAll()
	if err := r.startAll(ctx); err != nil {
		return err
	}
	r.costs = map[string]cost.Set{}
	for i, m := range s.Sides {
		r.costs[m.Name] = r.costSet(ctx, i)
	}
	for _, step := range []func(context.Context, *driver.Run) error{r.locks, r.handover, r.rateLimit, r.pubsub} {
		if err := step(ctx, run); err != nil {
			return err
		}
	}
	return nil
}

// settings records the options in run's settings.
func (r *rolesRun) settings(run *driver.Run) {
	o := r.o
	run.Settings["roles_duration_s"] = o.Duration.Seconds()
	run.Settings["roles_rounds"] = o.Rounds
	run.Settings["roles_contenders"] = o.Contenders
	run.Settings["roles_lock_names"] = o.LockNames
	run.Settings["roles_lease_ms"] = o.Lease.Milliseconds()
	subs := make([]string, len(o.Subscribers))
	for i, n := range o.Subscribers {
		subs[i] = strconv.Itoa(n)
	}
	rates := make([]string, len(o.Rates))
	for i, x := range o.Rates {
		rates[i] = strconv.FormatFloat(x, 'g', -1, 64)
	}
	run.Settings["roles_subscribers"] = strings.Join(subs, ",")
	run.Settings["roles_rates"] = strings.Join(rates, ",")
	run.Settings["roles_step_s"] = o.Step.Seconds()
	run.Settings["roles_bisect"] = o.Bisect
	run.Settings["roles_p99_bound_ms"] = o.P99Bound.Milliseconds()
	run.Settings["roles_limit_clients"] = o.LimitClients
	run.Settings["roles_limit"] = o.Limit
	run.Settings["roles_window_ms"] = o.Window.Milliseconds()
	var sides []string
	for _, m := range r.s.Sides {
		side := m.Name
		for _, k := range slices.Sorted(func(yield func(string) bool) {
			for k := range m.Env {
				if !yield(k) {
					return
				}
			}
		}) {
			side += " " + k + "=" + m.Env[k]
		}
		sides = append(sides, side)
	}
	run.Settings["roles_sides"] = strings.Join(sides, "; ")
}

// sideNames returns the sides' names, in order.
func (r *rolesRun) sideNames() []string {
	out := make([]string, len(r.s.Sides))
	for i, m := range r.s.Sides {
		out[i] = m.Name
	}
	return out
}

// RolesPort is the port of side i's instance: its service's port plus
// the offset plus 1300, clear of the cache scenario's instances.
func (s CacheRolesScenario) RolesPort(e *Env, i int) int {
	return s.Sides[i].Service.Port + e.PortOffset + 1300
}

func (r *rolesRun) instanceName(i int) string { return r.s.Sides[i].Service.Name + "@roles" }

func (r *rolesRun) url(i int) string {
	return fmt.Sprintf("http://%s:%d", r.e.host(), r.s.RolesPort(r.e, i))
}

func (r *rolesRun) sideIndex(name string) int {
	for i, m := range r.s.Sides {
		if m.Name == name {
			return i
		}
	}
	return -1
}

// startAll starts each side's instance with its environment.
func (r *rolesRun) startAll(ctx context.Context) error {
	for i, m := range r.s.Sides {
		env := map[string]string{}
		for k, v := range r.e.ServiceEnv[m.Service.Name] {
			env[k] = v
		}
		for k, v := range m.Env {
			env[k] = v
		}
		name := r.instanceName(i)
		if r.e.Launcher.Running(name) != nil {
			if err := r.e.Launcher.Stop(name, 30*time.Second); err != nil {
				return err
			}
		}
		port := r.s.RolesPort(r.e, i)
		r.e.logf("starting %s on :%d with %v", name, port, env)
		if _, err := r.e.Launcher.Start(ctx, name, port, env, 90*time.Second); err != nil {
			return err
		}
	}
	return nil
}

func (r *rolesRun) stopAll() {
	for i := range r.s.Sides {
		_ = r.e.Launcher.Stop(r.instanceName(i), 30*time.Second)
	}
}

// costSet is the process groups a roles point counts: side i's instance,
// Postgres, redis-server and the load driver itself.
func (r *rolesRun) costSet(ctx context.Context, i int) cost.Set {
	service := cost.Process("service", 0, r.s.RolesPort(r.e, i))
	pg := cost.Postgres(StackDir(""), backendPID(ctx, r.e.PostgresURL))
	rd := cost.Group{Name: "redis", Roots: cost.FindRoots("redis-server"), Source: "/proc scan for redis-server"}
	return cost.Set{service, pg, rd, cost.Self("driver")}
}

// addCPU records each group's CPU-seconds, and per 1,000 items under
// prefix (MetricCPUPerKOf for cycles and takes, MetricCPUPerKDeliveries).
func addCPU(m map[driver.Metric]float64, used map[string]float64, items int64, prefix driver.MetricPrefix) {
	for g, v := range used {
		m[MetricCPUSecondsOf.Of(g)] = math.Round(v*1e4) / 1e4
		if pk := cost.PerThousand(v, items); !math.IsNaN(pk) {
			m[prefix.Of(g)] = pk
		}
	}
}

// ms is a histogram's quantile in milliseconds (recorded in µs).
func ms(h *hdrhistogram.Histogram, q float64) float64 {
	if h.TotalCount() == 0 {
		return 0
	}
	return math.Round(float64(h.ValueAtQuantile(q))) / 1000
}

func record(h *hdrhistogram.Histogram, d time.Duration) { _ = h.RecordValue(max(d.Microseconds(), 1)) }

// locks measures acquire+release cycles: one client on one name, then
// Contenders clients on LockNames names.
func (r *rolesRun) locks(ctx context.Context, run *driver.Run) error {
	o := r.o
	for _, pt := range []struct {
		name           string
		workers, names int
	}{{"uncontended", 1, 1}, {fmt.Sprintf("%d contenders on %d names", o.Contenders, o.LockNames), o.Contenders, o.LockNames}} {
		p := driver.Point{Scenario: CacheLockScenario, Name: pt.name, DurationS: o.Duration.Seconds(), Sides: r.sideNames()}
		r.e.logf("cache roles, locks %s: %s, %d rounds", pt.name, o.Duration, o.Rounds)
		err := driver.RunPoint(ctx, &p, o.Rounds, func(ctx context.Context, side string, round int) (*driver.SideResult, error) {
			return r.lockLoop(ctx, side, round, pt.workers, pt.names)
		})
		run.Points = append(run.Points, p)
		if err != nil {
			return err
		}
	}
	return nil
}

// lockRequest is an acquire's body.
func lockRequest(owner string, lease time.Duration) []byte {
	return fmt.Appendf(nil, `{"owner":%q,"lease_ms":%d}`, owner, lease.Milliseconds())
}

// lockAnswer reads a 201's token and expiry.
func lockAnswer(b []byte) (int64, time.Time, error) {
	var l struct {
		Token     int64     `json:"token"`
		ExpiresAt time.Time `json:"expires_at"`
	}
	err := json.Unmarshal(b, &l)
	return l.Token, l.ExpiresAt, err
}

// lockTally is what the clients of one lock loop saw.
type lockTally struct {
	holders                                              []atomic.Int32 // each name's holder among the clients, +1; 0: none
	mu                                                   sync.Mutex
	last                                                 []int64 // each name's highest token granted
	cycles, conflicts, errs, overlaps, regress, attempts atomic.Int64
}

// lockLoop runs workers clients for Duration, each acquiring (lease 10 s,
// far above any cycle), checking that nobody else holds its name, and
// releasing; a 409 is retried at once. It records the cycles, the
// conflicts, and any double grant or token not above the name's last.
func (r *rolesRun) lockLoop(ctx context.Context, side string, round, workers, names int) (*driver.SideResult, error) {
	res := &driver.SideResult{Metrics: map[driver.Metric]float64{}}
	base := r.url(r.sideIndex(side))
	if err := driver.ResetStats(ctx, base); err != nil {
		return res, err
	}
	t := &lockTally{holders: make([]atomic.Int32, names), last: make([]int64, names)}
	cycleH, acqH := make([]*hdrhistogram.Histogram, workers), make([]*hdrhistogram.Histogram, workers)
	set := r.costs[side]
	before := set.Sample()
	start := time.Now()
	var wg sync.WaitGroup
	for w := range workers {
		cycleH[w], acqH[w] = stats.NewHistogram(), stats.NewHistogram()
		name := fmt.Sprintf("roles-%s-%d-%d-%d", r.id, workers, round, w%names)
		wg.Go(func() {
			c := lockClient{u: base + "/locks/" + name, owner: "w" + strconv.Itoa(w), w: w, n: w % names, cycleH: cycleH[w], acqH: acqH[w]}
			r.lockWorker(ctx, c, start.Add(r.o.Duration), t)
		})
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	used := set.Sample().Sub(before)
	ch, ah := stats.NewHistogram(), stats.NewHistogram()
	for w := range workers {
		ch.Merge(cycleH[w])
		ah.Merge(acqH[w])
	}
	m := res.Metrics
	m[MetricCyclesPerS] = math.Round(float64(t.cycles.Load())/elapsed*10) / 10
	m[MetricCycleP50], m[MetricCycleP99] = ms(ch, 50), ms(ch, 99)
	m[MetricAcquireP50], m[MetricAcquireP99] = ms(ah, 50), ms(ah, 99)
	m[MetricConflictsPerS] = math.Round(float64(t.conflicts.Load())/elapsed*10) / 10
	m[MetricOverlaps] = float64(t.overlaps.Load())
	m[MetricTokenRegress] = float64(t.regress.Load())
	m[MetricRoleErrors] = float64(t.errs.Load())
	addCPU(m, used, t.cycles.Load(), MetricCPUPerKOf)
	st, err := driver.GetStats(ctx, base)
	res.Stats = st
	if err == nil && float64(t.errs.Load()) >= driver.FailShare*float64(max(t.attempts.Load(), 1)) {
		err = fmt.Errorf("%d of %d lock requests failed", t.errs.Load(), t.attempts.Load())
	}
	if err == nil && t.cycles.Load() == 0 {
		err = errors.New("no lock was granted")
	}
	return res, err
}

// lockClient is one client of a lock loop: the lock it takes and
// releases, as whom, and where it records its latencies.
type lockClient struct {
	// u is the lock's URL; owner the client's name in its requests.
	u, owner string
	// w is the client's index, n its lock's among the tally's names.
	w, n int
	// cycleH records each acquire-release cycle, acqH each acquire.
	cycleH, acqH *hdrhistogram.Histogram
}

// lockWorker is client c of a lock loop on the lock at c.u (name c.n of
// the tally) until deadline.
func (r *rolesRun) lockWorker(ctx context.Context, c lockClient, deadline time.Time, t *lockTally) {
	u, owner, w, n, cycleH, acqH := c.u, c.owner, c.w, c.n, c.cycleH, c.acqH
	for ctx.Err() == nil && time.Now().Before(deadline) {
		t0 := time.Now()
		code, b, err := driver.Do(ctx, http.MethodPost, u, lockRequest(owner, 10*time.Second))
		record(acqH, time.Since(t0))
		t.attempts.Add(1)
		switch {
		case err == nil && code == http.StatusConflict:
			t.conflicts.Add(1)
			continue
		case err != nil || code != http.StatusCreated:
			t.errs.Add(1)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		token, _, err := lockAnswer(b)
		if err != nil {
			t.errs.Add(1)
			continue
		}
		if !t.holders[n].CompareAndSwap(0, int32(w+1)) {
			t.overlaps.Add(1)
		}
		t.mu.Lock()
		if token <= t.last[n] {
			t.regress.Add(1)
		}
		t.last[n] = max(t.last[n], token)
		t.mu.Unlock()
		t.holders[n].CompareAndSwap(int32(w+1), 0)
		q := url.Values{"owner": {owner}, "token": {strconv.FormatInt(token, 10)}}
		code, _, err = driver.Do(ctx, http.MethodDelete, u+"?"+q.Encode(), nil)
		if err != nil || code != http.StatusNoContent {
			t.errs.Add(1)
			continue
		}
		record(cycleH, time.Since(t0))
		t.cycles.Add(1)
	}
}

// handover measures, per round, how long after a holder dies (acquires
// with Lease and never renews nor releases) another holder, polling every
// 5 ms, gets the lock.
func (r *rolesRun) handover(ctx context.Context, run *driver.Run) error {
	o := r.o
	p := driver.Point{Scenario: CacheLockHandoverScenario, Name: "lease " + o.Lease.String(), Sides: r.sideNames()}
	r.e.logf("cache roles, lock handover after a holder's death: lease %s, %d rounds", o.Lease, o.Rounds)
	err := driver.RunPoint(ctx, &p, o.Rounds, func(ctx context.Context, side string, round int) (*driver.SideResult, error) {
		res := &driver.SideResult{Metrics: map[driver.Metric]float64{}}
		u := r.url(r.sideIndex(side)) + "/locks/" + fmt.Sprintf("roles-%s-handover-%d", r.id, round)
		code, b, err := driver.Do(ctx, http.MethodPost, u, lockRequest("dying", o.Lease))
		if err != nil || code != http.StatusCreated {
			return res, fmt.Errorf("the holder's acquire: %d %s %v", code, b, err)
		}
		died := time.Now()
		old, _, err := lockAnswer(b)
		if err != nil {
			return res, err
		}
		for {
			code, b, err = driver.Do(ctx, http.MethodPost, u, lockRequest("next", 10*time.Second))
			if err == nil && code == http.StatusCreated {
				break
			}
			if err != nil || code != http.StatusConflict {
				return res, fmt.Errorf("the successor's acquire: %d %s %v", code, b, err)
			}
			if time.Since(died) > o.Lease+5*time.Second {
				return res, fmt.Errorf("the lock was not free %v after its holder died (lease %v)", time.Since(died), o.Lease)
			}
			time.Sleep(5 * time.Millisecond)
		}
		took := time.Since(died)
		token, _, err := lockAnswer(b)
		if err != nil {
			return res, err
		}
		q := url.Values{"owner": {"next"}, "token": {strconv.FormatInt(token, 10)}}
		_, _, _ = driver.Do(ctx, http.MethodDelete, u+"?"+q.Encode(), nil)
		m := res.Metrics
		m[MetricLeaseMS] = float64(o.Lease.Milliseconds())
		m[MetricHandoverMS] = float64(took.Microseconds()) / 1000
		m[MetricAfterLeaseMS] = float64((took - o.Lease).Microseconds()) / 1000
		m[MetricTokenHigher] = 0
		if token > old {
			m[MetricTokenHigher] = 1
		}
		return res, nil
	})
	run.Points = append(run.Points, p)
	return err
}

// rateLimit measures LimitClients clients taking from one key (Limit per
// Window) for Duration: takes per second, their latency, and the takes
// admitted in each window, grouped by the window's end as the answers
// state it (arrival plus reset_ms; windows are Window apart, the answers'
// jitter is a round trip).
func (r *rolesRun) rateLimit(ctx context.Context, run *driver.Run) error {
	o := r.o
	p := driver.Point{Scenario: CacheRateLimitScenario, Name: fmt.Sprintf("%d clients, %d per %s", o.LimitClients, o.Limit, o.Window),
		DurationS: o.Duration.Seconds(), Sides: r.sideNames()}
	r.e.logf("cache roles, rate limit: %s, %d rounds", p.Name, o.Rounds)
	err := driver.RunPoint(ctx, &p, o.Rounds, func(ctx context.Context, side string, round int) (*driver.SideResult, error) {
		return r.takeLoop(ctx, side, round)
	})
	run.Points = append(run.Points, p)
	return err
}

func (r *rolesRun) takeLoop(ctx context.Context, side string, round int) (*driver.SideResult, error) {
	o := r.o
	res := &driver.SideResult{Metrics: map[driver.Metric]float64{}}
	base := r.url(r.sideIndex(side))
	if err := driver.ResetStats(ctx, base); err != nil {
		return res, err
	}
	u := base + "/limits/" + fmt.Sprintf("roles-%s-%d", r.id, round) + "/take"
	hs := make([]*hdrhistogram.Histogram, o.LimitClients)
	ends := make([][]time.Time, o.LimitClients)
	var tally takeTally
	refused, errs := &tally.refused, &tally.errs
	set := r.costs[side]
	before := set.Sample()
	start := time.Now()
	var wg sync.WaitGroup
	for w := range o.LimitClients {
		hs[w] = stats.NewHistogram()
		wg.Go(func() { ends[w] = r.takeWorker(ctx, u, start.Add(o.Duration), hs[w], &tally) })
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	used := set.Sample().Sub(before)
	h := stats.NewHistogram()
	var all []time.Time
	for w := range o.LimitClients {
		h.Merge(hs[w])
		all = append(all, ends[w]...)
	}
	m := res.Metrics
	admitted := int64(len(all))
	takes := admitted + refused.Load()
	m[MetricTakesPerS] = math.Round(float64(takes)/elapsed*10) / 10
	m[MetricTakeP50], m[MetricTakeP99] = ms(h, 50), ms(h, 99)
	m[MetricAdmitted], m[MetricRefused], m[MetricRoleErrors] = float64(admitted), float64(refused.Load()), float64(errs.Load())
	windowMetrics(m, windowCounts(all, o.Window), o.Limit)
	addCPU(m, used, takes, MetricCPUPerKOf)
	st, err := driver.GetStats(ctx, base)
	res.Stats = st
	if err == nil && float64(errs.Load()) >= driver.FailShare*float64(max(takes, 1)) {
		err = fmt.Errorf("%d of %d takes failed", errs.Load(), takes+errs.Load())
	}
	return res, err
}

// takeTally counts a take loop's refused takes (429) and failed ones
// across its clients.
type takeTally struct {
	refused, errs atomic.Int64
}

// takeWorker takes from the key at u until deadline, recording each
// take's latency in h and counting in tally, and returns the window end each
// admitted take's answer states.
func (r *rolesRun) takeWorker(ctx context.Context, u string, deadline time.Time, h *hdrhistogram.Histogram, tally *takeTally) []time.Time {
	refused, errs := &tally.refused, &tally.errs
	body := fmt.Appendf(nil, `{"limit":%d,"window_ms":%d}`, r.o.Limit, r.o.Window.Milliseconds())
	var ends []time.Time
	for ctx.Err() == nil && time.Now().Before(deadline) {
		t0 := time.Now()
		code, b, err := driver.Do(ctx, http.MethodPost, u, body)
		now := time.Now()
		record(h, now.Sub(t0))
		switch {
		case err == nil && code == http.StatusOK:
			var t struct {
				ResetMS int64 `json:"reset_ms"`
			}
			if json.Unmarshal(b, &t) != nil {
				errs.Add(1)
				continue
			}
			ends = append(ends, now.Add(time.Duration(t.ResetMS)*time.Millisecond))
		case err == nil && code == http.StatusTooManyRequests:
			refused.Add(1)
		default:
			errs.Add(1)
			time.Sleep(10 * time.Millisecond)
		}
	}
	return ends
}

// windowMetrics records the admitted takes per window: how many windows,
// the most and (over the windows before the last, which the loop's end
// cuts) the fewest admitted, and the windows over limit.
func windowMetrics(m map[driver.Metric]float64, counts []int, limit int) {
	m[MetricLimit], m[MetricWindows] = float64(limit), float64(len(counts))
	over := 0
	for _, c := range counts {
		if c > limit {
			over++
		}
	}
	m[MetricOverLimitWindows] = float64(over)
	if len(counts) > 0 {
		m[MetricAdmittedMax] = float64(slices.Max(counts))
	}
	if len(counts) > 1 {
		m[MetricAdmittedMin] = float64(slices.Min(counts[:len(counts)-1]))
	}
}

// windowCounts groups admitted takes by their window's end (sorted):
// a new window starts where an end is more than half a window after the
// current window's first.
func windowCounts(ends []time.Time, window time.Duration) []int {
	sort.Slice(ends, func(i, j int) bool { return ends[i].Before(ends[j]) })
	var counts []int
	var first time.Time
	for _, t := range ends {
		if len(counts) == 0 || t.Sub(first) > window/2 {
			counts = append(counts, 0)
			first = t
		}
		counts[len(counts)-1]++
	}
	return counts
}

// cacheRolesNotes explains the roles' figures (none for a run without
// them), from run's settings and points.
func cacheRolesNotes(run *driver.Run) []string {
	if !hasPoint(run, CacheLockScenario) && !hasPoint(run, CachePubSubScenario) {
		return nil
	}
	var o struct {
		Sides  string  `json:"roles_sides"`
		P99    float64 `json:"roles_p99_bound_ms"`
		Window float64 `json:"roles_window_ms"`
		Bisect int     `json:"roles_bisect"`
	}
	_ = run.Setting("roles_sides", &o.Sides)
	_ = run.Setting("roles_p99_bound_ms", &o.P99)
	_ = run.Setting("roles_window_ms", &o.Window)
	_ = run.Setting("roles_bisect", &o.Bisect)
	out := []string{
		"the roles beyond the cache ran on one instance of each side of their own (" + o.Sides + "), after the cache points, on ports of their own (the side's port + offset + 1300)",
		"a lock cycle is one acquire (lease 10 s) and one release by the same client; in the contended point a 409 is retried at once, so conflicts per second count those retries",
		"the handover is the time from a holder's acquire (after which it neither renews nor releases, as a dead holder) until another client, polling every 5 ms, gets the lock: the lease plus the polling and the round trip",
		fmt.Sprintf("a pub/sub step passes when every subscriber got every message published in it within the drain after the step, the delivery p99 (from when the driver made the message to when a subscriber read it) is at most %g ms, no subscription ended, fewer than %g%% of publishes failed and the driver sent at least %g%% of the rate; each ladder stops at its first failing step and is bisected %d times between its last passing and first failing rate, one ladder per round; a round's ceiling is its highest passing rate, and the figure the rate 2 of 3 rounds passed", o.P99, 100*driver.FailShare, 100*SendShare, o.Bisect),
		"CPU per 1,000 deliveries counts the side's instance, the whole Postgres server, redis-server and the load driver itself (which reads every delivery) over the step and its drain; the driver shares the machine with the servers",
		fmt.Sprintf("rate-limit windows are told apart by the window end each admitted take's answer states (its arrival plus reset_ms, %g ms windows); the last window is cut by the loop's end, so the fewest admitted counts the full windows only", o.Window),
	}
	return out
}
