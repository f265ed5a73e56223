package scenario

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	logc "github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/log"
)

// A stopped group (issue 23, item 3: "WAL retained, and the other
// groups' delivery latency, while one group is stopped for 60 s"): one
// instance of each log service with three groups, the default one, one
// it consumes (g1) and one it does not (stoppedGroup: its CONSUME_GROUPS
// leaves it out, so the group exists, with its slot, cursor or Kafka
// consumer group, and nothing reads it). Events are written at GroupRate
// for StoppedFor; then a second instance, whose CONSUME_GROUPS is the
// stopped group alone, starts and the group catches up. On no-kafka with
// a slot per group the stopped group's slot holds the WAL written since
// it stopped, for the whole server; with cursors the stopped cursor
// holds rows of the deliveries table, not WAL; on Kafka a consumer
// group's lag holds nothing (the topic's retention decides what stays).

// ScaleOutStopped is one of three groups not consumed for StoppedFor
// while the others are.
const ScaleOutStopped = "scaleout.stopped"

// Stopped-group metric names, per side (besides the client.* of the
// attack and the default group's server.delivery.* latencies): how long
// the group was stopped, its lag at the stop's end (events: the written
// events without a delivery record of the group; bytes: as GET /groups
// shows it, absent when the side cannot know it), the WAL
// the point's slots retained then (no-kafka; MetricGroupsSlotBytes) and
// once the group had caught up, the events per second each running
// group received during the stop, the seconds from the consuming
// instance's start until the group had every event, and the events it
// never received at the bound.
const (
	MetricStoppedFor        = "stopped.for_s"
	MetricStoppedLagEvents  = "stopped.lag_events"
	MetricStoppedLagBytes   = "stopped.lag_bytes"
	MetricStoppedCatchUp    = "stopped.catch_up_s"
	MetricStoppedAfterBytes = "stopped.slots_retained_after_catch_up_bytes"
	MetricStoppedMissing    = "stopped.missing"
)

// stoppedGroup is the group the stopped point does not consume at first
// (startGroups' second: g1 runs).
const stoppedGroup = "g2"

// stoppedGroups is the point's number of groups: the default one, g1
// and stoppedGroup.
const stoppedGroups = 3

// stoppedPointName names the stopped point.
func stoppedPointName(rate float64, d time.Duration) string {
	return fmt.Sprintf("%s → %d groups, 1 stopped for %v s", driver.Label(rate), stoppedGroups, d.Seconds())
}

// consumeSetting is the log services' setting that names the groups an
// instance consumes (docs/log.md).
const consumeSetting = "CONSUME_GROUPS"

// stopped measures at.svc's side of at.p: the instance consuming every group
// but stoppedGroup (with at.extra, a second design's setting, in its
// environment), the writes, the lag and WAL at the stop's end, then the
// catch-up on a second instance.
func (pts *scaleOutPoints) stopped(ctx context.Context, e *Env, at scaleOutSide, o ScaleOutOptions) {
	svc, extra := at.svc, at.extra
	e.logf("scaleout: %s, %d groups, %s stopped for %v at %s %v", svc, stoppedGroups, stoppedGroup, o.StoppedFor, driver.Label(o.GroupRate), extra)
	env := maps.Clone(extra)
	if env == nil {
		env = map[string]string{}
	}
	env[consumeSetting] = "g1"
	measureOne(ctx, pts, at,
		func() (*groupFleet, error) { return startGroups(ctx, e, svc, stoppedGroups, env) },
		func(g *groupFleet) (*driver.SideResult, error) { return g.stopOne(ctx, o) })
}

