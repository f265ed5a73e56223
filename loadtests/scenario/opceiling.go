package scenario

import (
	"context"
	"fmt"
	"maps"
	"math"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/cost"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
)

// CeilingOp is one synchronous operation whose ceiling a search finds, the
// single-request searches of the pairs without a backlog (the documents'
// containment search and profile write, the cache's read, the event
// store's append): the same search as the queue and log pairs'
// (runCeiling, Judge), each step offering the operation at its rate.
// Every request is answered when its step ends, so a step leaves no
// backlog (backlog_end is 0), only, possibly, work still running inside
// a side after its client gave up, which the next step's precondition
// waits out (opStart).
type CeilingOp struct {
	// Scenario names the ceiling in the results
	// ("documents.search.ceiling").
	Scenario driver.ScenarioName
	// Latency is the server-side latency a step is judged by: the name of
	// a /stats latency, or of the one ServerP99 derives.
	Latency string
	// Timeout bounds each request (0: the driver's 10 s).
	Timeout time.Duration
	// Requests returns the requests of one attack on base, the n-th being
	// next(n). It is called once per attack and per probe, so that an
	// attack can send what none before it sent (fresh streams).
	Requests func(base string) (next func(n uint64) driver.Request)
	// ServerP99, when set, gives the judged latency's p99 from a step's
	// /stats where no single latency is it (the cache's reads: hits and
	// misses are two), and whether it could.
	ServerP99 func(st *driver.ServerStats) (float64, bool)
}

// ceilingSide is one side an operation's search runs on.
type ceilingSide struct {
	// name is the side in the results: its service's name.
	name string
	// base is its URL.
	base string
	// costs are the process groups whose CPU each step counts (cpu.<group>.s,
	// MetricCPUPerThousand).
	costs cost.Set
	// quiet are the groups that must be idle before a step: the side's
	// own processes (its service, and FerretDB for the mongodb side),
	// not the servers other users share (Postgres, Redis, Kafka).
	quiet cost.Set
	// ready says what of the side's declared state does not hold ("" when
	// it does): the documents' users counted; nil for nothing to prove.
	ready func(context.Context) string
	// inFlight is the MAX_IN_FLIGHT it runs with (nil: its own).
	inFlight *int
}

// The bounds of a quiet side: before a step, each of the side's own
// processes uses at most IdleCores over IdleWindow.
const (
	// IdleCores is the most CPU a process of a side may use while it is
	// called idle: far above a Go service's or FerretDB's idle use (close
	// to 0), far below one scan or request still running (a core).
	IdleCores = 0.1
	// IdleWindow is how long the CPU of the side's processes is sampled.
	IdleWindow = time.Second
)

// quietWhy says which group of used (CPU-seconds over window, by group)
// used more than IdleCores, "" when none did: the side is idle.
func quietWhy(used map[string]float64, window time.Duration) string {
	var busy []string
	for _, g := range slices.Sorted(maps.Keys(used)) {
		if cores := used[g] / window.Seconds(); cores > IdleCores {
			busy = append(busy, fmt.Sprintf("%s used %.2f cores", g, cores))
		}
	}
	if len(busy) == 0 {
		return ""
	}
	return fmt.Sprintf("not idle: %s over %s (at most %g each): still working off the step before", strings.Join(busy, ", "), window, IdleCores)
}

// quiet samples groups' CPU over IdleWindow and says which was busy (""
// when none; a group whose process was not found is not sampled).
func quiet(ctx context.Context, groups cost.Set) string {
	if len(groups) == 0 {
		return ""
	}
	before := groups.Sample()
	select {
	case <-ctx.Done():
		return ctx.Err().Error()
	case <-time.After(IdleWindow):
	}
	return quietWhy(groups.Sample().Sub(before), IdleWindow)
}

// probe sends one request of op to base and says what went wrong ("" when
// it was answered 2xx).
func probe(ctx context.Context, op CeilingOp, base string) string {
	timeout := op.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req := op.Requests(base)(0)
	if req.Method == "" {
		req.Method = http.MethodGet
	}
	code, b, err := driver.Do(ctx, req.Method, req.URL, req.Body)
	switch {
	case err != nil:
		return fmt.Sprintf("probe %s %s: %v", req.Method, strings.TrimPrefix(req.URL, base), err)
	case code < 200 || code > 299:
		return fmt.Sprintf("probe %s %s answered %d %s", req.Method, strings.TrimPrefix(req.URL, base), code, strings.TrimSpace(string(b)))
	}
	return ""
}

