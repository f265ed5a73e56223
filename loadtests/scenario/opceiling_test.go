package scenario

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/documents"
)

// TestQuietNamesTheBusyProcesses: a side is idle when each of its own
// processes used at most IdleCores over the window; a busier one is named
// with its cores (FerretDB still scanning after the step before).
func TestQuietNamesTheBusyProcesses(t *testing.T) {
	if why := quietWhy(map[string]float64{"no-mongodb": 0.01, "ferretdb": 0.05}, time.Second); why != "" {
		t.Errorf("idle processes: %q", why)
	}
	if why := quietWhy(map[string]float64{}, time.Second); why != "" {
		t.Errorf("no process found: %q", why)
	}
	why := quietWhy(map[string]float64{"mongodb": 0.02, "ferretdb": 1.9, "no-mongodb": 0.3}, 2*time.Second)
	if !strings.Contains(why, "not idle: ferretdb used 0.95 cores, no-mongodb used 0.15 cores over 2s") || strings.Contains(why, " mongodb used") {
		t.Errorf("busy processes: %q", why)
	}
}

// TestWaitForIsBounded: the wait ends as soon as the state holds; when it
// never does, it ends at the bound with the last reason and the wait.
func TestWaitForIsBounded(t *testing.T) {
	calls := 0
	why := waitFor(context.Background(), time.Second, time.Millisecond, func(context.Context) string {
		if calls++; calls < 3 {
			return "not yet"
		}
		return ""
	})
	if why != "" || calls != 3 {
		t.Errorf("held at the third check: %q after %d checks", why, calls)
	}
	t0 := time.Now()
	why = waitFor(context.Background(), 50*time.Millisecond, 10*time.Millisecond, func(context.Context) string { return "holds 1999 users" })
	if !strings.HasPrefix(why, "holds 1999 users after waiting 50ms") || time.Since(t0) > 5*time.Second {
		t.Errorf("never held: %q after %s", why, time.Since(t0))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if why := waitFor(ctx, time.Minute, time.Minute, func(context.Context) string { return "busy" }); why != context.Canceled.Error() {
		t.Errorf("cancelled: %q", why)
	}
}

// TestPreconditionReasons: the documents' users and the cache's products
// are counted exactly against the data set.
func TestPreconditionReasons(t *testing.T) {
	if usersWhy(2000, nil, 2000) != "" || productsWhy(10000, nil, 10000) != "" {
		t.Error("an exact count failed")
	}
	if why := usersWhy(2008, nil, 2000); why != "holds 2008 users, not the 2000 of the data set" {
		t.Errorf("extra users: %q", why)
	}
	if why := usersWhy(0, errors.New("no route"), 2000); !strings.Contains(why, "not counted: no route") {
		t.Errorf("count failed: %q", why)
	}
	if why := productsWhy(9999, nil, 10000); !strings.Contains(why, "9999 of the 10000 products") {
		t.Errorf("missing products: %q", why)
	}
}

// TestUnionP99BoundsHitsAndMisses: one latency alone gives its own p99;
// a few slow misses among many hits give the quantile of the hits below
// which at most 1% of all may lie above; nothing recorded is no figure.
func TestUnionP99BoundsHitsAndMisses(t *testing.T) {
	hits := driver.Summary{Count: 9950, P50MS: 0.2, P90MS: 0.4, P95MS: 0.5, P99MS: 1, P999MS: 3, MaxMS: 9}
	misses := driver.Summary{Count: 50, P50MS: 20, P90MS: 40, P95MS: 50, P99MS: 80, P999MS: 90, MaxMS: 95}
	if v, ok := unionP99([]driver.Summary{hits, {}}); !ok || v != 1 {
		t.Errorf("hits alone: %v %v, want their p99 1", v, ok)
	}
	// At 3 ms: 0.1% of hits and every miss (0.5%) may lie above: 0.6% ≤ 1%.
	// At 1 ms: 1% of hits and every miss: 1.5% > 1%.
	if v, ok := unionP99([]driver.Summary{hits, misses}); !ok || v != 3 {
		t.Errorf("hits and 0.5%% misses: %v %v, want 3", v, ok)
	}
	many := misses
	many.Count = 5000
	// Half are misses: their p99 (80) holds 0.5%, the hits' p999 ... at
	// 80 ms every hit lies below.
	if v, ok := unionP99([]driver.Summary{hits, many}); !ok || v != 80 {
		t.Errorf("a third misses: %v %v, want 80", v, ok)
	}
	if _, ok := unionP99([]driver.Summary{{}, {}}); ok {
		t.Error("no request gave a p99")
	}
}

// TestCeilingRequests: what each operation's step sends: the documents'
// search rotates the search point's queries, its write merges "score"
// into the side's own users' profiles, the cache reads the key sequence,
// the event store appends to a stream no request used before, "no_stream"
// where the engine checks it and "any" on Kafka.
func TestCeilingRequests(t *testing.T) {
	search := DocumentsScenario.searchOp(30 * time.Second).Requests("http://a")
	if r := search(9); r.Method != http.MethodPost || r.URL != "http://a/users/search" || !json.Valid(r.Body) ||
		!strings.Contains(string(r.Body), DocumentsScenario.SearchQueries[1]) {
		t.Errorf("search request %+v %s", r, r.Body)
	}
	write := writeOp(map[string][]string{"http://a": {"u1", "u2"}, "http://b": {"m1"}})
	if r := write.Requests("http://a")(3); r.Method != http.MethodPatch || r.URL != "http://a/users/u2/profile" || string(r.Body) != `{"score":3}` {
		t.Errorf("write request %+v %s", r, r.Body)
	}
	if r := write.Requests("http://b")(3); r.URL != "http://b/users/m1/profile" || write.Latency != documents.StatPatchProfile {
		t.Errorf("write on b %+v", r)
	}
	if r := readOp([]int{7, 42}).Requests("http://c")(3); r.Method != http.MethodGet || r.URL != "http://c/products/42" {
		t.Errorf("read request %+v", r)
	}
	op := appendOp("ceiling-x", map[string]bool{"http://pg": true})
	first, second := op.Requests("http://pg"), op.Requests("http://pg")
	seen := map[string]bool{}
	for _, r := range []driver.Request{first(0), first(1), second(0), op.Requests("http://kafka")(0)} {
		if seen[r.URL] || !strings.HasSuffix(r.URL, "/events") || !json.Valid(r.Body) {
			t.Errorf("append %s %s: a stream used twice or a bad body", r.URL, r.Body)
		}
		seen[r.URL] = true
	}
	if !strings.Contains(string(first(0).Body), `"no_stream"`) || !strings.Contains(string(op.Requests("http://kafka")(0).Body), `"any"`) {
		t.Errorf("expected versions: %s / %s", first(0).Body, op.Requests("http://kafka")(0).Body)
	}
}

// TestCeilingDeclarations: the new searches' ladders climb √2 apart
// from hundreds to past 10,000/s with the declared step, warm-up, rounds,
// bisections and SLO, and the services' in-flight bound lifted; each
// pair's declaration validates.
func TestCeilingDeclarations(t *testing.T) {
	for name, o := range map[driver.ScenarioName]CeilingOptions{DocumentsSearchCeiling: DocumentsSearchCeilingOpts, DocumentsWriteCeiling: DocumentsWriteCeilingOpts,
		CacheReadCeiling: CacheReadCeilingOpts, EventStoreAppendCeiling: EventStoreAppendCeilingOpts} {
		lad := o.ladder()
		if err := o.validate(string(name)); err != nil || len(lad) < 10 || lad[len(lad)-1] < 10000 || o.Factor >= 1.5 {
			t.Errorf("%s: %v, ladder %v", name, err, lad)
		}
		if o.Step != CeilingStep || o.Warmup != CeilingWarmup || o.Rounds != CeilingRounds || o.Bisect != CeilingBisect || o.P99 != CeilingP99 || o.MaxInFlight != 0 {
			t.Errorf("%s: %+v, want the declared search shape", name, o)
		}
	}
	if err := Cache.Validate(); err != nil {
		t.Error(err)
	}
	bad := Cache
	bad.CeilingModes = []string{"redis", "local"}
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "read ceiling mode") {
		t.Errorf("sides swapped: %v", err)
	}
	d := DocumentsScenario.Defaults
	if !d.SearchCeiling || !d.WriteCeiling || !Cache.Defaults.ReadCeiling {
		t.Error("a declared ceiling is off by default")
	}
}

