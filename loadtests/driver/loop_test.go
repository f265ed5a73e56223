package driver

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestLoopIsClosedAndCountsStatuses runs a closed loop whose operation
// takes 20 ms: each worker runs at most one at a time, so two workers
// make about 100 operations a second whatever the demand; 409s and
// transport errors are counted apart from the OK ones, and the progress
// line is written even where attacks draw bars.
func TestLoopIsClosedAndCountsStatuses(t *testing.T) {
	var inflight, most atomic.Int64
	var w bytes.Buffer
	p := NewProgress(&w, true, []Step{{Name: "es", Attacks: 1, Planned: time.Second}})
	p.Begin("es")
	res := Loop(context.Background(), LoopSpec{
		Name: "fake append", Workers: 2, Duration: time.Second, Progress: p,
		Op: func(ctx context.Context, _ int, n uint64) (int, error) {
			cur := inflight.Add(1)
			defer inflight.Add(-1)
			for m := most.Load(); cur > m && !most.CompareAndSwap(m, cur); m = most.Load() {
			}
			time.Sleep(20 * time.Millisecond)
			switch n % 10 {
			case 1:
				return 409, nil
			case 2:
				return 0, errors.New("connection refused")
			}
			return 201, nil
		},
	})
	if most.Load() != 2 {
		t.Errorf("at most %d operations at once, want the 2 workers", most.Load())
	}
	if res.Requests < 60 || res.Requests > 110 {
		t.Errorf("%d operations in 1 s of 2 workers × 20 ms, want about 100", res.Requests)
	}
	if res.OK+res.Codes["409"]+res.Codes["0"] != res.Requests || res.Codes["409"] == 0 || res.Codes["0"] == 0 {
		t.Errorf("codes %v, ok %d of %d", res.Codes, res.OK, res.Requests)
	}
	if res.Errors != res.Codes["409"]+res.Codes["0"] || !slices.Contains(res.ErrorSamples, "connection refused") {
		t.Errorf("errors %d, samples %q", res.Errors, res.ErrorSamples)
	}
	if res.Latency.P50MS < 19 || res.Throughput <= 0 || res.TargetRate != 0 {
		t.Errorf("latency p50 %.1f ms, throughput %.1f, target %g", res.Latency.P50MS, res.Throughput, res.TargetRate)
	}
	if out := w.String(); !strings.Contains(out, "[es 1/1") || !strings.Contains(out, "fake append 1s:") {
		t.Errorf("progress line missing:\n%s", out)
	}
}

// TestRunPointsInterleavesByRound runs two points over two rounds: in
// each round the first point's sides run, then the second's, each in the
// order rotated for that round, and both points are summarized.
func TestRunPointsInterleavesByRound(t *testing.T) {
	a := &Point{Scenario: "s", Name: "growing", Sides: []string{"x", "y"}}
	b := &Point{Scenario: "s", Name: "reset", Sides: []string{"x", "y"}}
	var got []string
	err := RunPoints(context.Background(), []*Point{a, b}, 2, func(_ context.Context, i int, svc string, r int) (*SideResult, error) {
		got = append(got, []string{"g", "r"}[i]+svc+string(rune('0'+r)))
		return &SideResult{Metrics: map[Metric]float64{"v": float64(r + 1)}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"gx0", "gy0", "rx0", "ry0", "gy1", "gx1", "ry1", "rx1"}; !slices.Equal(got, want) {
		t.Errorf("ran %v, want %v", got, want)
	}
	for _, p := range []*Point{a, b} {
		if len(p.Rounds) != 2 || p.Find("v") == nil || p.Find("v").Sides["x"].Median != 1.5 {
			t.Errorf("%s: %d rounds, metric %+v", p.Name, len(p.Rounds), p.Find("v"))
		}
	}
}

// TestLoopWaitsForLateOperations runs a loop whose operations outlast its
// window: nothing is dropped. An operation still running when the window
// ends is waited for and counted as late (and as OK), one that outlasts
// the grace bound is abandoned, its ctx cancelled, and counted in flight;
// no new operation starts after the window.
func TestLoopWaitsForLateOperations(t *testing.T) {
	var started atomic.Int64
	res := Loop(context.Background(), LoopSpec{
		Name: "slow op", Workers: 3, Duration: 100 * time.Millisecond, Grace: time.Second,
		Op: func(ctx context.Context, w int, _ uint64) (int, error) {
			started.Add(1)
			// Worker 0 finishes after the window but within the grace;
			// worker 1 outlasts the grace; worker 2 answers at once.
			d := map[int]time.Duration{0: 250 * time.Millisecond, 1: 5 * time.Second, 2: 10 * time.Millisecond}[w]
			select {
			case <-time.After(d):
				return 201, nil
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		},
	})
	if res.InFlight != 1 {
		t.Errorf("in flight %d, want 1 (worker 1, abandoned at the bound)", res.InFlight)
	}
	// Worker 0's one operation ends late; worker 2's last may too.
	if res.Late < 1 || res.Late > 2 {
		t.Errorf("late %d, want worker 0's (and perhaps worker 2's last)", res.Late)
	}
	if res.OK != res.Requests || res.Requests != started.Load()-1 {
		t.Errorf("%d requests, %d ok, %d started: every operation but the abandoned one is counted", res.Requests, res.OK, started.Load())
	}
	if res.DurationS < 1 || res.DurationS > 4 || res.GraceS != 1 {
		t.Errorf("duration %.3f s, grace %.1f s: want the window and the grace bound", res.DurationS, res.GraceS)
	}
	if s := Outcome(AttackSpec{Name: "slow op", Duration: 100 * time.Millisecond}, res); !strings.Contains(s, "late") || !strings.Contains(s, "1 still in flight") {
		t.Errorf("outcome %q does not say what was late and in flight", s)
	}
}

// TestLoopCountsLateOnesThatFail: an operation that fails after the
// window, before the bound, is an error counted as late, not dropped.
func TestLoopCountsLateOnesThatFail(t *testing.T) {
	res := Loop(context.Background(), LoopSpec{
		Name: "late 503", Workers: 1, Duration: 50 * time.Millisecond, Grace: time.Second,
		Op: func(ctx context.Context, _ int, n uint64) (int, error) {
			time.Sleep(80 * time.Millisecond)
			return 503, nil
		},
	})
	if res.Requests != 1 || res.Errors != 1 || res.Late != 1 || res.InFlight != 0 || res.Codes["503"] != 1 {
		t.Errorf("result %+v: want one late 503", res)
	}
}