// opStart waits, up to bound, until side is at a step's declared start:
// its state holds (ready), its own processes are quiet, and a probe of op
// is answered 2xx. It returns "" or, as the step's Precondition, what
// did not hold.
func opStart(ctx context.Context, op CeilingOp, side ceilingSide, bound time.Duration) string {
	return waitFor(ctx, bound, preconditionPoll, func(ctx context.Context) string {
		if side.ready != nil {
			if why := side.ready(ctx); why != "" {
				return why
			}
		}
		if why := quiet(ctx, side.quiet); why != "" {
			return why
		}
		return probe(ctx, op, side.base)
	})
}

// stackDir is where the stack keeps its pid files: e.StackDir, else
// $STACK_DIR.
func (e *Env) stackDir() string {
	if e.StackDir != "" {
		return e.StackDir
	}
	return os.Getenv("STACK_DIR")
}

// sideCosts are the CPU groups of a step on svc: its service (the
// listener on its port), Postgres, and the specialists' processes given
// (the same for every side of a pair, so that each side's figures show
// what the other's system did meanwhile: nothing).
func (e *Env) sideCosts(ctx context.Context, svc Service, specialists ...cost.Group) cost.Set {
	set := cost.Set{cost.Process("service", 0, svc.Port+e.PortOffset), cost.Postgres(e.stackDir(), backendPID(ctx, e.PostgresURL))}
	return append(set, specialists...)
}

// ownQuiet are a pair's own processes, which must be quiet before any
// step of its searches (the step before may have been another side's):
// its services svcs, named by their names, and the private specialists
// given.
func (e *Env) ownQuiet(svcs []Service, private ...cost.Group) cost.Set {
	var set cost.Set
	for _, s := range svcs {
		set = append(set, cost.Process(s.Name, 0, s.Port+e.PortOffset))
	}
	return append(set, private...)
}

// opOnSide is an operation of a ceiling search on one side: the requests
// its steps send and the side they go to.
type opOnSide struct {
	op   CeilingOp
	side ceilingSide
}

// opAttack is the attack of t.op on t.side at rate for d, named with
// label and drawn on progress (nil: not drawn).
func (e *Env) opAttack(t opOnSide, rate float64, d time.Duration, label string, progress *driver.Progress) driver.AttackSpec {
	op, side := t.op, t.side
	return driver.AttackSpec{
		Name: strings.TrimSpace(fmt.Sprintf("%-12s %6g/s %s", side.name, rate, label)), Rate: rate, Duration: d,
		MaxWorkers: e.MaxWorkers, Progress: progress, Timeout: op.Timeout, Next: op.Requests(side.base),
	}
}

// opStep is one step of t.op's search on t.side at rate: its start
// proven (opStart, within bound), o.Warmup at the rate unmeasured, then
// o.Step measured from a reset of /stats, with the CPU of the side's
// groups.
func (e *Env) opStep(ctx context.Context, t opOnSide, o CeilingOptions, rate float64, bound time.Duration) (*driver.SideResult, error) {
	op, side := t.op, t.side
	if why := opStart(ctx, op, side, bound); why != "" {
		return &driver.SideResult{Precondition: why, Metrics: map[driver.Metric]float64{}}, nil
	}
	if o.Warmup > 0 {
		driver.Attack(ctx, e.opAttack(t, rate, o.Warmup, "warm-up", nil))
	}
	res := &driver.SideResult{Metrics: map[driver.Metric]float64{}}
	if err := driver.ResetStats(ctx, side.base); err != nil {
		return res, err
	}
	var c driver.ClientResult
	costWindow(res.Metrics, side.costs, func() { c = driver.Attack(ctx, e.opAttack(t, rate, o.Step, "", e.Progress)) })
	res.Phases = append(res.Phases, driver.Phase{Name: op.Latency, Client: c})
	driver.FlattenClient(res.Metrics, driver.ClientPrefix, c)
	res.Metrics[driver.ClientOK] = float64(c.OK)
	res.Metrics[MetricBacklogEnd] = 0
	StepCPU(res.Metrics, side.costs)
	st, err := driver.GetStats(ctx, side.base)
	res.Stats = st
	if err != nil {
		return res, err
	}
	driver.FlattenServer(res.Metrics, st)
	if op.ServerP99 != nil {
		if v, ok := op.ServerP99(st); ok {
			res.Metrics[driver.ServerLatency(op.Latency, driver.SuffixP99)] = v
		}
	}
	return res, nil
}

