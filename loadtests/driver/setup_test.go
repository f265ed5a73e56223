package driver

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestFailedSetupFailsThatSideOnly: a side whose setup failed is not
// measured, is failed with the setup's error, and the other side of the
// point is still measured and ok.
func TestFailedSetupFailsThatSideOnly(t *testing.T) {
	p := &Point{Scenario: "documents.rewrite", Name: "2MB", Sides: []string{"no-mongodb", "mongodb"}}
	p.FailSide("mongodb", `creating its 4 users with a 2MB profile failed: mongodb POST /users: 503 {"error":"backend unavailable or too slow; retry later"}`+"\nmore")
	var called []string
	err := RunPoint(context.Background(), p, 3, func(_ context.Context, svc string, _ int) (*SideResult, error) {
		called = append(called, svc)
		return &SideResult{Metrics: map[Metric]float64{"client.rewrite.p50_ms": 20},
			Phases: []Phase{{Name: "rewrite", Client: ClientResult{Requests: 10, OK: 10, Codes: map[string]int64{"200": 10}}}}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(called) != 3 || slices.Contains(called, "mongodb") {
		t.Fatalf("measured %v, want no-mongodb in each of 3 rounds only", called)
	}
	run := &Run{ID: "r", Points: []Point{*p}}
	run.Validate()
	got := run.Points[0]
	if st := got.SideStatus("no-mongodb"); st.State != StateOK {
		t.Errorf("no-mongodb: %s, want ok", st)
	}
	st := got.SideStatus("mongodb")
	if st.State != StateFailed || !strings.Contains(st.Reason, "mongodb POST /users: 503") || strings.Contains(st.Reason, "more") {
		t.Errorf("mongodb: %q, want failed with the setup's first line", st)
	}
	if m := got.Find("client.rewrite.p50_ms"); m == nil || m.Sides["no-mongodb"].N != 3 || m.Ratio != nil {
		t.Errorf("metric %+v: want 3 no-mongodb rounds and no ratio", m)
	}
	fps := FailedPoints([]*Run{run})
	if len(fps) != 1 || fps[0].Side != "mongodb" || fps[0].Point != "2MB" {
		t.Errorf("failed points %v, want the mongodb side of 2MB only", fps)
	}
}

// TestRunPointsGoesOnAfterAFailedSetup: the points after one whose side
// failed its setup are measured on every side.
func TestRunPointsGoesOnAfterAFailedSetup(t *testing.T) {
	a := &Point{Name: "2MB", Sides: []string{"A", "B"}}
	b := &Point{Name: "lz4 2MB", Sides: []string{"A", "B"}}
	a.FailSide("B", errors.New("B POST /users: 503").Error())
	n := map[string]int{}
	err := RunPoints(context.Background(), []*Point{a, b}, 2, func(_ context.Context, i int, svc string, _ int) (*SideResult, error) {
		n[[]string{"a", "b"}[i]+svc]++
		return &SideResult{Metrics: map[Metric]float64{"x": 1}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n["aA"] != 2 || n["aB"] != 0 || n["bA"] != 2 || n["bB"] != 2 {
		t.Fatalf("sides measured %v", n)
	}
	if !a.SetupFailed("B") || a.SetupFailed("A") || b.SetupFailed("B") {
		t.Error("SetupFailed disagrees with FailSide")
	}
}

// TestSkippedSideIsNeitherMeasuredNorFailed: a side skipped by design
// (SkipSide) is not measured, keeps its status and reason through
// Validate, and is not among the failed points.
func TestSkippedSideIsNeitherMeasuredNorFailed(t *testing.T) {
	p := &Point{Scenario: "documents.rewrite_lz4", Name: "512KB", Sides: []string{"no-mongodb", "mongodb"}}
	p.SkipSide("mongodb", "TOAST_COMPRESSION is a Postgres setting")
	var called []string
	if err := RunPoint(context.Background(), p, 2, func(_ context.Context, svc string, _ int) (*SideResult, error) {
		called = append(called, svc)
		return &SideResult{Metrics: map[Metric]float64{"x": 1}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(called, "mongodb") || len(called) != 2 {
		t.Fatalf("measured %v, want no-mongodb in each of 2 rounds only", called)
	}
	run := &Run{ID: "r", Points: []Point{*p}}
	run.Validate()
	if st := run.Points[0].SideStatus("mongodb"); st.State != StateSkipped || st.OK() || st.String() != "skipped: TOAST_COMPRESSION is a Postgres setting" {
		t.Errorf("mongodb: %q, want skipped with its reason, not ok", st)
	}
	if fps := FailedPoints([]*Run{run}); len(fps) != 0 {
		t.Errorf("failed points %v, want none", fps)
	}
}
