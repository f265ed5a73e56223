package scenario

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	logc "github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/log"
)

// The log pair's recovery points (issue 23, item 3): a group's takeover
// when one of its instances dies, and a new group's replay of the log.

// Takeover: two instances of one log service, each consuming the default
// group and one group created from latest (takeoverGroup), the first
// killed with SIGKILL under load. On no-kafka the second waits as a hot
// standby on each (the default group's slot is active in the first's
// walsender; the created group's slot too, or, with
// GROUPS_DESIGN=cursors, its advisory lock held by the first's session)
// and takes each over once Postgres notices the dead connection; on
// kafka both are members of each consumer group, and the dead member's
// partitions wait for the group coordinator to expire its session (the
// service's 10 s session timeout) and rebalance them to the survivor.

// ScaleOutTakeover is kill -9 of one of two instances of one group on the
// log pair.
const ScaleOutTakeover = "scaleout.takeover"

// Takeover metric names, per side: the longest an event of the point
// waited between its write and its delivery (the takeover time plus an
// ordinary delivery latency: the events written at the kill wait for the
// whole takeover), the events that waited over one second, the events
// not delivered at the drain bound (0: nothing lost), and the deliveries
// the survivor found already recorded (events the victim delivered
// without confirming its position: at-least-once, absorbed by the
// records).
// The created group's figures are the same, named
// MetricTakeoverGroupMaxWait and so on (its deliveries made again are in
// the services' group duplicate counter).
const (
	MetricTakeoverMaxWait      = "takeover.max_wait_s"
	MetricTakeoverSlow         = "takeover.waited_over_1s"
	MetricTakeoverMissing      = "takeover.missing"
	MetricTakeoverAgain        = "takeover.delivered_again"
	MetricTakeoverGroupMaxWait = "takeover.group.max_wait_s"
	MetricTakeoverGroupSlow    = "takeover.group.waited_over_1s"
	MetricTakeoverGroupMissing = "takeover.group.missing"
	MetricTakeoverGroupAgain   = "takeover.group.delivered_again"
)

// takeoverPointName names the takeover point.
const takeoverPointName = "kill -9 the first of 2 in one group"

// takeoverGroup is the group the takeover point creates besides the
// default one (startGroups' first).
const takeoverGroup = "g1"

// takeover measures at.svc's side of at.p, the takeover: the groups point's
// instance (with at.extra, a second design's setting, in its environment)
// with two groups (the default one and takeoverGroup), a second instance
// of it on the same schema, slots or Kafka groups (on no-kafka a
// standby, live but not ready), load posted to the second, the first
// killed a third of the way in, then the drain and what the records say.
func (pts *scaleOutPoints) takeover(ctx context.Context, e *Env, at scaleOutSide, o ScaleOutOptions) {
	svc, extra := at.svc, at.extra
	e.logf("scaleout: %s, kill -9 the first of two instances of two groups at %s %v", svc, driver.Label(o.GroupRate), extra)
	measureOne(ctx, pts, at,
		func() (*groupFleet, error) { return startGroups(ctx, e, svc, 2, extra) },
		func(g *groupFleet) (*driver.SideResult, error) {
			survivor, err := g.startSecond(ctx, g.env)
			defer func() {
				// The first instance may be dead: the groups are
				// deleted through the second, before it stops.
				if err == nil {
					g.deleteGroups(ctx, survivor)
				}
				if err := e.Launcher.Stop(g.second(), 30*time.Second); err != nil {
					e.logf("scaleout: %v", err)
				}
			}()
			if err != nil {
				return nil, err
			}
			return g.killFirst(ctx, survivor, o)
		})
}

// second is the name of g's second instance (startSecond).
func (g *groupFleet) second() string { return g.name + "-2" }

// startSecond starts a second instance of g's service with environment
// env (g's, or g's with another CONSUME_GROUPS) on the next port and
// returns its URL. On no-kafka it must be a hot standby (live, /readyz
// 503): the default group's slot is the first instance's. On kafka it
// joins the groups and must become ready.
func (g *groupFleet) startSecond(ctx context.Context, env map[string]string) (string, error) {
	timeout := g.e.ReadyTimeout
	if timeout == 0 {
		timeout = 90 * time.Second
	}
	port := g.port + 10
	url := fmt.Sprintf("http://%s:%d", g.e.host(), port)
	if g.svc == LogPair.A.Name {
		if _, err := g.e.Launcher.StartLive(ctx, g.second(), port, env, timeout); err != nil {
			return "", err
		}
		code, body, err := driver.Do(ctx, http.MethodGet, url+"/readyz", nil)
		if err == nil && code != http.StatusServiceUnavailable {
			err = fmt.Errorf("the second instance is not a standby: /readyz %d %s", code, body)
		}
		return url, err
	}
	_, err := g.e.Launcher.Start(ctx, g.second(), port, env, timeout)
	return url, err
}