// runOpCeiling runs o.Rounds searches of op on each of sides (runCeiling)
// and records o in run's settings under op's scenario. Each step waits
// up to 1.5 × the settle bound for its start (opStart).
func (e *Env) runOpCeiling(ctx context.Context, run *driver.Run, op CeilingOp, sides []ceilingSide, o CeilingOptions) error {
	run.Settings[string(op.Scenario)] = o
	byName := map[string]ceilingSide{}
	var names []string
	for _, s := range sides {
		byName[s.name] = s
		names = append(names, s.name)
		var found []string
		for _, g := range s.costs {
			found = append(found, g.Name+": "+g.Source)
		}
		e.logf("%s on %s: CPU of %s", op.Scenario, s.name, strings.Join(found, "; "))
	}
	e.logf("%s: search from %g/s (x%g, max %g/s, %d bisections), %s steps after %s at the rate, %d rounds, MAX_IN_FLIGHT %d",
		op.Scenario, o.Start, o.Factor, o.Max, o.Bisect, o.Step, o.Warmup, o.Rounds, o.MaxInFlight)
	bound := 3 * e.settle() / 2
	spec := func(svc string) driver.CeilingSpec { return o.spec(op.Latency, "", byName[svc].inFlight) }
	measure := func(ctx context.Context, svc string, rate float64) (*driver.SideResult, error) {
		return e.opStep(ctx, opOnSide{op: op, side: byName[svc]}, o, rate, bound)
	}
	return runCeiling(ctx, e, run, ceilingScenario{name: op.Scenario, sides: names}, ceilingSearch{o: o, spec: spec, measure: measure})
}

// opEstimate is the expected duration of an operation's search on sides
// sides: the rate pairs' (CeilingOptions.estimate), plus each step's
// proof of its start (a quiet window and a probe; at the bound, the
// whole wait). The services' restart with the in-flight bound counts
// when restarts is set (the first search of a run), without the rate
// pairs' warm-up after it (each step warms up at its own rate).
func (o CeilingOptions) opEstimate(sides int, settle time.Duration, restarts bool) Estimate {
	e := o.estimate(sides, settle)
	if o.MaxInFlight != LeaveInFlight {
		less := warmupTime
		if !restarts {
			less += time.Duration(sides) * serviceStart
		}
		e.Typical, e.Bound = e.Typical-less, e.Bound-less
	}
	per := IdleWindow + attackOverhead
	e.Typical += time.Duration(e.Attacks) * per
	steps := o.Rounds * sides * (len(o.ladder()) + o.Bisect)
	e.Bound += time.Duration(steps) * (per + 3*settle/2)
	return e
}

// unionP99 is an upper bound of the p99 of the union of ls, from each
// one's count and quantiles: the lowest of their quantiles T such that
// the requests that may lie above T (in each, the share above its
// largest quantile at or below T) are at most 1% of all. It is the p99
// itself when one latency holds every request, and false when none
// holds any.
func unionP99(ls []driver.Summary) (float64, bool) {
	var total float64
	var cands []float64
	for _, l := range ls {
		if l.Count > 0 {
			total += float64(l.Count)
			cands = append(cands, l.P50MS, l.P90MS, l.P95MS, l.P99MS, l.P999MS, l.MaxMS)
		}
	}
	if total == 0 {
		return 0, false
	}
	slices.Sort(cands)
	for _, t := range cands {
		var above float64
		for _, l := range ls {
			if l.Count > 0 {
				above += float64(l.Count) * shareAbove(l, t)
			}
		}
		if above <= 0.01*total+1e-9 {
			return t, true
		}
	}
	return cands[len(cands)-1], true
}

// shareAbove is the most of l's requests that may be slower than t: the
// share above l's largest quantile at or below t (all when none is).
func shareAbove(l driver.Summary, t float64) float64 {
	share := 1.0
	for _, q := range []struct{ v, above float64 }{{l.P50MS, 0.5}, {l.P90MS, 0.1}, {l.P95MS, 0.05}, {l.P99MS, 0.01}, {l.P999MS, 0.001}, {l.MaxMS, 0}} {
		if q.v <= t {
			share = math.Min(share, q.above)
		}
	}
	return share
}
