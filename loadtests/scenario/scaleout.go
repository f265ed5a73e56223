package scenario

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// The scale-out scenario (issue 23, competing consumers): N instances of
// each queue service, each a process of its own on its own port, share
// one schema (no-rabbitmq: FOR UPDATE SKIP LOCKED under leases) or one
// queue (rabbitmq: each instance a consumer with its prefetch). Each
// instance runs WORKERS workers of WORK_MS simulated work, so that one
// instance has a known capacity (WORKERS×1000/WORK_MS tasks/s) and N
// instances are what the work needs, not what the machine's two cores
// need.

// Scenario names of the scale-out points.
const (
	// ScaleOutRate is a fixed rate, offered round-robin to the instances
	// (as a load balancer would).
	ScaleOutRate = "scaleout.rate"
	// ScaleOutBatch is a fixed number of tasks posted in batches as fast
	// as the senders can, timed until every one is processed.
	ScaleOutBatch = "scaleout.batch"
	// ScaleOutKill is kill -9 of one of two instances under load.
	ScaleOutKill = "scaleout.kill"
	// ScaleOutFanout is a fixed rate of FanoutKind tasks posted to one
	// instance whose FANOUT gives the kind N subscribers
	// (scaleout_fanout.go).
	ScaleOutFanout = "scaleout.fanout"
)

// Scale-out metric names, per side (besides the client.* of the
// attacks): processed tasks per second, each instance's share of them
// (share.<i>_pct; the smallest and largest in share.min_pct and
// share.max_pct), the highest instance's send→processed p99, and the
// tasks delivered more than once (delivered − processed − dead over every
// instance once the backlog drained; 0 without faults). The kill point
// has the tasks delivered again after the kill (the victim's recorded
// deliveries), the seconds from the kill until they were processed
// (median and largest), and the accepted tasks not done at the bound.
const (
	MetricScaleProcessed   = "processed_per_s"
	MetricScaleShareMin    = "share.min_pct"
	MetricScaleShareMax    = "share.max_pct"
	MetricScaleP99         = "processing.p99_ms"
	MetricScaleRedelivered = "redelivered"
	MetricScaleInstances   = "instances"
	MetricKillHeld         = "held"
	MetricKillP50          = "reprocessed_after.p50_s"
	MetricKillMax          = "reprocessed_after.max_s"
	MetricKillOpen         = "open_after_bound"
)

// MetricScaleProcessedTasks is a scale-out point's tasks processed over
// every instance (the /stats processed counters' sum).
const MetricScaleProcessedTasks driver.Metric = "processed"

// ScaleOutOptions parameterize the scale-out scenario.
type ScaleOutOptions struct {
	// Instances are the numbers of instances per side.
	Instances []int
	// Rates are the fixed rates (tasks/s, one POST /tasks each), offered
	// round-robin to the instances for Duration each.
	Rates    []float64
	Duration time.Duration
	// BatchTasks tasks are posted in batches of BatchSize by Senders
	// closed-loop senders (round-robin to the instances).
	BatchTasks, BatchSize, Senders int
	// Workers and WorkMS are every instance's WORKERS and WORK_MS.
	Workers, WorkMS int
	// Lease is no-rabbitmq's LEASE: how long a killed instance's tasks
	// stay locked (the default is 30 s).
	Lease time.Duration
	// Kill runs the kill -9 point on two instances: KillDuration of load
	// at the first rate, posted to the survivor, the victim killed a
	// third of the way in; with Groups, the log pair's takeover point
	// too (two instances of one group, at GroupRate).
	Kill         bool
	KillDuration time.Duration
	// Subscribers are the numbers of subscribers of the fan-out points
	// (none: no fan-out points); FanoutRate is their published rate
	// (tasks/s, each becoming one copy per subscriber) and FanoutWorkMS
	// their WORK_MS, small so that the copies' processing, not the
	// simulated work, is what N costs.
	Subscribers  []int
	FanoutRate   float64
	FanoutWorkMS int
	// FanoutSustain adds, per number of subscribers, the search for the
	// sustainable published rate on each side and design
	// (scaleout_sustain.go; nil: none).
	FanoutSustain *FanoutSustainOptions
	// Groups are the numbers of consumer groups (the default one
	// included) of the groups points, on the log pair (none: no groups
	// points); GroupRate is their rate of single POST /events.
	Groups    []int
	GroupRate float64
	// ReplayEvents are the events written before the replay point's new
	// group is created from earliest (0: no replay point), while
	// ReplayLiveRate events/s are written until it has caught up.
	ReplayEvents   int
	ReplayLiveRate float64
	// StoppedFor is how long the stopped-group point writes while one of
	// its three groups is not consumed (0: no stopped point), at
	// GroupRate.
	StoppedFor time.Duration
	// Cursors adds the Postgres sides' second designs as points of their
	// own beside each fan-out, groups, takeover, replay and stopped
	// point: no-rabbitmq with one message row and a cursor per
	// subscriber, no-kafka with one slot and a cursor per group
	// (secondDesign).
	Cursors bool
	// StackDir is where the stack keeps its pid files (.stack), to find
	// the servers whose CPU the fan-out and groups points count; empty:
	// a /proc scan.
	StackDir string
}

