package queue

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
)

// TestAdmissionArithmetic follows the backlog through admits, commits,
// failures and counts: the estimate is the last count plus what this
// instance committed since it began plus what is in flight, and a request
// that would pass the bound is refused whole.
func TestAdmissionArithmetic(t *testing.T) {
	t.Parallel()
	var backlog int64
	var countErr error
	var limits []int64
	count := func(_ context.Context, limit int64) (int64, error) {
		limits = append(limits, limit)
		return min(backlog, limit), countErr
	}
	shed := 0
	a := NewAdmission(AdmissionConfig{MaxBacklog: 1000, BacklogInterval: time.Second}, count, func() { shed++ }, nil)
	ctx := context.Background()
	a.Refresh(ctx)
	if len(limits) != 1 || limits[0] != 1001 {
		t.Fatalf("count limits %v, want [1001]: a count needs to go just past the bound", limits)
	}
	if !a.Admit(600) {
		t.Fatal("600 of 1000 refused on an empty queue")
	}
	if a.Admit(401) {
		t.Fatal("401 more admitted while 600 are in flight: 1001 > 1000")
	}
	a.Done(600, true) // committed: 600 since the count
	if got := a.Backlog(); got != 600 {
		t.Fatalf("backlog %d after 600 committed, want 600", got)
	}
	if !a.Admit(400) {
		t.Fatal("400 more refused: 1000 fit exactly")
	}
	a.Done(400, false) // failed: left to the next count
	if got := a.Backlog(); got != 600 {
		t.Fatalf("backlog %d after a failed enqueue, want 600", got)
	}
	// The count replaces the tally: the workers processed 500 of them.
	backlog = 100
	a.Refresh(ctx)
	if got := a.Backlog(); got != 100 {
		t.Fatalf("backlog %d after a count of 100, want 100", got)
	}
	// A failed count keeps the last one; committed enqueues still add.
	countErr = errors.New("down")
	backlog = 0
	a.Refresh(ctx)
	if !a.Admit(900) {
		t.Fatal("900 refused with 100 counted")
	}
	a.Done(900, true)
	if a.Admit(1) {
		t.Fatal("admitted past the bound after a failed count")
	}
	rec := httptest.NewRecorder()
	a.WriteShed(rec, 1)
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") != "1" ||
		rec.Header().Get(httpapi.KindHeader) != string(httpapi.KindShed) || !strings.Contains(rec.Body.String(), `"kind":"shed"`) {
		t.Errorf("shed answer: %d %v %s", rec.Code, rec.Header(), rec.Body)
	}
	if shed != 1 || a.Shed() != 1 {
		t.Errorf("onShed called %d times, Shed() %d; want 1", shed, a.Shed())
	}
}

// TestAdmissionFinishedFreesRoomBetweenCounts: tasks this instance
// finishes come off the estimate at once, so a full queue admits again as
// its workers drain it without waiting for the next count; a count
// replaces the tally, and a finish during a count is never taken off twice.
func TestAdmissionFinishedFreesRoomBetweenCounts(t *testing.T) {
	t.Parallel()
	var backlog int64
	var a *Admission
	var during func()
	count := func(context.Context, int64) (int64, error) {
		if during != nil {
			during()
		}
		return backlog, nil
	}
	a = NewAdmission(AdmissionConfig{MaxBacklog: 1000, BacklogInterval: time.Second}, count, nil, nil)
	ctx := context.Background()
	backlog = 1000
	a.Refresh(ctx)
	if a.Admit(1) {
		t.Fatal("admitted into a full queue")
	}
	a.Finished(300)
	if got := a.Backlog(); got != 700 {
		t.Fatalf("backlog %d after 300 finished of 1000, want 700", got)
	}
	if !a.Admit(300) {
		t.Fatal("300 refused after 300 finished")
	}
	a.Done(300, true)
	// The count sees 1000 (the 300 new, 700 left); 50 finish while it
	// runs: the count may or may not include them, so they stay counted.
	during = func() { a.Finished(50) }
	a.Refresh(ctx)
	during = nil
	if got := a.Backlog(); got != 1000 {
		t.Fatalf("backlog %d after a count of 1000 with 50 finished during it, want 1000 (an over-count, never an under-count)", got)
	}
	a.Finished(2000)
	if got := a.Backlog(); got != 0 {
		t.Fatalf("backlog %d after more finishes than counted, want 0 (never negative)", got)
	}
	var none *Admission
	none.Finished(1) // nil-safe
}

// TestAdmissionPacesExpensiveCounts: a count that takes d is followed by
// the next no sooner than CountCostFactor × d later, so counting a large
// backlog cannot take the CPU the workers need.
func TestAdmissionPacesExpensiveCounts(t *testing.T) {
	t.Parallel()
	const took = 30 * time.Millisecond
	count := func(context.Context, int64) (int64, error) { time.Sleep(took); return 0, nil }
	a := NewAdmission(AdmissionConfig{MaxBacklog: 1000, BacklogInterval: 10 * time.Millisecond}, count, nil, nil)
	if got := a.Pause(); got != 10*time.Millisecond {
		t.Fatalf("pause %v before any count, want BACKLOG_INTERVAL", got)
	}
	a.Refresh(context.Background())
	if got := a.Pause(); got < CountCostFactor*took {
		t.Fatalf("pause %v after a %v count, want at least %v", got, took, CountCostFactor*took)
	}
}

// TestNilAdmissionAdmitsEverything: MAX_BACKLOG=0 is no bound.
func TestNilAdmissionAdmitsEverything(t *testing.T) {
	t.Parallel()
	a := NewAdmission(AdmissionConfig{MaxBacklog: 0, BacklogInterval: time.Second}, nil, nil, nil)
	if a != nil {
		t.Fatal("MAX_BACKLOG=0 built an Admission")
	}
	if !a.Admit(MaxBatch) || a.Backlog() != 0 {
		t.Fatal("a nil Admission refused")
	}
	a.Done(MaxBatch, true)
	_ = a.Start()(context.Background())
}

// TestAdmissionConfigNamesBadSettings: MAX_BACKLOG must be 0 or hold one
// full batch; BACKLOG_INTERVAL is bounded.
func TestAdmissionConfigNamesBadSettings(t *testing.T) {
	t.Parallel()
	for env, want := range map[string]string{
		"MAX_BACKLOG=999":           "MAX_BACKLOG",
		"MAX_BACKLOG=-1":            "MAX_BACKLOG",
		"BACKLOG_INTERVAL=1ms":      "BACKLOG_INTERVAL",
		"BACKLOG_INTERVAL=1m":       "BACKLOG_INTERVAL",
		"MAX_BACKLOG=1000":          "",
		"BACKLOG_INTERVAL=10ms":     "",
		"MAX_BACKLOG=0":             "",
		"MAX_BACKLOG=100000000":     "",
		"MAX_BACKLOG=100000001":     "MAX_BACKLOG",
		"BACKLOG_INTERVAL=10s":      "",
		"BACKLOG_INTERVAL=10s1ns":   "BACKLOG_INTERVAL",
		"MAX_BACKLOG=twenty":        "MAX_BACKLOG",
		"BACKLOG_INTERVAL=sometime": "BACKLOG_INTERVAL",
	} {
		k, v, _ := strings.Cut(env, "=")
		r := config.FromMap(map[string]string{k: v})
		ReadAdmissionConfig(r)
		err := r.Err()
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v, want accepted", env, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%s: %v, want an error naming %s", env, err, want)
		}
	}
}
