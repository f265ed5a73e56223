package scenario

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/cost"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
)

// ThroughputScenario declares one pair's throughput points: closed-loop
// senders POSTing batches of Item to Path, wrapped as {"<Field>": [...]},
// and the end-to-end latency (/stats) that goes with the pair's
// processed or delivered counters.
type ThroughputScenario struct {
	// Pair is the pair driven (its In and Out counters give accepted and
	// end-to-end items).
	Pair Pair
	// Phase names the loop in the results ("send", "write").
	Phase string
	// Path is the batch endpoint ("/tasks/batch"), Field the body's array
	// ("tasks").
	Path, Field string
	// Item returns the n-th item's JSON (the rate scenarios' bodies).
	Item func(n uint64) []byte
	// Latency is the /stats latency that is end to end ("processing" is
	// send→processed, "delivery" write→delivered).
	Latency string
	// EndToEnd says in words what Latency and the Out counters measure.
	EndToEnd string
	// Overload runs the sustainable search's overload point (SustainOver
	// times each side's sustainable rate) on this pair.
	Overload bool
	// SustainEnv is set on both sides for the sustainable search and its
	// overload point (recorded in the run's settings as sustain_env).
	SustainEnv map[string]string
	// Design, when set, makes the scenario a Postgres side's other
	// design (throughput_design.go): its points are on Pair.A alone,
	// named by DesignScenarioName, with the design's environment.
	Design *Design
}

// The pairs' throughput scenarios: the same items as their rate
// scenarios, through the batch endpoints.
var (
	QueueThroughput = ThroughputScenario{Pair: QueuePair, Phase: "send", Path: "/tasks/batch", Field: "tasks",
		Item: QueueScenario.Load.Body, Latency: "processing", EndToEnd: "send→processed", Overload: true,
		// The backlog bound both queue services offer (docs/queue.md,
		// "Batch intake: the backlog bound"): past 20,000 open tasks, a
		// few seconds of processing here, batch intake is shed before
		// the workers starve. Below it, as at any sustainable rate, it
		// changes nothing.
		SustainEnv: map[string]string{"MAX_BACKLOG": "20000"}}
	LogThroughput = ThroughputScenario{Pair: LogPair, Phase: "write", Path: "/events/batch", Field: "events",
		Item: LogScenario.Load.Body, Latency: "delivery", EndToEnd: "write→delivered"}
	// Throughputs are the scenarios the throughput command runs, in order.
	Throughputs = []ThroughputScenario{QueueThroughput, LogThroughput}
)

// ThroughputOptions parameterize the throughput scenario.
type ThroughputOptions struct {
	// Sizes are the batch sizes (items per request, 1 to 1000).
	Sizes []int
	// Senders is the number of closed-loop senders per side.
	Senders int
	// Duration is each loop's duration; Rounds the rounds per point.
	Duration time.Duration
	Rounds   int
	// Drain bounds each wait for a side's backlog to drain, after its loop
	// and before its next point (a backlog the last point left); the run's
	// settle bound when that is longer. A batch loop can accept several
	// times what the consumer processes meanwhile (no-rabbitmq at batch
	// 1000: about 90,000 tasks/s accepted, 12,000 processed), so its
	// backlog takes several loop durations to drain; cut short, it would
	// be counted in the next point (the 08:17 UTC make results of 1 Dec
	// 2026, with the 20 s settle bound, started two no-rabbitmq rounds on
	// a backlog of 99,000 and 256,000 tasks).
	Drain time.Duration
	// StackDir is where the stack keeps its pid files (.stack); the
	// servers are found by a /proc scan when it holds none.
	StackDir string
	// Sustain, when not nil, runs each pair's sustainable search
	// (RunSustainable) after its closed-loop points; SkipClosedLoop
	// leaves the closed-loop points out (the sustainable command).
	Sustain        *SustainOptions
	SkipClosedLoop bool
	// Designs measures the Postgres sides' other designs too
	// (ThroughputDesigns: no-kafka decoding with pgoutput), after the
	// pairs, the same points on their side alone.
	Designs bool
}