// ScaleOutDefaults took 4 min 12 s on 2 cores (2 December 2026, by
// hand, before the takeover, replay and fan-out search points;
// ScaleOutOptions.Estimate plans about 7, its instance starts counted
// generously). The fan-out search (FanoutSustainDefaults: 12 searches,
// N = 1, 2, 4, 8 on rabbitmq, no-rabbitmq and its cursors design) adds
// about 7 minutes by FanoutSustainOptions.estimate, which assumes each
// later search's bracket holds (two steps): an estimate, not measured.
// Per side 7 instance starts, 6 fixed-rate attacks of 6 s,
// 3 batch points (4,000 tasks at 400, 800 and 1,600 tasks/s of capacity),
// the kill point, and 4 fan-out points (one instance each); on the log
// pair 4 groups points and the takeover point (500 events/s, well within
// what one request at a time reaches on both sides). 300/s is
// within one instance's capacity (8 workers × 20 ms = 400 tasks/s); 600/s
// needs two. The fan-out points post 200 tasks/s, 1,600 copies/s at 8
// subscribers, within one instance's 8 workers × 1 ms and within what
// both sides sustain in batches (RESULTS.md's throughput section), so
// that they show what each subscriber costs rather than a backlog.
var ScaleOutDefaults = ScaleOutOptions{
	Instances: []int{1, 2, 4}, Rates: []float64{300, 600}, Duration: 6 * time.Second,
	BatchTasks: 4000, BatchSize: 100, Senders: 4, Workers: 8, WorkMS: 20,
	Lease: 5 * time.Second, Kill: true, KillDuration: 8 * time.Second,
	Subscribers: []int{1, 2, 4, 8}, FanoutRate: 200, FanoutWorkMS: 1, FanoutSustain: &FanoutSustainDefaults,
	Groups: []int{1, 2, 4, 8}, GroupRate: 500,
	ReplayEvents: 1000000, ReplayLiveRate: 200, StoppedFor: time.Minute, Cursors: true,
}

// secondDesign is a Postgres side's second design, selected by a
// setting of the service, measured as points of their own (on that side
// only) beside the first design's.
type secondDesign struct {
	side, env, value string
}

// Second designs (issue 23): no-kafka's groups as cursors over the one
// slot's log (GROUPS_DESIGN=cursors, docs/log.md "design 2"), and
// no-rabbitmq's fan-out as one message row with a cursor per subscriber
// (FANOUT_DESIGN=cursors, docs/queue.md "Fan-out").
var (
	groupsCursors = secondDesign{side: LogPair.A.Name, env: "GROUPS_DESIGN", value: "cursors"}
	fanoutCursors = secondDesign{side: QueuePair.A.Name, env: "FANOUT_DESIGN", value: "cursors"}
)

// settings are the service's environment for the design.
func (d secondDesign) settings() map[string]string { return map[string]string{d.env: d.value} }

// point is first's point for the design: same scenario, rate and
// duration, on the design's side only, named "<first's name>, <value>",
// the setting in its Env.
func (d secondDesign) point(first *driver.Point) *driver.Point {
	sides := []string{d.side}
	return &driver.Point{Scenario: first.Scenario, Name: first.Name + ", " + d.value, Rate: first.Rate, DurationS: first.DurationS,
		Sides: sides, Env: map[string]map[string]string{d.side: d.settings()},
		Rounds: []driver.Round{{Index: 0, Order: sides, Sides: map[string]*driver.SideResult{}}}}
}

// instanceStart is one instance started (its binary already built).
const instanceStart = 4 * time.Second

// scaleOutPortOffset is added to a side's port for its first instance;
// the next ones are 10 apart (no-rabbitmq 10082, 10092, …).
const scaleOutPortOffset = 2000

// capacity is one instance's tasks per second.
func (o ScaleOutOptions) capacity() float64 {
	return float64(o.Workers) * 1000 / float64(max(o.WorkMS, 1))
}

// fanoutSides is how many sides each number of subscribers is measured
// on: both queue sides, and no-rabbitmq's cursors design with Cursors.
func fanoutSides(o ScaleOutOptions) int {
	if o.Cursors {
		return 3
	}
	return 2
}