// killFirst offers o.GroupRate events/s to survivor for o.KillDuration,
// kills g's instance a third of the way in, waits until every event
// written is delivered (bounded by the settle bound and the Kafka
// session), and reads the waits from the records.
func (g *groupFleet) killFirst(ctx context.Context, survivor string, o ScaleOutOptions) (*driver.SideResult, error) {
	res := &driver.SideResult{Metrics: map[driver.Metric]float64{}}
	if err := driver.ResetStats(ctx, survivor); err != nil {
		return res, err
	}
	spec := driver.AttackSpec{
		Name: fmt.Sprintf("%-12s kill -9 1 of 2 in a group", g.svc), Rate: o.GroupRate, Duration: o.KillDuration,
		MaxWorkers: g.e.MaxWorkers, Progress: g.e.Progress,
		Next: func(i uint64) driver.Request {
			return driver.Request{Method: http.MethodPost, URL: survivor + "/events", Body: LogScenario.Load.Body(i)}
		},
	}
	done := make(chan driver.ClientResult, 1)
	go func() { done <- driver.Attack(ctx, spec) }()
	var killErr error
	select {
	case <-time.After(o.KillDuration / 3):
		killErr = g.e.Launcher.Kill(g.name)
	case <-ctx.Done():
		killErr = ctx.Err()
	}
	c := <-done
	res.Phases = append(res.Phases, driver.Phase{Name: "write", Client: c})
	driver.FlattenClient(res.Metrics, driver.ClientPrefix, c)
	if killErr != nil {
		return res, fmt.Errorf("kill -9 %s: %w", g.name, killErr)
	}
	for _, grp := range []struct {
		name                   string
		missing, maxWait, slow driver.Metric
	}{
		{logc.DefaultGroup, MetricTakeoverMissing, MetricTakeoverMaxWait, MetricTakeoverSlow},
		{takeoverGroup, MetricTakeoverGroupMissing, MetricTakeoverGroupMaxWait, MetricTakeoverGroupSlow},
	} {
		w, err := g.waitDelivered(ctx, max(g.e.settle(), 30*time.Second), grp.name)
		if err != nil {
			return res, err
		}
		res.Metrics[grp.missing] = float64(w.missing)
		res.Metrics[grp.maxWait] = math.Round(w.maxWait*100) / 100
		res.Metrics[grp.slow] = float64(w.slow)
	}
	st, err := driver.GetStats(ctx, survivor)
	if err != nil {
		return res, err
	}
	res.Metrics[MetricTakeoverAgain] = float64(st.Counters[logc.StatDuplicates])
	res.Metrics[MetricTakeoverGroupAgain] = float64(st.Counters[logc.StatGroupDuplicates])
	res.Stats = st
	driver.FlattenServer(res.Metrics, st)
	return res, nil
}

// waits is what the records say of the takeover point's events.
type waits struct {
	missing, slow int64
	maxWait       float64
}