// ThroughputDefaults fit the whole scenario (2 pairs × 4 sizes × 2 sides
// × 3 rounds, service starts, warm-ups and backlog drains) in about 12
// minutes on a 2-core machine. Three rounds, as for every published
// number (-rounds), so that a median is one round's figure and not the
// mean of two; 5 s per attack, because at 3 s one slow second (a
// checkpoint, an autovacuum of the fresh tables) moved a batch-1 median by
// a fifth (make results of 1 Dec 2026, 04:42 UTC: no-rabbitmq 1,661 and
// 1,996 tasks/s in its two rounds).
var ThroughputDefaults = ThroughputOptions{Sizes: []int{1, 10, 100, 1000}, Senders: 4, Duration: 5 * time.Second, Rounds: 3, Drain: 90 * time.Second, Designs: true}

// ThroughputScenarioName is the Point.Scenario of a pair's throughput
// points ("queue.throughput").
func ThroughputScenarioName(pair string) driver.ScenarioName {
	return driver.ScenarioName(pair + ".throughput")
}

// BatchLabel names a throughput point ("batch 100").
func BatchLabel(size int) string { return "batch " + strconv.Itoa(size) }

// Throughput metric names, per side: items accepted per second (2xx
// answers × batch size over the loop's wall time), items processed or
// delivered per second over the same window, and the CPU-seconds each
// process group used per 1,000 accepted items, from the loop's start to
// the backlog's drain ("cpu.<group>.per_1k"; "cpu.total.per_1k" sums
// them).
const (
	MetricAccepted = "accepted_per_s"
	MetricEndToEnd = "e2e_per_s"
)

// The throughput points' other figures, per side: the backlog the previous
// point left that had not drained when this one began (absent when none),
// and the items the side took in (the /stats counters of the pair's
// intake, read after the drain).
const (
	MetricBacklogBefore driver.Metric = "backlog_before"
	MetricItems         driver.Metric = "items"
)

// The process groups of the CPU figures (CostGroups; DriverGroup is the
// load driver's own): the side's service, every Postgres process,
// RabbitMQ's Erlang VM and Kafka's JVM.
const (
	CostGroupService  = "service"
	CostGroupPostgres = "postgres"
	CostGroupRabbitMQ = "rabbitmq"
	CostGroupKafka    = "kafka"
)

// MetricCPUPerThousand is the metric of the CPU-seconds a process group
// ("service", "postgres", "rabbitmq", "kafka"; "total" for their sum)
// used per 1,000 items: "cpu.<group>.per_1k".
func MetricCPUPerThousand(group string) driver.Metric {
	return driver.Metric("cpu." + group + ".per_1k")
}

// MetricCPUSeconds is the metric of the CPU-seconds a process group used
// over a window: "cpu.<group>.s".
func MetricCPUSeconds(group string) driver.Metric { return driver.Metric("cpu." + group + ".s") }

// CostProcessesSetting is the run setting that lists, per service, the
// process groups whose CPU was counted: their pids and how each was found
// (a map of service to cost.Set).
const CostProcessesSetting = "cost_processes"

// CostGroups are the process groups measured, in the report's order:
// the side's own service process, every Postgres process, RabbitMQ's
// Erlang VM and Kafka's JVM.
var CostGroups = []string{CostGroupService, CostGroupPostgres, CostGroupRabbitMQ, CostGroupKafka}

// Estimate returns the expected duration of the throughput scenario: per
// pair two service starts and a warm-up, then every loop with its
// overhead; the drains after the larger batches are the unknown (Bound
// lets each take the whole drain bound).
func (o ThroughputOptions) Estimate(settle time.Duration) Estimate {
	var e Estimate
	for _, s := range o.scenarios() {
		if o.Sustain != nil {
			e = e.Add(o.Sustain.estimateOf(s))
		}
		if !o.SkipClosedLoop {
			e = e.Add(o.closedLoopEstimate(s, settle))
		}
	}
	return e
}