// Estimate returns the expected duration of the scenario.
func (o ScaleOutOptions) Estimate(settle time.Duration) Estimate {
	sides := 2
	starts := 0
	var batch time.Duration
	for _, n := range o.Instances {
		starts += n
		batch += time.Duration(float64(o.BatchTasks)/(o.capacity()*float64(n))*float64(time.Second)) + attackOverhead
	}
	e := attacks(sides*len(o.Instances)*len(o.Rates), o.Duration+2*time.Second, settle)
	e.Attacks += sides * len(o.Instances)
	fixed := time.Duration(sides) * (time.Duration(starts)*instanceStart + batch)
	if o.Kill {
		e.Attacks += sides
		fixed += time.Duration(sides)*(o.KillDuration+attackOverhead) + o.Lease
	}
	logSides := sides // the log pair's one-off points, with no-kafka's second design
	if o.Cursors {
		logSides++
	}
	if o.Kill && len(o.Groups) > 0 {
		e.Attacks += logSides
		fixed += time.Duration(logSides) * (2*instanceStart + o.KillDuration + attackOverhead)
		e.Bound += time.Duration(logSides) * max(settle, 30*time.Second)
	}
	if o.ReplayEvents > 0 {
		// 200,000 events took 29 s per side on 2 cores (the fill, the
		// default group's delivery, the replay; 2 December 2026)
		per := time.Duration(float64(o.ReplayEvents)/200000*30*float64(time.Second)) + instanceStart + attackOverhead
		e.Attacks += logSides
		fixed += time.Duration(logSides) * per
		e.Bound += time.Duration(logSides) * per
	}
	if o.StoppedFor > 0 {
		// The writes, then a second instance and the catch-up.
		per := o.StoppedFor + 2*instanceStart + 2*attackOverhead
		e.Attacks += logSides
		fixed += time.Duration(logSides) * per
		e.Bound += time.Duration(logSides) * (per + 2*max(settle, 30*time.Second))
	}
	if n := len(o.Subscribers) + len(o.Groups); n > 0 {
		if o.Cursors { // one more side at each point
			sides++
		}
		e.Attacks += sides * n
		fixed += time.Duration(sides*n) * (instanceStart + o.Duration + 2*time.Second + attackOverhead)
		e.Bound += time.Duration(sides*n) * settle
	}
	if o.FanoutSustain != nil {
		e = e.Add(o.FanoutSustain.estimate(fanoutSides(o), o.Subscribers))
	}
	e.Typical += fixed
	e.Bound += fixed + time.Duration(sides*len(o.Instances))*settle
	return e
}

// ScaleOutCommand is the scale-out scenario's command and the kind of
// its results file (issue 23).
const ScaleOutCommand = "scaleout"

// RunScaleOut runs the scenario: for each side and each number of
// instances, a fleet of fresh instances on a fresh schema (and queue),
// the fixed rates, the batch point and, with two instances, the kill -9
// point; then for each number of subscribers a fresh instance with that
// fan-out, at the fan-out rate; then on each log side, for each number
// of consumer groups, a fresh instance with that many groups, at the
// groups' rate. Each point has one round. It needs the
// driver to start the instances itself (-start=auto or always).
func RunScaleOut(ctx context.Context, e *Env, run *driver.Run, o ScaleOutOptions) error {
	if e.Launcher == nil {
		return errors.New("scaleout starts its own instances: run it with -start=auto or -start=always")
	}
	scaleOutSettings(run, o)
	sides := QueuePair.Sides()
	pts := newScaleOutPoints(o, sides)
	defer func() {
		for _, p := range pts.order {
			driver.Summarize(p)
			run.Points = append(run.Points, *p)
		}
	}()
	for _, svc := range sides {
		for _, n := range o.Instances {
			if err := ctx.Err(); err != nil {
				return err
			}
			pts.measure(ctx, e, svc, n, o)
		}
		for _, n := range o.Subscribers {
			if err := ctx.Err(); err != nil {
				return err
			}
			pts.fanoutPoints(ctx, e, svc, n, o)
		}
	}
	for _, svc := range LogPair.Sides() {
		for _, n := range o.Groups {
			if err := ctx.Err(); err != nil {
				return err
			}
			pts.groups(ctx, e, scaleOutSide{svc: svc, p: pts.groupPoints[n]}, n, o)
			if p := pts.cursorGroups[n]; p != nil && svc == groupsCursors.side {
				pts.groups(ctx, e, scaleOutSide{svc: svc, p: p, extra: groupsCursors.settings()}, n, o)
			}
		}
		for _, one := range []struct {
			p       *driver.Point
			measure func(context.Context, *Env, scaleOutSide, ScaleOutOptions)
		}{{pts.takeoverPoint, pts.takeover}, {pts.replayPoint, pts.replay}, {pts.stoppedPoint, pts.stopped}} {
			if one.p == nil || ctx.Err() != nil {
				continue
			}
			one.measure(ctx, e, scaleOutSide{svc: svc, p: one.p}, o)
			if p := pts.cursorsOf[one.p]; p != nil && svc == groupsCursors.side && ctx.Err() == nil {
				one.measure(ctx, e, scaleOutSide{svc: svc, p: p, extra: groupsCursors.settings()}, o)
			}
		}
	}
	return ctx.Err()
}

// scaleOutSettings records o in run's settings.
func scaleOutSettings(run *driver.Run, o ScaleOutOptions) {
	run.Settings["instances"] = o.Instances
	run.Settings["rates"] = o.Rates
	run.Settings["duration_s"] = o.Duration.Seconds()
	run.Settings["batch_tasks"] = o.BatchTasks
	run.Settings["batch_size"] = o.BatchSize
	run.Settings["senders"] = o.Senders
	run.Settings["workers"] = o.Workers
	run.Settings["work_ms"] = o.WorkMS
	run.Settings["lease_s"] = o.Lease.Seconds()
	run.Settings["kill_duration_s"] = o.KillDuration.Seconds()
	if len(o.Subscribers) > 0 {
		run.Settings["subscribers"] = o.Subscribers
		run.Settings["fanout_rate"] = o.FanoutRate
		run.Settings["fanout_work_ms"] = o.FanoutWorkMS
		run.Settings["fanout_kind"] = FanoutKind
		if o.FanoutSustain != nil {
			run.Settings[FanoutSustainSetting] = o.FanoutSustain.Settings()
			run.Settings[FanoutSustainWorkSetting] = o.FanoutSustain.WorkMS
		}
	}
	if len(o.Groups) > 0 {
		run.Settings["groups"] = o.Groups
		run.Settings["group_rate"] = o.GroupRate
	}
	if o.Cursors {
		run.Settings["cursors"] = map[string]string{groupsCursors.side: groupsCursors.env + "=" + groupsCursors.value,
			fanoutCursors.side: fanoutCursors.env + "=" + fanoutCursors.value}
	}
	if o.ReplayEvents > 0 {
		run.Settings["replay_events"] = o.ReplayEvents
		run.Settings["replay_live_rate"] = o.ReplayLiveRate
	}
	if o.StoppedFor > 0 {
		run.Settings["stopped_for_s"] = o.StoppedFor.Seconds()
	}
}