// stopOne writes at o.GroupRate for o.StoppedFor while stoppedGroup is
// not consumed, records what it held and what the others received, then
// times its catch-up on a second instance.
func (g *groupFleet) stopOne(ctx context.Context, o ScaleOutOptions) (*driver.SideResult, error) {
	res := &driver.SideResult{Metrics: map[driver.Metric]float64{MetricGroups: stoppedGroups, MetricStoppedFor: o.StoppedFor.Seconds()}}
	if err := driver.ResetStats(ctx, g.url); err != nil {
		return res, err
	}
	spec := g.eventsSpec(fmt.Sprintf("%-12s %s stopped", g.svc, stoppedGroup), o.GroupRate, o.StoppedFor)
	if err := g.write(ctx, res, spec, stoppedGroups-1); err != nil {
		return res, err
	}
	if err := g.lagOf(ctx, stoppedGroup, res.Metrics); err != nil {
		return res, err
	}
	behind, err := g.groupMissing(ctx, stoppedGroup)
	if err != nil {
		return res, err
	}
	res.Metrics[MetricStoppedLagEvents] = float64(behind)
	if b, ok := g.slotsRetained(ctx); ok {
		res.Metrics[MetricGroupsSlotBytes] = float64(b)
	}
	// The running groups' drain: the default group and g1 have every
	// event before the stopped one is started.
	st, err := g.drain(ctx, stoppedGroups-1, g.e.settle())
	if err != nil {
		return res, err
	}
	res.Stats = st
	driver.FlattenServer(res.Metrics, st)
	return res, g.catchUpStopped(ctx, res.Metrics)
}

// lagOf records group grp's lag in bytes as GET /groups shows it (none
// when the side cannot know it: Kafka's lag is in offsets).
func (g *groupFleet) lagOf(ctx context.Context, grp string, m map[driver.Metric]float64) error {
	code, body, err := driver.Do(ctx, http.MethodGet, g.url+"/groups", nil)
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("GET /groups: %d %s", code, body)
	}
	var list logc.GroupList
	if err == nil {
		err = json.Unmarshal(body, &list)
	}
	if err != nil {
		return err
	}
	for _, gr := range list.Groups {
		if gr.Name != grp {
			continue
		}
		if gr.LagBytes != nil {
			m[MetricStoppedLagBytes] = float64(*gr.LagBytes)
		}
		return nil
	}
	return fmt.Errorf("GET /groups does not list group %s", grp)
}

// catchUpStopped starts a second instance consuming stoppedGroup alone
// (on no-kafka a standby of the default group, live but not ready; on
// kafka a second member of the default group), and records the seconds
// from its start until the group had every event, what it missed at the
// bound, and the WAL the slots retained then.
func (g *groupFleet) catchUpStopped(ctx context.Context, m map[driver.Metric]float64) error {
	env := maps.Clone(g.env)
	env[consumeSetting] = stoppedGroup
	t0 := time.Now()
	if _, err := g.startSecond(ctx, env); err != nil {
		return err
	}
	defer func() {
		if err := g.e.Launcher.Stop(g.second(), 30*time.Second); err != nil {
			g.e.logf("scaleout: %v", err)
		}
	}()
	deadline := time.Now().Add(max(g.e.settle(), 30*time.Second))
	for {
		missing, err := g.groupMissing(ctx, stoppedGroup)
		if err != nil {
			return err
		}
		if missing == 0 || time.Now().After(deadline) {
			m[MetricStoppedMissing] = float64(missing)
			if missing == 0 {
				m[MetricStoppedCatchUp] = math.Round(time.Since(t0).Seconds()*100) / 100
			}
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	if b, ok := g.slotsRetained(ctx); ok {
		m[MetricStoppedAfterBytes] = float64(b)
	}
	return nil
}

// groupsRunning is how many of n groups (the default one and g1…g<n-1>)
// an instance with environment env consumes: every one unless
// consumeSetting lists some.
func groupsRunning(env map[string]string, n int) int {
	list := env[consumeSetting]
	if list == "" || list == "*" {
		return n
	}
	running := 1
	for name := range strings.SplitSeq(list, ",") {
		if i, err := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(name), "g")); err == nil && i >= 1 && i < n {
			running++
		}
	}
	return running
}