// TestOpEstimate: an operation's search costs what the rate pairs' does
// plus a quiet window and a probe per step; only the first search of a
// run restarts the services, without the pairs' warm-up.
func TestOpEstimate(t *testing.T) {
	o := CeilingOptions{Start: 1000, Factor: 2, Max: 16000, Bisect: 2, Step: 4 * time.Second, Rounds: 3}
	base := o.estimate(2, 20*time.Second)
	first, later := o.opEstimate(2, 20*time.Second, true), o.opEstimate(2, 20*time.Second, false)
	if first.Attacks != base.Attacks || first.Typical != base.Typical-warmupTime+time.Duration(base.Attacks)*(IdleWindow+attackOverhead) {
		t.Errorf("first search %+v from %+v", first, base)
	}
	if first.Typical-later.Typical != 2*serviceStart {
		t.Errorf("later search %+v: the restart must count once", later)
	}
	if first.Bound <= base.Bound {
		t.Errorf("bound %s not above the rate pairs' %s", first.Bound, base.Bound)
	}
	docs := DocumentsScenario.Defaults
	unscaled := docs
	unscaled.ScaleUsers = nil
	without := docs
	without.SearchCeiling, without.WriteCeiling = false, false
	if add := unscaled.Estimate(20*time.Second).Typical - without.Estimate(20*time.Second).Typical; add < 10*time.Minute || add > 40*time.Minute {
		t.Errorf("the documents ceilings add %s to the estimate", add)
	}
	// At 100,000 and 1,000,000 users: two loads, a search on one side
	// and a write on both at each size.
	add := docs.Estimate(20*time.Second).Typical - unscaled.Estimate(20*time.Second).Typical
	if add < 30*time.Minute || add > 90*time.Minute {
		t.Errorf("the scale sizes add %s to the estimate", add)
	}
	t.Logf("the scale sizes add %s to the documents estimate of %s", add.Round(time.Minute), docs.Estimate(20*time.Second).Typical.Round(time.Minute))
}