// scaleOutKey names a rate point: its rate and instance count.
type scaleOutKey struct {
	rate float64
	n    int
}

// scaleOutPoints are the scenario's points, one round each, filled side
// by side: the rate points, the batch points and the kill point.
type scaleOutPoints struct {
	rates   map[scaleOutKey]*driver.Point
	batches map[int]*driver.Point
	kill    *driver.Point
	// takeoverPoint, replayPoint and stoppedPoint are the log pair's
	// kill -9, replay and stopped-group points (nil: not run); cursorsOf
	// has each one's point of no-kafka's second design (none unless
	// ScaleOutOptions.Cursors).
	takeoverPoint, replayPoint, stoppedPoint *driver.Point
	cursorsOf                                map[*driver.Point]*driver.Point
	// fanouts are the fan-out points by number of subscribers, and
	// groupPoints the groups points (log pair) by number of groups;
	// cursorFanouts and cursorGroups the same points of the Postgres
	// sides' second designs (empty unless ScaleOutOptions.Cursors);
	// fanoutSustains and cursorFanoutSustains the fan-out searches'
	// points (empty unless ScaleOutOptions.FanoutSustain).
	fanouts, groupPoints, cursorFanouts, cursorGroups map[int]*driver.Point
	fanoutSustains, cursorFanoutSustains              map[int]*driver.Point
	// copySeeds are the last fan-out search's bracket, in copies per
	// second, by side and design (fanoutSustain).
	copySeeds map[string]bracket
	// order is every point in the order of the results file.
	order []*driver.Point
}

// newScaleOutPoints makes the points of o for sides.
func newScaleOutPoints(o ScaleOutOptions, sides []string) *scaleOutPoints {
	newPointOf := func(sides []string, scenario driver.ScenarioName, name string, rate, d float64) *driver.Point {
		return &driver.Point{Scenario: scenario, Name: name, Rate: rate, DurationS: d, Sides: sides,
			Rounds: []driver.Round{{Index: 0, Order: sides, Sides: map[string]*driver.SideResult{}}}}
	}
	newPoint := func(scenario driver.ScenarioName, name string, rate, d float64) *driver.Point {
		return newPointOf(sides, scenario, name, rate, d)
	}
	pts := &scaleOutPoints{rates: map[scaleOutKey]*driver.Point{}, batches: map[int]*driver.Point{}, fanouts: map[int]*driver.Point{}, groupPoints: map[int]*driver.Point{},
		cursorFanouts: map[int]*driver.Point{}, cursorGroups: map[int]*driver.Point{}, cursorsOf: map[*driver.Point]*driver.Point{},
		fanoutSustains: map[int]*driver.Point{}, cursorFanoutSustains: map[int]*driver.Point{}, copySeeds: map[string]bracket{}}
	for _, r := range o.Rates {
		for _, n := range o.Instances {
			p := newPoint(ScaleOutRate, fmt.Sprintf("%s ×%d", driver.Label(r), n), r, o.Duration.Seconds())
			pts.rates[scaleOutKey{r, n}] = p
			pts.order = append(pts.order, p)
		}
	}
	for _, n := range o.Instances {
		p := newPoint(ScaleOutBatch, fmt.Sprintf("%d tasks ×%d", o.BatchTasks, n), 0, 0)
		pts.batches[n] = p
		pts.order = append(pts.order, p)
	}
	if o.Kill && len(o.Rates) > 0 && slices.Contains(o.Instances, 2) {
		pts.kill = newPoint(ScaleOutKill, "kill -9 1 of 2", o.Rates[0], o.KillDuration.Seconds())
		pts.order = append(pts.order, pts.kill)
	}
	// addAt records p at n in points and adds it (add), with its point of
	// design at n in cursors.
	addAt := func(n int, p *driver.Point, points map[int]*driver.Point, design secondDesign, cursors map[int]*driver.Point) {
		points[n] = p
		if c := pts.add(p, design, o.Cursors); c != nil {
			cursors[n] = c
		}
	}
	for _, n := range o.Subscribers {
		addAt(n, newPoint(ScaleOutFanout, fanoutName(o.FanoutRate, n), o.FanoutRate, o.Duration.Seconds()), pts.fanouts, fanoutCursors, pts.cursorFanouts)
	}
	for _, n := range o.Subscribers {
		if o.FanoutSustain == nil {
			break
		}
		addAt(n, newPoint(ScaleOutFanoutSustain, SubscribersName(n), 0, o.FanoutSustain.Step.Seconds()), pts.fanoutSustains, fanoutCursors, pts.cursorFanoutSustains)
	}
	for _, n := range o.Groups {
		addAt(n, newPointOf(LogPair.Sides(), ScaleOutGroups, groupPointName(o.GroupRate, n), o.GroupRate, o.Duration.Seconds()), pts.groupPoints, groupsCursors, pts.cursorGroups)
	}
	logPoint := func(scenario driver.ScenarioName, name string, rate, d float64) *driver.Point {
		p := newPointOf(LogPair.Sides(), scenario, name, rate, d)
		if c := pts.add(p, groupsCursors, o.Cursors); c != nil {
			pts.cursorsOf[p] = c
		}
		return p
	}
	if o.Kill && len(o.Groups) > 0 {
		pts.takeoverPoint = logPoint(ScaleOutTakeover, takeoverPointName, o.GroupRate, o.KillDuration.Seconds())
	}
	if o.ReplayEvents > 0 {
		pts.replayPoint = logPoint(ScaleOutReplay, replayPointName(o.ReplayEvents), o.ReplayLiveRate, 0)
	}
	if o.StoppedFor > 0 && len(o.Groups) > 0 {
		pts.stoppedPoint = logPoint(ScaleOutStopped, stoppedPointName(o.GroupRate, o.StoppedFor), o.GroupRate, o.StoppedFor.Seconds())
	}
	return pts
}