// scenarios are the scenarios o runs: Throughputs, then
// ThroughputDesigns when o.Designs.
func (o ThroughputOptions) scenarios() []ThroughputScenario {
	if o.Designs {
		return append(slices.Clone(Throughputs), ThroughputDesigns...)
	}
	return Throughputs
}

// closedLoopEstimate is Estimate's closed-loop part of s.
func (o ThroughputOptions) closedLoopEstimate(s ThroughputScenario, settle time.Duration) Estimate {
	sides := len(s.sides())
	fixed := time.Duration(sides)*serviceStart + warmupTime
	e := attacks(len(o.Sizes)*o.Rounds*sides, o.Duration, o.drainBound(settle))
	// Typically the three largest sizes leave one side of each pair (the
	// Postgres queue most) a backlog of several loop durations.
	big := min(3, len(o.Sizes)) * o.Rounds
	e.Typical += fixed + time.Duration(big)*3*o.Duration
	e.Bound += fixed
	return e
}

// drainBound is how long a side's backlog may take to drain: o.Drain, or
// settle when that is longer.
func (o ThroughputOptions) drainBound(settle time.Duration) time.Duration {
	return max(o.Drain, settle)
}

// ThroughputCommand is the throughput scenarios' command and the kind
// of their results file: not the metric "throughput" (items/s).
const ThroughputCommand = "throughput"

// PairHooks are called around each pair of a run of several: Before (nil
// for nothing) before its services are started (to declare its tables'
// starting state), After (nil for nothing) after its points, to leave the
// CPU to the next pair.
type PairHooks struct {
	Before, After func(Pair)
}

// RunThroughput runs every pair's throughput points with o (the
// closed-loop points unless o.SkipClosedLoop, then the sustainable search
// when o.Sustain is set), then, with o.Designs, every design of
// ThroughputDesigns the same way on its side alone (runDesign), recording
// them in run, calling h's hooks around each pair.
func RunThroughput(ctx context.Context, e *Env, run *driver.Run, o ThroughputOptions, h PairHooks) error {
	before, stop := h.Before, h.After
	run.Settings["batch_sizes"] = o.Sizes
	run.Settings["senders"] = o.Senders
	run.Settings["duration_s"] = o.Duration.Seconds()
	run.Settings["rounds"] = o.Rounds
	run.Settings["settle_s"] = e.settle().Seconds()
	run.Settings["drain_s"] = o.drainBound(e.settle()).Seconds()
	run.Settings["closed_loop"] = !o.SkipClosedLoop
	if o.Sustain != nil {
		run.Settings[SustainSetting] = o.Sustain.Settings()
	}
	for _, s := range Throughputs {
		if before != nil {
			before(s.Pair)
		}
		var err error
		if !o.SkipClosedLoop {
			err = s.Run(ctx, e, run, o)
		}
		if err == nil && o.Sustain != nil {
			err = s.RunSustainable(ctx, e, run, *o.Sustain)
		}
		if stop != nil {
			stop(s.Pair)
		}
		if err != nil {
			return err
		}
	}
	if !o.Designs {
		return nil
	}
	// A design that fails is recorded (DesignsSetting) and the run goes
	// on: the pairs' figures stand without it.
	for _, s := range ThroughputDesigns {
		if err := s.runDesign(ctx, e, run, o, stop); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			e.logf("%s design of %s: %v (the report says so in place of its figures)", s.Design.Name, s.Pair.A.Name, err)
		}
	}
	return nil
}

// Body returns a batch of size items, numbered from 0.
func (s ThroughputScenario) Body(size int) []byte {
	var b strings.Builder
	b.WriteString(`{"` + s.Field + `":[`)
	for i := range size {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(s.Item(uint64(i)))
	}
	b.WriteString("]}")
	return []byte(b.String())
}

