// Area: the backlog bound (MAX_BACKLOG, Features.BacklogBound). Past
// the bound an enqueue is shed whole with a 503, before the workers
// starve.

package conformance

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// runBacklog checks the backlog bound (MAX_BACKLOG): the admission that
// sheds enqueues before the workers starve.
func runBacklog(t *testing.T, f Features, newTarget NewTarget) {
	runTests(t, f, newTarget, []test{
		{"BacklogBoundShedsWholeRequests", testBacklogBound},
	})
}

// testBacklogBound fills an API-only target to MAX_BACKLOG (its smallest
// value, one full batch): a batch that would pass it is shed whole (503,
// Retry-After, Error-Kind: shed) while a batch that fits exactly is
// accepted, and single enqueues and payments are shed too. A new instance
// sees the backlog through the side's own count (its tally is empty) and
// sheds as well. Nothing of any shed request is recorded. An instance with
// workers then processes the full backlog while the intake is shed, and
// admits enqueues again once there is room.
//
// The first instance counts only at its start (BACKLOG_INTERVAL at its
// largest): its tally alone decides, so the test does not depend on when
// a count runs.
func testBacklogBound(t *testing.T, f Features, newTarget NewTarget) {
	if !f.BacklogBound {
		t.Skip("BacklogBound: this side does not count its backlog (MAX_BACKLOG)")
	}
	const bound = queue.MinMaxBacklog
	s := Settings{APIOnly: true, MaxBacklog: bound, BacklogInterval: queue.MaxBacklogInterval}
	tg := newTarget(t, s)
	base := tg.URL()
	enqueueBatch(t, base, bound-10, queue.TaskRequest{Kind: "fill"})
	over := func(n int) queue.BatchRequest {
		b := queue.BatchRequest{Tasks: make([]queue.TaskRequest, n)}
		for i := range b.Tasks {
			b.Tasks[i] = queue.TaskRequest{Kind: "over"}
		}
		return b
	}
	checkShed(t, base+"/tasks/batch", over(11))
	enqueueBatch(t, base, 10, queue.TaskRequest{Kind: "fits"})
	checkShed(t, base+"/tasks", queue.TaskRequest{Kind: "over"})
	checkShed(t, base+"/payments", queue.PaymentRequest{Amount: 1200, Currency: "EUR"})
	if shed := kittest.Counter(t, base, "shed"); shed != 3 {
		t.Errorf("/stats shed = %d, want the 3 shed requests", shed)
	}

	// A new instance: only the side's count knows the backlog.
	tg.Restart(t)
	base = tg.URL()
	checkShed(t, base+"/tasks/batch", over(1))
	readRightAfterEnqueue(t, f, "NothingShedRecorded", func(t *testing.T) {
		if n := countTasks(t, tg, all); n != bound {
			t.Errorf("%d task records, want the %d accepted: a shed request recorded something", n, bound)
		}
		if n := countTasks(t, tg, func(r TaskRecord) bool { return r.Kind == "over" }); n != 0 {
			t.Errorf("%d task records of shed requests, want 0", n)
		}
		if n := countPayments(t, tg, all); n != 0 {
			t.Errorf("%d payment records, want 0: the payment was shed", n)
		}
	})

	// Workers: they drain the full backlog while enqueues are shed, and
	// the intake is admitted again once a count sees room.
	s.APIOnly, s.Workers, s.BacklogInterval = false, 4, 20*time.Millisecond
	tg.Configure(s)
	tg.Restart(t)
	base = tg.URL()
	kittest.Eventually(t, 2*time.Minute, "an enqueue admitted once the workers made room", func() bool {
		st, raw := call(t, http.MethodPost, base+"/tasks", queue.TaskRequest{Kind: "after"}, nil)
		if st != http.StatusAccepted && st != http.StatusServiceUnavailable {
			t.Fatalf("POST /tasks while the backlog drains: %d %s, want 503 (shed) or 202", st, raw)
		}
		return st == http.StatusAccepted
	})
	waitAllFinished(t, tg, bound+1, 2*time.Minute)
	if f.RecordsOnConsume == "" {
		return
	}
	// The records appear as workers take the tasks: that nothing of a
	// shed request was recorded (or published) shows once all is done.
	if n := countTasks(t, tg, all); n != bound+1 {
		t.Errorf("%d task records once all is done, want the %d accepted", n, bound+1)
	}
	if n := countTasks(t, tg, func(r TaskRecord) bool { return r.Kind == "over" }); n != 0 {
		t.Errorf("%d task records of shed requests, want 0", n)
	}
	if n := countPayments(t, tg, all); n != 0 {
		t.Errorf("%d payment records, want 0: the payment was shed", n)
	}
}

// checkShed posts body to url and checks the answer is the backlog
// bound's shed: 503, Retry-After, Error-Kind: shed, a JSON error of kind
// shed.
func checkShed(t testing.TB, url string, body any) {
	t.Helper()
	resp, raw := kittest.DoResponse(t, http.MethodPost, url, body, nil)
	var e struct {
		Error string `json:"error"`
		Kind  string `json:"kind"`
	}
	_ = json.Unmarshal(raw, &e)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" ||
		resp.Header.Get(httpapi.KindHeader) != string(httpapi.KindShed) || e.Kind != string(httpapi.KindShed) || e.Error == "" {
		t.Errorf("POST %s past MAX_BACKLOG: %d, Retry-After %q, %s %q, %s; want 503 shed with Retry-After",
			url, resp.StatusCode, resp.Header.Get("Retry-After"), httpapi.KindHeader, resp.Header.Get(httpapi.KindHeader), raw)
	}
}