// add appends p to the order and, when cursors, design's point of p
// after it, which it returns (nil when not cursors).
func (pts *scaleOutPoints) add(p *driver.Point, design secondDesign, cursors bool) *driver.Point {
	pts.order = append(pts.order, p)
	if !cursors {
		return nil
	}
	c := design.point(p)
	pts.order = append(pts.order, c)
	return c
}

// set records svc's result (or err) in p's round.
func (pts *scaleOutPoints) set(p *driver.Point, svc string, res *driver.SideResult, err error) {
	if res == nil {
		res = &driver.SideResult{Metrics: map[driver.Metric]float64{}}
	}
	res.Service = svc
	if err != nil {
		res.Error = err.Error()
	}
	p.Rounds[0].Sides[svc] = res
}

// scaleOutSide is one side's measure of one scale-out point: the side's
// service, the point, and a second design's setting its instance runs
// with (nil: the main design's).
type scaleOutSide struct {
	svc   string
	p     *driver.Point
	extra map[string]string
}

// measureOne records at.svc's side of the one point at.p, measured on
// what start makes: start's error, or what measure returns; what start
// made is stopped after measure, whatever it returned.
func measureOne[F interface{ stop(context.Context) }](ctx context.Context, pts *scaleOutPoints, at scaleOutSide,
	start func() (F, error), measure func(F) (*driver.SideResult, error)) {
	p, svc := at.p, at.svc
	f, err := start()
	if err != nil {
		pts.set(p, svc, nil, err)
		return
	}
	res, err := measure(f)
	pts.set(p, svc, res, err)
	f.stop(ctx)
}

// measure starts n instances of svc and measures their points: every
// rate, the batch and, with two instances, the kill; when the instances
// do not start, each of those points records why.
func (pts *scaleOutPoints) measure(ctx context.Context, e *Env, svc string, n int, o ScaleOutOptions) {
	e.logf("scaleout: %s ×%d (%d workers of %d ms each)", svc, n, o.Workers, o.WorkMS)
	f, err := startFleet(ctx, e, fleetSpec{svc: svc, n: n}, o)
	if err != nil {
		for _, r := range o.Rates {
			pts.set(pts.rates[scaleOutKey{r, n}], svc, nil, err)
		}
		pts.set(pts.batches[n], svc, nil, err)
		if pts.kill != nil && n == 2 {
			pts.set(pts.kill, svc, nil, err)
		}
		return
	}
	for _, r := range o.Rates {
		res, err := f.rate(ctx, r, o.Duration)
		pts.set(pts.rates[scaleOutKey{r, n}], svc, res, err)
	}
	res, err := f.batch(ctx, o)
	pts.set(pts.batches[n], svc, res, err)
	if pts.kill != nil && n == 2 {
		res, err := f.kill(ctx, o.Rates[0], o)
		pts.set(pts.kill, svc, res, err)
	}
	f.stop(ctx)
}

// fleet is N instances of one side on one schema (and queue).
type fleet struct {
	e             *Env
	svc           string
	schema, queue string
	names, urls   []string
	ports         []int
	killed        []bool
	// subscribers is the most subscribers of any fan-out point
	// (ScaleOutOptions.Subscribers), whose queues reset deletes as well
	// on the rabbitmq side, whatever the fleet (0: none).
	subscribers int
}

// fleetSpec is the instances a fleet starts: n of svc, with extra added
// to (or replacing) their environment (nil: nothing).
type fleetSpec struct {
	svc   string
	n     int
	extra map[string]string
}