// Run measures the pair at every batch size of o, sides interleaved
// (each point runs both sides in rotated order, round after round), and
// appends the points to run. The processes whose CPU is counted, and how
// each was found, go to run.Settings["cost_processes"].
func (s ThroughputScenario) Run(ctx context.Context, e *Env, run *driver.Run, o ThroughputOptions) error {
	if err := e.Ensure(ctx, s.services(), nil, nil); err != nil {
		return err
	}
	groups := map[string]cost.Set{}
	for _, svc := range s.sides() {
		groups[svc] = s.costSet(ctx, e, svc, o.StackDir)
		all, _ := run.Settings[CostProcessesSetting].(map[string]cost.Set)
		if all == nil {
			all = map[string]cost.Set{}
			run.Settings[CostProcessesSetting] = all
		}
		all[svc] = groups[svc]
	}
	s.warmup(ctx, e, o)
	for _, size := range o.Sizes {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		e.logf("%s throughput: batch %d, %d senders, %s, %d rounds", s.Pair.Name, size, o.Senders, o.Duration, o.Rounds)
		body := s.Body(size)
		p := driver.Point{Scenario: s.pointScenario(ThroughputScenarioName(s.Pair.Name)), Name: BatchLabel(size), DurationS: o.Duration.Seconds(), Sides: s.sides(), Env: s.pointEnv()}
		err := driver.RunPoint(ctx, &p, o.Rounds, func(ctx context.Context, svc string, _ int) (*driver.SideResult, error) {
			return s.side(ctx, e, sidePoint{svc: svc, size: size, body: body, o: o, groups: groups[svc], report: true})
		})
		run.Points = append(run.Points, p)
		if err != nil {
			return err
		}
	}
	return nil
}

// costSet finds the processes of one side: see pairCostSet.
func (s ThroughputScenario) costSet(ctx context.Context, e *Env, svc, stackDir string) cost.Set {
	return pairCostSet(ctx, e, s.Pair, svc, stackDir)
}

// pairCostSet finds the processes of one side of pair: its service (the
// process listening on its port), Postgres (the parent of a backend of
// e.PostgresURL, else the pid file or a /proc scan), RabbitMQ and Kafka.
func pairCostSet(ctx context.Context, e *Env, pair Pair, svc, stackDir string) cost.Set {
	port := 0
	for _, x := range pair.Services() {
		if x.Name == svc {
			port = x.Port + e.PortOffset
		}
	}
	return costSetAt(ctx, e, port, stackDir)
}

// costSetAt is the process groups whose CPU a point counts: the service
// listening on port, Postgres (the parent of a backend of e.PostgresURL,
// else the pid file in stackDir or $STACK_DIR, else a /proc scan),
// RabbitMQ and Kafka.
func costSetAt(ctx context.Context, e *Env, port int, stackDir string) cost.Set {
	if stackDir == "" {
		stackDir = os.Getenv("STACK_DIR")
	}
	service := cost.Process(CostGroupService, 0, port)
	pg := cost.Postgres(stackDir, backendPID(ctx, e.PostgresURL))
	rmq, kafka := cost.RabbitMQ(stackDir), cost.Kafka(stackDir)
	rmq.Name, kafka.Name = CostGroupRabbitMQ, CostGroupKafka
	return cost.Set{service, pg, rmq, kafka}
}

// StackDir is the stack's folder for a repository at root: $STACK_DIR, or
// root/.stack.
func StackDir(root string) string {
	if d := os.Getenv("STACK_DIR"); d != "" {
		return d
	}
	return filepath.Join(root, ".stack")
}