// waitDelivered waits, up to bound, until every event in g's messages
// table has a delivery record of group grp (the default group's in
// deliveries, another's in group_deliveries), and returns the waits.
func (g *groupFleet) waitDelivered(ctx context.Context, bound time.Duration, grp string) (waits, error) {
	conn, err := g.e.connect(ctx)
	if err != nil {
		return waits{}, err
	}
	defer conn.Close(context.Background())
	messages := pgx.Identifier{g.schema, "messages"}.Sanitize()
	records, args := pgx.Identifier{g.schema, "deliveries"}.Sanitize()+" d ON d.id = m.id", []any(nil)
	if grp != logc.DefaultGroup {
		records, args = pgx.Identifier{g.schema, "group_deliveries"}.Sanitize()+" d ON d.id = m.id AND d.grp = $1", []any{grp}
	}
	q := `SELECT count(*) FILTER (WHERE d.id IS NULL),
		count(*) FILTER (WHERE d.delivered_at - m.created_at > interval '1 second'),
		coalesce(max(extract(epoch FROM d.delivered_at - m.created_at)), 0)::float8
		FROM ` + messages + ` m LEFT JOIN ` + records
	deadline := time.Now().Add(bound)
	for {
		var w waits
		if err := conn.QueryRow(ctx, q, args...).Scan(&w.missing, &w.slow, &w.maxWait); err != nil {
			return w, err
		}
		if w.missing == 0 || time.Now().After(deadline) {
			return w, nil
		}
		select {
		case <-ctx.Done():
			return w, errors.Join(ctx.Err(), fmt.Errorf("%d events not delivered", w.missing))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Replay (issue 23, item 3): a log of ReplayEvents events, then a new
// group created from earliest while live writes go on. On kafka the
// group is a new consumer group reading the 3-partition topic from its
// first offsets; on no-kafka the service creates the group's slot,
// replays the messages table, creates the group's slot, replays what
// committed until its consistent point in the slot's exported snapshot
// and hands over to the slot's stream (docs/log.md, "From earliest").

// ScaleOutReplay is a new group from earliest over a filled log.
const ScaleOutReplay = "scaleout.replay"

// Replay metric names, per side: the events in the log before the group
// was created, the seconds from the PUT until the group received its
// first event (its earliest delivery record, stamped by the service on
// this machine's clock), the seconds from the PUT until the group had every event
// written so far (the live ones too), those events over that time, the
// events written during the catch-up, and, after the drain, the events
// the group is missing and the deliveries it received again (both 0
// unless the hand-over to live delivery left a gap or a duplicate).
const (
	MetricReplayEvents  = "replay.events"
	MetricReplayFirst   = "replay.first_event_s"
	MetricReplayCatchUp = "replay.catch_up_s"
	MetricReplayRate    = "replay.events_per_s"
	MetricReplayLive    = "replay.live_events"
	MetricReplayMissing = "replay.missing"
	MetricReplayAgain   = "replay.delivered_again"
)

// replayGroup is the group the replay point creates.
const replayGroup = "replay"

// replayBatch is the events per POST /events/batch of the fill.
const replayBatch = 1000

// replayPointName names the replay point of n events.
func replayPointName(n int) string {
	return fmt.Sprintf("new group from earliest over %d events", n)
}

// replay measures at.svc's side of at.p, the replay: a fresh instance (with
// at.extra, a second design's setting, in its environment), the log filled
// and delivered to the default group, then the new group and the live
// writes, the catch-up and the drain.
func (pts *scaleOutPoints) replay(ctx context.Context, e *Env, at scaleOutSide, o ScaleOutOptions) {
	svc, extra := at.svc, at.extra
	e.logf("scaleout: %s, a group from earliest over %d events, %s live %v", svc, o.ReplayEvents, driver.Label(o.ReplayLiveRate), extra)
	measureOne(ctx, pts, at,
		func() (*groupFleet, error) { return startGroups(ctx, e, svc, 1, extra) },
		func(g *groupFleet) (*driver.SideResult, error) {
			res, err := g.replay(ctx, o)
			g.extra = append(g.extra, replayGroup) // stop deletes it
			return res, err
		})
}

// replay fills g's log, then times the new group's catch-up under live
// writes and checks what it received.
func (g *groupFleet) replay(ctx context.Context, o ScaleOutOptions) (*driver.SideResult, error) {
	res := &driver.SideResult{Metrics: map[driver.Metric]float64{}}
	if err := g.fill(ctx, o.ReplayEvents); err != nil {
		return res, err
	}
	res.Metrics[MetricReplayEvents] = float64(o.ReplayEvents)
	if err := driver.ResetStats(ctx, g.url); err != nil {
		return res, err
	}
	live, stopLive := context.WithCancel(ctx)
	defer stopLive()
	spec := g.eventsSpec(fmt.Sprintf("%-12s replay, live writes", g.svc), o.ReplayLiveRate, replayBound(g.e))
	done := make(chan driver.ClientResult, 1)
	go func() { done <- driver.Attack(live, spec) }()
	put, catchUp, err := g.catchUp(ctx, int64(o.ReplayEvents))
	stopLive()
	c := <-done
	res.Phases = append(res.Phases, driver.Phase{Name: "write", Client: c})
	driver.FlattenClient(res.Metrics, driver.ClientPrefix, c)
	if err != nil {
		return res, err
	}
	first, err := g.firstDelivery(ctx, replayGroup)
	if err != nil {
		return res, err
	}
	res.Metrics[MetricReplayFirst] = math.Round(first.Sub(put).Seconds()*1000) / 1000
	res.Metrics[MetricReplayCatchUp] = math.Round(catchUp.Seconds()*100) / 100
	res.Metrics[MetricReplayRate] = round1(float64(o.ReplayEvents) / catchUp.Seconds())
	st, _, err := g.waitStats(ctx, g.e.settle(), func(st *driver.ServerStats) bool {
		w := st.Counters[logc.StatWritten]
		return st.Counters[logc.StatDelivered] >= w && st.Counters[logc.StatGroupDelivered] >= int64(o.ReplayEvents)+w
	})
	if err != nil {
		return res, err
	}
	res.Metrics[MetricReplayLive] = float64(st.Counters[logc.StatWritten])
	res.Metrics[MetricReplayAgain] = float64(st.Counters[logc.StatGroupDuplicates])
	missing, err := g.groupMissing(ctx, replayGroup)
	if err != nil {
		return res, err
	}
	res.Metrics[MetricReplayMissing] = float64(missing)
	res.Stats = st
	driver.FlattenServer(res.Metrics, st)
	return res, nil
}

// replayBound bounds the fill, the catch-up and the live writes.
func replayBound(e *Env) time.Duration { return max(e.settle(), 5*time.Minute) }

// fill writes n events in batches and waits until the default group has
// them all.
func (g *groupFleet) fill(ctx context.Context, n int) error {
	c := postBatches(ctx, []string{g.url}, batchPosts{path: LogThroughput.Path, body: LogThroughput.Body(replayBatch), requests: (n + replayBatch - 1) / replayBatch, senders: 4})
	if c.Errors > 0 {
		return fmt.Errorf("filling the log: %d of %d batches failed %v", c.Errors, c.Requests, c.ErrorSamples)
	}
	st, err := g.drain(ctx, 1, replayBound(g.e))
	if err != nil {
		return err
	}
	if d, w := st.Counters[logc.StatDelivered], st.Counters[logc.StatWritten]; d < w {
		return fmt.Errorf("filling the log: the default group had %d of %d events after %v", d, w, replayBound(g.e))
	}
	return nil
}

// catchUp creates the replay group from earliest and returns when it sent
// the PUT and the time from then until the group had received n events
// and every live event written so far.
func (g *groupFleet) catchUp(ctx context.Context, n int64) (time.Time, time.Duration, error) {
	t0 := time.Now()
	code, body, err := driver.Do(ctx, http.MethodPut, g.url+"/groups/"+replayGroup, []byte(`{"from":"earliest"}`))
	if err == nil && code != http.StatusCreated {
		err = fmt.Errorf("PUT /groups/%s: %d %s", replayGroup, code, body)
	}
	if err != nil {
		return t0, 0, err
	}
	st, ok, err := g.waitStats(ctx, replayBound(g.e), func(st *driver.ServerStats) bool {
		return st.Counters[logc.StatGroupDelivered] >= n+st.Counters[logc.StatWritten]
	})
	if err == nil && !ok {
		err = fmt.Errorf("group %s had %d of %d events after %v", replayGroup, st.Counters[logc.StatGroupDelivered], n+st.Counters[logc.StatWritten], replayBound(g.e))
	}
	return t0, time.Since(t0), err
}

// firstDelivery returns when group grp received its first event: the
// earliest delivered_at of its delivery records in g's schema (both sides
// record them).
func (g *groupFleet) firstDelivery(ctx context.Context, grp string) (time.Time, error) {
	conn, err := g.e.connect(ctx)
	if err != nil {
		return time.Time{}, err
	}
	defer conn.Close(context.Background())
	var first *time.Time
	err = conn.QueryRow(ctx, `SELECT min(delivered_at) FROM `+pgx.Identifier{g.schema, "group_deliveries"}.Sanitize()+` WHERE grp = $1`, grp).Scan(&first)
	if err == nil && first == nil {
		err = fmt.Errorf("group %s has no delivery", grp)
	}
	if err != nil {
		return time.Time{}, errors.Join(errors.New("reading the replay group's first delivery"), err)
	}
	return *first, nil
}

// groupMissing counts the events of g's messages table without a
// delivery record of group grp.
func (g *groupFleet) groupMissing(ctx context.Context, grp string) (int64, error) {
	conn, err := g.e.connect(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.Background())
	var missing int64
	err = conn.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{g.schema, "messages"}.Sanitize()+` m
		WHERE NOT EXISTS (SELECT 1 FROM `+pgx.Identifier{g.schema, "group_deliveries"}.Sanitize()+` d WHERE d.grp = $1 AND d.id = m.id)`, grp).Scan(&missing)
	if err != nil {
		return 0, errors.Join(errors.New("counting the replay group's missing events"), err)
	}
	return missing, nil
}