// startFleet drops what a previous run left in the side's schema (and
// queues), then starts fs.n instances of fs.svc, with fs.extra added to
// (or replacing) their environment.
func startFleet(ctx context.Context, e *Env, fs fleetSpec, o ScaleOutOptions) (*fleet, error) {
	svc, n, extra := fs.svc, fs.n, fs.extra
	f := &fleet{e: e, svc: svc, schema: "scaleout_" + strings.ReplaceAll(svc, "-", "_"), queue: "scaleout", subscribers: slices.Max(append([]int{0}, o.Subscribers...))}
	if err := f.reset(ctx); err != nil {
		return nil, err
	}
	env := map[string]string{"DATABASE_SCHEMA": f.schema, "WORKERS": strconv.Itoa(o.Workers), "WORK_MS": strconv.Itoa(o.WorkMS)}
	maps.Copy(env, extra)
	if svc == QueuePair.A.Name {
		env["LEASE"] = o.Lease.String()
	} else {
		env["RABBITMQ_QUEUE"] = f.queue
	}
	port := ServiceOf(svc).Port + e.PortOffset + scaleOutPortOffset
	timeout := e.ReadyTimeout
	if timeout == 0 {
		timeout = 90 * time.Second
	}
	for i := range n {
		name := fmt.Sprintf("%s@scaleout%d", svc, i)
		p := port + 10*i
		if _, err := e.Launcher.Start(ctx, name, p, env, timeout); err != nil {
			f.stop(ctx)
			return nil, err
		}
		f.names = append(f.names, name)
		f.urls = append(f.urls, fmt.Sprintf("http://%s:%d", e.host(), p))
		f.ports = append(f.ports, p)
		f.killed = append(f.killed, false)
	}
	return f, nil
}

// stop stops the instances still running and drops their schema and
// queues.
func (f *fleet) stop(ctx context.Context) {
	for i, name := range f.names {
		if !f.killed[i] {
			if err := f.e.Launcher.Stop(name, 30*time.Second); err != nil {
				f.e.logf("scaleout: %v", err)
			}
		}
	}
	if err := f.reset(ctx); err != nil {
		f.e.logf("scaleout: cleaning up %s: %v", f.schema, err)
	}
}

// reset drops the side's schema and, on the rabbitmq side, its queues
// (the fan-out ones of f.subscribers too).
func (f *fleet) reset(ctx context.Context) error {
	conn, err := f.e.connect(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{f.schema}.Sanitize()+" CASCADE"); err != nil {
		return fmt.Errorf("drop schema %s: %w", f.schema, err)
	}
	if f.svc == QueuePair.A.Name {
		return nil
	}
	if err := deleteQueues(rabbitMQURL(), f.queue); err != nil {
		return err
	}
	if f.subscribers > 0 {
		return dropFanout(rabbitMQURL(), f.queue, f.subscribers)
	}
	return nil
}

// rabbitMQURL is RABBITMQ_URL, or the stack's broker.
func rabbitMQURL() string {
	if u := os.Getenv("RABBITMQ_URL"); u != "" {
		return u
	}
	return pairs.DefaultRabbitMQURL
}

// deleteQueues deletes the queues and the exchange the rabbitmq service
// declares for name with the default RETRY_BASE and MAX_ATTEMPTS.
func deleteQueues(url, name string) error {
	names := []string{name, name + ".dead"}
	for ms := 200; ms <= 1600; ms *= 2 {
		names = append(names, name+".retry."+strconv.Itoa(ms))
	}
	return deleteNames(url, names, []string{name + ".dlx"})
}

// deleteNames deletes queues and exchanges on the broker at url; those
// that do not exist are skipped.
func deleteNames(url string, queues, exchanges []string) error {
	conn, err := amqp.DialConfig(url, amqp.Config{Dial: amqp.DefaultDial(5 * time.Second)})
	if err != nil {
		return fmt.Errorf("rabbitmq (RABBITMQ_URL): %w", err)
	}
	defer conn.Close()
	for _, q := range queues {
		ch, err := conn.Channel() // a failed delete closes its channel
		if err != nil {
			return err
		}
		_, _ = ch.QueueDelete(q, false, false, false)
		_ = ch.Close()
	}
	for _, x := range exchanges {
		ch, err := conn.Channel()
		if err != nil {
			return err
		}
		_ = ch.ExchangeDelete(x, false, false)
		_ = ch.Close()
	}
	return nil
}

// live returns the base URLs of the instances not killed.
func (f *fleet) live() []string {
	var out []string
	for i, u := range f.urls {
		if !f.killed[i] {
			out = append(out, u)
		}
	}
	return out
}

// resetStats resets every live instance's /stats.
func (f *fleet) resetStats(ctx context.Context) error {
	for _, u := range f.live() {
		if err := driver.ResetStats(ctx, u); err != nil {
			return err
		}
	}
	return nil
}

