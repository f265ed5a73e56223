package scenario

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/stats"
)

// TestCacheRolesDefaults: the declared options are valid, and the roles
// stay within about 40 minutes at their bound.
func TestCacheRolesDefaults(t *testing.T) {
	t.Parallel()
	o := CacheRoles.Defaults
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	e := CacheRoles.Estimate(o)
	t.Logf("estimate: typical %v, bound %v, %d attacks", e.Typical, e.Bound, e.Attacks)
	if e.Typical <= 0 || e.Bound < e.Typical || e.Bound > 40*time.Minute || e.Attacks == 0 {
		t.Errorf("estimate %+v: want a typical below a bound of about 40 minutes", e)
	}
	if off := CacheRoles.Estimate(CacheRolesOptions{Off: true}); off != (Estimate{}) {
		t.Errorf("roles off: %+v, want nothing", off)
	}
	bad := o
	bad.Rates = []float64{500, 250}
	if bad.Validate() == nil {
		t.Error("falling rates were accepted")
	}
}

// TestWindowCounts groups window ends a window apart, whatever their
// jitter.
func TestWindowCounts(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1000, 0)
	var ends []time.Time
	for w, n := range []int{3, 5, 2} {
		for i := range n {
			ends = append(ends, t0.Add(time.Duration(w)*time.Second+time.Duration(i*7)*time.Millisecond))
		}
	}
	slices.Reverse(ends)
	if got := windowCounts(ends, time.Second); !slices.Equal(got, []int{3, 5, 2}) {
		t.Errorf("windows %v, want [3 5 2]", got)
	}
	m := map[driver.Metric]float64{}
	windowMetrics(m, []int{4, 5, 2}, 4)
	if m[MetricAdmittedMax] != 5 || m[MetricAdmittedMin] != 4 || m[MetricOverLimitWindows] != 1 || m[MetricWindows] != 3 {
		t.Errorf("window metrics %v", m)
	}
}

// TestSubscriberRecordsBySteps: a delivered message is counted under its
// step; other lines are ignored.
func TestSubscriberRecordsBySteps(t *testing.T) {
	t.Parallel()
	s := &rolesSub{hists: map[int]*hdrhistogram.Histogram{}, counts: map[int]int64{}}
	now := time.Now()
	s.delivered([]byte(`{"s":2,"t":`+strconv.FormatInt(now.Add(-5*time.Millisecond).UnixNano(), 10)+"}\n"), now)
	s.delivered([]byte("garbage\n"), now)
	h := stats.NewHistogram()
	if n := s.merge(2, h); n != 1 || h.Max() < 4000 {
		t.Errorf("step 2: %d messages, max %d µs", n, h.Max())
	}
}

// TestCacheRolesNotes: notes only for a run with the roles' points, and
// its settings are figures and settings, not sentences.
func TestCacheRolesNotes(t *testing.T) {
	t.Parallel()
	run := driver.NewRun("cache", nil, time.Now())
	if n := cacheRolesNotes(run); n != nil {
		t.Errorf("notes without the points: %v", n)
	}
	(&rolesRun{s: CacheRoles, o: CacheRoles.Defaults}).settings(run)
	run.Points = append(run.Points, driver.Point{Scenario: CacheLockScenario})
	if n := cacheRolesNotes(run); len(n) == 0 || !strings.Contains(strings.Join(n, " "), "100 ms") {
		t.Errorf("notes %v", n)
	}
	if p, err := driver.Prose(run.Settings); err != nil || len(p) > 0 {
		t.Errorf("prose in the settings: %v %v", p, err)
	}
}