// backendPID returns the pid of a backend of the Postgres at url, or 0.
func backendPID(ctx context.Context, url string) int {
	if url == "" {
		return 0
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(cctx, url)
	if err != nil {
		return 0
	}
	defer conn.Close(context.Background())
	var pid int
	if err := conn.QueryRow(cctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		return 0
	}
	return pid
}

// warmup runs one short loop per side at batch 10, recording nothing.
func (s ThroughputScenario) warmup(ctx context.Context, e *Env, o ThroughputOptions) {
	progress := e.Progress
	e.Progress = nil
	defer func() { e.Progress = progress }()
	w := o
	w.Duration = time.Second
	for _, svc := range s.sides() {
		if _, err := s.side(ctx, e, sidePoint{svc: svc, size: 10, body: s.Body(10), o: w}); err != nil {
			e.logf("warm-up of %s: %v", svc, err)
		}
	}
}

// sidePoint is one side of a closed-loop point: the side's service, the
// batches its loops post, how they run, the process groups whose CPU it
// samples, and whether its loops draw on the run's progress.
type sidePoint struct {
	// svc is the side's service.
	svc string
	// size is the items per batch, body one batch of them.
	size int
	body []byte
	// o sets the loops (senders, duration) and the drain bound.
	o ThroughputOptions
	// groups are the processes whose CPU the point samples (nil: none).
	groups cost.Set
	// report draws the loops on e.Progress (false for the warm-up).
	report bool
	// base and drain are the side's URL and drain bound, set by side.
	base  string
	drain time.Duration
}

// sideLoopRun is what a point's loop left for its measurement: what the
// client saw, when the loop began and how many seconds it ran, and the
// CPU sample taken just before it.
type sideLoopRun struct {
	c      driver.ClientResult
	t0     time.Time
	window float64
	cpu0   cost.Sample
}

// side measures one side at one batch size: reset its stats, sample the
// CPU of p.groups, run o.Senders closed loops for o.Duration, read
// /stats, wait for the backlog to drain (up to the drain bound), sample
// the CPU again and read /stats once more.
func (s ThroughputScenario) side(ctx context.Context, e *Env, p sidePoint) (*driver.SideResult, error) {
	p.base = e.URL(p.svc)
	p.drain = p.o.drainBound(e.settle())
	groups := p.groups
	res := &driver.SideResult{Metrics: map[driver.Metric]float64{}}
	if err := s.sideSetup(ctx, p.base, p.drain, res.Metrics); err != nil {
		return res, err
	}
	spec := s.sideLoop(e, p)
	cpu0 := groups.Sample()
	t0 := time.Now()
	c := driver.Loop(ctx, spec)
	window := time.Since(t0).Seconds()
	res.Phases = append(res.Phases, driver.Phase{Name: s.Phase, Client: c})
	driver.FlattenClient(res.Metrics, driver.ClientPrefix, c)
	final, drained, used, err := s.sideMeasure(ctx, p, res.Metrics, sideLoopRun{c: c, t0: t0, window: window, cpu0: cpu0})
	if err != nil {
		return res, err
	}
	// Every item the service took (the server's own count: a request cut
	// off by the loop's end may still have been committed) was accepted
	// and then processed or delivered within the sampled span when the
	// backlog drained; otherwise the items that made it through are the
	// fairer denominator.
	items := counterSum(final, s.Pair.In)
	if !drained {
		items = counterSum(final, s.Pair.Out)
	}
	sideCPU(res.Metrics, groups, used, items)
	res.Stats = final
	driver.FlattenServer(res.Metrics, final)
	return res, nil
}

// sideSetup is a point's setup: a backlog the previous point left (its
// drain hit the drain bound) would be counted as this point's end-to-end
// items, so it lets it drain first, within the same bound (recording
// what is left as "backlog_before"), then resets the side's stats.
func (s ThroughputScenario) sideSetup(ctx context.Context, base string, drain time.Duration, m map[driver.Metric]float64) error {
	if left, err := s.waitDrained(ctx, base, drain); err != nil {
		return err
	} else if left > 0 {
		m[MetricBacklogBefore] = float64(left)
	}
	return driver.ResetStats(ctx, base)
}

// sideLoop is a point's load: o.Senders closed loops POSTing body to
// the side's batch endpoint for o.Duration, drawn on e.Progress when
// report.
func (s ThroughputScenario) sideLoop(e *Env, p sidePoint) driver.LoopSpec {
	svc, size, body, o := p.svc, p.size, p.body, p.o
	url := e.URL(svc) + s.Path
	spec := driver.LoopSpec{
		Name: fmt.Sprintf("%-12s batch %d ×%d", svc, size, o.Senders), Workers: o.Senders, Duration: o.Duration,
		Op: func(ctx context.Context, _ int, _ uint64) (int, error) {
			code, _, err := driver.Do(ctx, http.MethodPost, url, body)
			return code, err
		},
	}
	if p.report {
		spec.Progress = e.Progress
	}
	return spec
}

// sideMeasure is a point's measurement, once its loop (lr: begun at t0,
// window seconds long) has ended: it reads /stats, records the accepted
// rate and the backlog at the end in m, waits up to p.drain for the
// backlog to drain, samples the CPU of p.groups since cpu0, and records
// the end-to-end rate, the items and how long the drain took. It returns
// /stats after the drain, whether the backlog drained, and the CPU
// seconds used per group.
func (s ThroughputScenario) sideMeasure(ctx context.Context, p sidePoint, m map[driver.Metric]float64, lr sideLoopRun) (*driver.ServerStats, bool, map[string]float64, error) {
	base, size, drain, groups := p.base, p.size, p.drain, p.groups
	c, t0, window, cpu0 := lr.c, lr.t0, lr.window, lr.cpu0
	atEnd, err := driver.GetStats(ctx, base)
	if err != nil {
		return nil, false, nil, err
	}
	accepted := c.OK * int64(size)
	m[MetricBatch] = float64(size)
	m[MetricAccepted] = round1(float64(accepted) / window)
	inWindow := float64(counterSum(atEnd, s.Pair.Out)) / window
	m[MetricBacklogEnd] = float64(max(s.Pair.backlog(atEnd), 0))
	t1 := time.Now()
	final, drained, err := s.Pair.drain(ctx, base, atEnd, drain, 100*time.Millisecond)
	if err != nil {
		return nil, false, nil, err
	}
	used := groups.Sample().Sub(cpu0)
	// The end-to-end rate is the higher of two lower bounds: what went
	// through during the loop (short of the items still in flight when it
	// ended), and what went through from the loop's start to the drain
	// (short of the idle time the drain's polling adds). With a backlog
	// the second is the sustained processing rate; without one, the first.
	through := counterSum(final, s.Pair.Out)
	m[MetricEndToEnd] = round1(max(inWindow, float64(through)/time.Since(t0).Seconds()))
	m[MetricItems] = float64(counterSum(final, s.Pair.In))
	m[MetricSettle] = math.Round(time.Since(t1).Seconds()*100) / 100
	m[MetricDrained] = b2f(drained)
	return final, drained, used, nil
}

// sideCPU records in m the CPU seconds each of groups used (used) and
// per thousand items, and their total.
func sideCPU(m map[driver.Metric]float64, groups cost.Set, used map[string]float64, items int64) {
	var total float64
	for _, g := range groups {
		if v, ok := used[g.Name]; ok {
			m[MetricCPUSeconds(g.Name)] = v
			total += v
			if pk := cost.PerThousand(v, items); !math.IsNaN(pk) {
				m[MetricCPUPerThousand(g.Name)] = pk
			}
		}
	}
	if len(used) > 0 {
		m[MetricCPUSeconds(CostTotal)] = math.Round(total*1000) / 1000
		if pk := cost.PerThousand(total, items); !math.IsNaN(pk) {
			m[MetricCPUPerThousand(CostTotal)] = pk
		}
	}
}

func round1(f float64) float64 { return math.Round(f*10) / 10 }

// waitDrained waits, up to bound, until the service's counters since
// its last reset show no backlog, and returns what is left.
func (s ThroughputScenario) waitDrained(ctx context.Context, base string, bound time.Duration) (int64, error) {
	deadline := time.Now().Add(bound)
	for {
		st, err := driver.GetStats(ctx, base)
		if err != nil {
			return 0, err
		}
		left := s.Pair.backlog(st)
		if left <= 0 || time.Now().After(deadline) {
			return max(left, 0), nil
		}
		select {
		case <-ctx.Done():
			return left, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