// stats reads every live instance's /stats, in instance order.
func (f *fleet) stats(ctx context.Context) ([]*driver.ServerStats, error) {
	var out []*driver.ServerStats
	for _, u := range f.live() {
		s, err := driver.GetStats(ctx, u)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// sum adds a counter over every instance.
func sum(sts []*driver.ServerStats, name string) int64 {
	var n int64
	for _, s := range sts {
		n += s.Counters[name]
	}
	return n
}

// drain waits, up to bound, until every task the instances took is
// processed or dead; it returns the last stats read and whether they
// drained.
func (f *fleet) drain(ctx context.Context, bound time.Duration) ([]*driver.ServerStats, bool, error) {
	deadline := time.Now().Add(bound)
	for {
		sts, err := f.stats(ctx)
		if err != nil {
			return nil, false, err
		}
		if sum(sts, queue.CounterProcessed)+sum(sts, queue.CounterDead) >= sum(sts, queue.CounterEnqueued) {
			return sts, true, nil
		}
		if time.Now().After(deadline) {
			return sts, false, nil
		}
		select {
		case <-ctx.Done():
			return sts, false, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// fill adds the shares, the highest p99 and, when drained, the tasks
// delivered more than once.
func fill(m map[driver.Metric]float64, sts []*driver.ServerStats, drained bool) {
	processed := sum(sts, queue.CounterProcessed)
	m[MetricScaleInstances] = float64(len(sts))
	m[MetricScaleProcessedTasks] = float64(processed)
	m[MetricDrained] = b2f(drained)
	if processed > 0 {
		lo, hi := 100.0, 0.0
		for i, s := range sts {
			share := math.Round(1000*float64(s.Counters[queue.CounterProcessed])/float64(processed)) / 10
			m[MetricScaleShare(i)] = share
			lo, hi = min(lo, share), max(hi, share)
		}
		m[MetricScaleShareMin], m[MetricScaleShareMax] = lo, hi
	}
	p99, seen := 0.0, false
	for _, s := range sts {
		if l, ok := s.Latencies["processing"]; ok && l.Count > 0 {
			p99, seen = max(p99, l.P99MS), true
		}
	}
	if seen {
		m[MetricScaleP99] = p99
	}
	if drained {
		m[MetricScaleRedelivered] = float64(max(sum(sts, queue.CounterDelivered)-processed-sum(sts, queue.CounterDead), 0))
	}
}

// rate offers rate tasks/s round-robin to the instances for d, then waits
// for the backlog to drain.
func (f *fleet) rate(ctx context.Context, rate float64, d time.Duration) (*driver.SideResult, error) {
	res := &driver.SideResult{Metrics: map[driver.Metric]float64{}}
	if err := f.resetStats(ctx); err != nil {
		return res, err
	}
	urls := f.live()
	spec := driver.AttackSpec{
		Name: fmt.Sprintf("%-12s ×%d %s", f.svc, len(urls), driver.Label(rate)), Rate: rate, Duration: d,
		MaxWorkers: f.e.MaxWorkers, Progress: f.e.Progress,
		Next: func(n uint64) driver.Request {
			return driver.Request{Method: http.MethodPost, URL: urls[n%uint64(len(urls))] + "/tasks", Body: QueueScenario.Load.Body(n)}
		},
	}
	final, drained, err := f.attack(ctx, spec, res, MetricScaleProcessed)
	if err != nil {
		return res, err
	}
	fill(res.Metrics, final, drained)
	return res, nil
}

// attack runs spec against the fleet, records its client phase in res,
// the tasks processed per second during it as metric and the backlog at
// its end, then waits for the backlog to drain (the settle bound); it
// returns the stats read last and whether they drained.
func (f *fleet) attack(ctx context.Context, spec driver.AttackSpec, res *driver.SideResult, metric driver.Metric) ([]*driver.ServerStats, bool, error) {
	c := driver.Attack(ctx, spec)
	res.Phases = append(res.Phases, driver.Phase{Name: "send", Client: c})
	driver.FlattenClient(res.Metrics, driver.ClientPrefix, c)
	atEnd, err := f.stats(ctx)
	if err != nil {
		return nil, false, err
	}
	if c.DurationS > 0 {
		res.Metrics[metric] = round1(float64(sum(atEnd, queue.CounterProcessed)) / c.DurationS)
	}
	res.Metrics[MetricBacklogEnd] = float64(max(sum(atEnd, queue.CounterEnqueued)-sum(atEnd, queue.CounterProcessed)-sum(atEnd, queue.CounterDead), 0))
	return f.drain(ctx, f.e.settle())
}

// batch posts o.BatchTasks tasks in batches as fast as o.Senders senders
// can and times them until every one is processed: processed/s is the
// tasks over that time.
func (f *fleet) batch(ctx context.Context, o ScaleOutOptions) (*driver.SideResult, error) {
	res := &driver.SideResult{Metrics: map[driver.Metric]float64{}}
	if err := f.resetStats(ctx); err != nil {
		return res, err
	}
	urls := f.live()
	body := QueueThroughput.Body(o.BatchSize)
	requests := max(o.BatchTasks/max(o.BatchSize, 1), 1)
	t0 := time.Now()
	c := postBatches(ctx, urls, batchPosts{path: QueueThroughput.Path, body: body, requests: requests, senders: o.Senders})
	res.Phases = append(res.Phases, driver.Phase{Name: "send", Client: c})
	res.Metrics[driver.ClientOK] = float64(c.OK)
	res.Metrics[driver.ClientErrors] = float64(c.Errors)
	final, drained, err := f.drain(ctx, max(f.e.settle(), time.Minute))
	if err != nil {
		return res, err
	}
	if drained {
		res.Metrics[MetricScaleProcessed] = round1(float64(sum(final, queue.CounterProcessed)) / time.Since(t0).Seconds())
	}
	fill(res.Metrics, final, drained)
	return res, nil
}

// batchPosts is what postBatches sends: requests POSTs of body to path
// (a batch endpoint: /tasks/batch, /events/batch), from senders
// closed-loop senders.
type batchPosts struct {
	path              string
	body              []byte
	requests, senders int
}

// postBatches sends bp's requests round-robin over urls and returns what
// the client saw (answers and their codes; no latency).
func postBatches(ctx context.Context, urls []string, bp batchPosts) driver.ClientResult {
	path, body, requests, senders := bp.path, bp.body, bp.requests, bp.senders
	c := driver.ClientResult{Codes: map[string]int64{}}
	var mu sync.Mutex
	var next atomic.Int64
	var wg sync.WaitGroup
	t0 := time.Now()
	for range max(senders, 1) {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(requests) || ctx.Err() != nil {
					return
				}
				code, _, err := driver.Do(ctx, http.MethodPost, urls[int(i)%len(urls)]+path, body)
				mu.Lock()
				c.Requests++
				c.Codes[strconv.Itoa(code)]++
				switch {
				case err != nil:
					c.Errors++
					if len(c.ErrorSamples) < 5 {
						c.ErrorSamples = append(c.ErrorSamples, err.Error())
					}
				case code/100 == 2:
					c.OK++
				default:
					c.Errors++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	c.DurationS = time.Since(t0).Seconds()
	if c.DurationS > 0 {
		c.SentRate = float64(c.Requests) / c.DurationS
		c.Throughput = float64(c.OK) / c.DurationS
	}
	return c
}

// kill offers rate tasks/s to the second instance for o.KillDuration and
// kills the first with SIGKILL a third of the way in, then waits until
// every recorded task is done and reads from the records how many the
// victim held (tasks delivered more than once) and how long after the
// kill each was processed.
func (f *fleet) kill(ctx context.Context, rate float64, o ScaleOutOptions) (*driver.SideResult, error) {
	res := &driver.SideResult{Metrics: map[driver.Metric]float64{}}
	if len(f.urls) < 2 {
		return res, errors.New("the kill point needs two instances")
	}
	if err := f.resetStats(ctx); err != nil {
		return res, err
	}
	survivor := f.urls[1]
	spec := driver.AttackSpec{
		Name: fmt.Sprintf("%-12s kill -9 1 of 2", f.svc), Rate: rate, Duration: o.KillDuration,
		MaxWorkers: f.e.MaxWorkers, Progress: f.e.Progress,
		Next: func(n uint64) driver.Request {
			return driver.Request{Method: http.MethodPost, URL: survivor + "/tasks", Body: QueueScenario.Load.Body(n)}
		},
	}
	done := make(chan driver.ClientResult, 1)
	go func() { done <- driver.Attack(ctx, spec) }()
	var killedAt time.Time
	var killErr error
	select {
	case <-time.After(o.KillDuration / 3):
		killedAt = time.Now()
		killErr = f.e.Launcher.Kill(f.names[0])
		f.killed[0] = true
	case <-ctx.Done():
	}
	c := <-done
	res.Phases = append(res.Phases, driver.Phase{Name: "send", Client: c})
	driver.FlattenClient(res.Metrics, driver.ClientPrefix, c)
	if killErr != nil {
		return res, fmt.Errorf("kill -9 %s: %w", f.names[0], killErr)
	}
	if killedAt.IsZero() {
		return res, ctx.Err()
	}
	bound := max(f.e.settle(), o.Lease+30*time.Second)
	open, err := f.waitRecords(ctx, bound)
	if err != nil {
		return res, err
	}
	res.Metrics[MetricKillOpen] = float64(open)
	held, after, err := f.redelivered(ctx, killedAt)
	if err != nil {
		return res, err
	}
	res.Metrics[MetricKillHeld] = float64(held)
	if len(after) > 0 {
		slices.Sort(after)
		res.Metrics[MetricKillP50] = math.Round(driver.Median(after)*100) / 100
		res.Metrics[MetricKillMax] = math.Round(after[len(after)-1]*100) / 100
	}
	return res, nil
}

// tasks is the side's task records table.
func (f *fleet) tasks() string { return pgx.Identifier{f.schema, "tasks"}.Sanitize() }

// waitRecords waits, up to bound, until no task record is open, and
// returns how many still are.
func (f *fleet) waitRecords(ctx context.Context, bound time.Duration) (int64, error) {
	conn, err := f.e.connect(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.Background())
	deadline := time.Now().Add(bound)
	for {
		var open int64
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM `+f.tasks()+` WHERE status IN ('queued', 'running')`).Scan(&open); err != nil {
			return 0, err
		}
		if open == 0 || time.Now().After(deadline) {
			return open, nil
		}
		select {
		case <-ctx.Done():
			return open, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// redelivered returns how many done tasks were delivered more than once
// and, for each, the seconds from killedAt until it was processed.
func (f *fleet) redelivered(ctx context.Context, killedAt time.Time) (int64, []float64, error) {
	conn, err := f.e.connect(ctx)
	if err != nil {
		return 0, nil, err
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `SELECT extract(epoch FROM processed_at - $1::timestamptz)::float8 FROM `+f.tasks()+
		` WHERE attempts > 1 AND status = 'done' AND processed_at IS NOT NULL`, killedAt)
	if err != nil {
		return 0, nil, err
	}
	after, err := pgx.CollectRows(rows, pgx.RowTo[float64])
	if err != nil {
		return 0, nil, err
	}
	return int64(len(after)), after, nil
}
