package scenario

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue"
)

// TestScaleOutFitsItsBudget: the scale-out scenario at its defaults is
// planned to take at most 36 minutes on 2 cores with the driver's default
// settle bound (competing consumers, fan-out, consumer groups, the
// takeover, the replay of 1,000,000 events, the stopped group and the
// second designs; it plans generously: the make results run of 2
// December took 18 min before the stopped point, the fan-out searches and
// the second designs' takeover and replay), of which the fan-out points'
// sustainable searches at most 8,
// and its capacity per instance is what the report says (8 workers × 20 ms = 400 tasks/s, so that 300/s fits one
// instance and 600/s needs two).
func TestScaleOutFitsItsBudget(t *testing.T) {
	t.Parallel()
	o := ScaleOutDefaults
	if e := o.Estimate(20 * time.Second); e.Typical > 36*time.Minute || e.Typical < time.Minute {
		t.Errorf("estimated %v typical (bound %v), want between 1 and 36 minutes", e.Typical, e.Bound)
	}
	without := o
	without.FanoutSustain = nil
	added := o.Estimate(20*time.Second).Typical - without.Estimate(20*time.Second).Typical
	if added > 8*time.Minute || added < time.Minute {
		t.Errorf("the fan-out searches add %v, want between 1 and 8 minutes", added)
	}
	if c := o.capacity(); c != 400 {
		t.Errorf("capacity %v tasks/s per instance, want 400", c)
	}
	if o.Rates[0] > o.capacity() || o.Rates[len(o.Rates)-1] <= o.capacity() {
		t.Errorf("rates %v: want the first within one instance's capacity and the last beyond it", o.Rates)
	}
}

// TestFanoutSettingIsValid: every fan-out point's FANOUT parses as the
// services parse it, with the point's number of subscribers, and the
// rabbitmq queues the scenario deletes are the copies' kinds under the
// work queue's fan-out prefix, one per subscriber.
func TestFanoutSettingIsValid(t *testing.T) {
	t.Parallel()
	for _, n := range ScaleOutDefaults.Subscribers {
		f, err := queue.ParseFanout(FanoutSetting(n))
		if err != nil {
			t.Fatalf("FANOUT %q: %v", FanoutSetting(n), err)
		}
		subs := f.Subscribers(FanoutKind)
		if len(subs) != n {
			t.Errorf("FANOUT %q has %d subscribers of %s, want %d", FanoutSetting(n), len(subs), FanoutKind, n)
		}
		queues, exchange := fanoutQueues("scaleout", n)
		if len(queues) != n || exchange != "scaleout.fanout."+FanoutKind {
			t.Errorf("fan-out queues %q, exchange %q", queues, exchange)
		}
		for i, q := range queues {
			if want := "scaleout.fanout." + queue.CopyKind(FanoutKind, subs[i]); q != want {
				t.Errorf("queue %d is %q, want %q", i, q, want)
			}
		}
	}
	if n := slices.Max(ScaleOutDefaults.Subscribers); ScaleOutDefaults.FanoutRate*float64(n) > float64(ScaleOutDefaults.Workers)*1000/float64(ScaleOutDefaults.FanoutWorkMS) {
		t.Errorf("%v tasks/s × %d subscribers is beyond one instance's %d workers × %d ms", ScaleOutDefaults.FanoutRate, n, ScaleOutDefaults.Workers, ScaleOutDefaults.FanoutWorkMS)
	}
}

// TestScaleOutPointsFollowTheOptions: the kill point needs two queue
// instances and the takeover point the log pair's groups points; a part
// left out (-scaleout-instances "") leaves its points out, and the
// takeover point is on the log pair's sides.
func TestScaleOutPointsFollowTheOptions(t *testing.T) {
	t.Parallel()
	scenarios := func(o ScaleOutOptions) map[string]*driver.Point {
		out := map[string]*driver.Point{}
		for _, p := range newScaleOutPoints(o, QueuePair.Sides()).order {
			if out[string(p.Scenario)] == nil { // the first design's, not a second design's
				out[string(p.Scenario)] = p
			}
		}
		return out
	}
	all := scenarios(ScaleOutDefaults)
	for _, s := range []string{ScaleOutRate, ScaleOutBatch, ScaleOutKill, ScaleOutFanout, ScaleOutGroups, ScaleOutTakeover, ScaleOutReplay, ScaleOutStopped} {
		if all[s] == nil {
			t.Errorf("defaults: no %s point", s)
		}
	}
	if p := all[ScaleOutTakeover]; p != nil && !slices.Equal(p.Sides, LogPair.Sides()) {
		t.Errorf("takeover point on %v, want the log pair's %v", p.Sides, LogPair.Sides())
	}
	o := ScaleOutDefaults
	o.Instances, o.Subscribers = nil, nil
	logOnly := scenarios(o)
	if len(logOnly) != 4 || logOnly[ScaleOutGroups] == nil || logOnly[ScaleOutTakeover] == nil || logOnly[ScaleOutReplay] == nil || logOnly[ScaleOutStopped] == nil {
		t.Errorf("no instances or subscribers: points %v, want the groups, takeover, replay and stopped points only", slices.Collect(maps.Keys(logOnly)))
	}
	for _, s := range []driver.ScenarioName{ScaleOutTakeover, ScaleOutReplay, ScaleOutStopped} {
		n := 0
		for _, p := range newScaleOutPoints(o, QueuePair.Sides()).order {
			if p.Scenario == s && slices.Equal(p.Sides, []string{groupsCursors.side}) && p.Env[groupsCursors.side][groupsCursors.env] == groupsCursors.value {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%s: %d points of no-kafka's cursor design, want 1", s, n)
		}
	}
	o.Groups, o.ReplayEvents = nil, 0
	if none := scenarios(o); len(none) != 0 {
		t.Errorf("every part left out: points %v", slices.Collect(maps.Keys(none)))
	}
	o = ScaleOutDefaults
	o.Instances, o.Groups = []int{1, 4}, nil
	if noTwo := scenarios(o); noTwo[ScaleOutKill] != nil || noTwo[ScaleOutTakeover] != nil || noTwo[ScaleOutStopped] != nil {
		t.Error("a kill point without two queue instances, or a takeover or stopped point without groups")
	}
}
