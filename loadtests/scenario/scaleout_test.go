package scenario

import (
	"testing"
	"time"
)

// TestScaleOutFitsItsBudget: the scale-out scenario at its defaults is
// planned to take at most 6 minutes on 2 cores with the driver's default
// settle bound (issue 23's budget), and its capacity per instance is what
// the report says (8 workers × 20 ms = 400 tasks/s, so that 300/s fits one
// instance and 600/s needs two).
func TestScaleOutFitsItsBudget(t *testing.T) {
	t.Parallel()
	o := ScaleOutDefaults
	if e := o.Estimate(20 * time.Second); e.Typical > 6*time.Minute || e.Typical < time.Minute {
		t.Errorf("estimated %v typical (bound %v), want between 1 and 6 minutes", e.Typical, e.Bound)
	}
	if c := o.capacity(); c != 400 {
		t.Errorf("capacity %v tasks/s per instance, want 400", c)
	}
	if o.Rates[0] > o.capacity() || o.Rates[len(o.Rates)-1] <= o.capacity() {
		t.Errorf("rates %v: want the first within one instance's capacity and the last beyond it", o.Rates)
	}
}
