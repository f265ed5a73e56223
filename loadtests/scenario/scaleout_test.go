package scenario

import (
	"slices"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue"
)

// TestScaleOutFitsItsBudget: the scale-out scenario at its defaults is
// planned to take at most 8 minutes on 2 cores with the driver's default
// settle bound (competing consumers, fan-out and consumer groups), and
// its capacity per instance is what
// the report says (8 workers × 20 ms = 400 tasks/s, so that 300/s fits one
// instance and 600/s needs two).
func TestScaleOutFitsItsBudget(t *testing.T) {
	t.Parallel()
	o := ScaleOutDefaults
	if e := o.Estimate(20 * time.Second); e.Typical > 8*time.Minute || e.Typical < time.Minute {
		t.Errorf("estimated %v typical (bound %v), want between 1 and 8 minutes", e.Typical, e.Bound)
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
