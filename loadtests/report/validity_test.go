package report

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/eventstore"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/experiments"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/resultfile"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/scenario"
)

// failedFixture builds runs whose figures are not valid, each the way a
// real run fails: every MongoDB search a transport error or a 503 (with
// latencies of 77777 ms, the client's timeout), every MongoDB rewrite a
// 503 with a rewrite ÷ patch of 1.234 (a timeout divided by itself), a
// 2 MB point the aborted run never measured, a queue point whose
// no-rabbitmq side recorded no metric, a point at which nothing was sent
// (rate 0), and a ceiling search in which no step passed; the event-store
// results hold a loop that completed nothing and a point read of an empty
// stream.
func failedFixture() ([]*driver.Run, eventstore.Results) {
	at := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	machine := driver.Machine{Hostname: "fixture", OS: "linux", Arch: "amd64", CPUModel: "Test CPU", CPUs: 2, MemoryBytes: 4 << 30, GoVersion: "go1.26"}
	phase := func(name string, requests, ok, errs int64, codes map[string]int64, samples ...string) driver.Phase {
		return driver.Phase{Name: name, Client: driver.ClientResult{Requests: requests, OK: ok, Errors: errs, Codes: codes, ErrorSamples: samples}}
	}
	point := func(scenario, name string, rate float64, sides []string, side func(svc string) *driver.SideResult) driver.Point {
		p := driver.Point{Scenario: driver.ScenarioName(scenario), Name: name, Rate: rate, DurationS: 5, Sides: sides}
		for r := range 3 {
			round := driver.Round{Index: r, Order: driver.Order(sides, r), Sides: map[string]*driver.SideResult{}}
			for _, s := range sides {
				round.Sides[s] = side(s)
			}
			p.Rounds = append(p.Rounds, round)
		}
		driver.Summarize(&p)
		return p
	}
	okPhase := func(name string) driver.Phase { return phase(name, 25, 25, 0, map[string]int64{"200": 25}) }
	docs := &driver.Run{Schema: driver.SchemaVersion, ID: "20260102T030000Z-documents", Command: "documents", StartedAt: at, FinishedAt: at.Add(time.Minute),
		Machine: machine, Versions: driver.Versions{Postgres: "15.20", Mongo: "7.0.42", MongoFlavor: "MongoDB"}, Settings: map[string]any{},
		Notes: []string{"run ended early: mongodb POST /users: 503"}}
	docs.Points = []driver.Point{
		point("documents.search", "2000 users", 5, []string{"no-mongodb", "mongodb"}, func(s string) *driver.SideResult {
			if s == "mongodb" {
				return &driver.SideResult{Phases: []driver.Phase{phase("search", 25, 0, 25, map[string]int64{"0": 24, "503": 1}, "Post: context deadline exceeded (Client.Timeout exceeded)")},
					Metrics: map[driver.Metric]float64{"client.p50_ms": 77777, "client.p95_ms": 77777, "client.p99_ms": 77777, "client.errors": 25}}
			}
			return &driver.SideResult{Phases: []driver.Phase{okPhase("search")},
				Metrics: map[driver.Metric]float64{"client.p50_ms": 4, "client.p95_ms": 11, "client.p99_ms": 19, "client.errors": 0, "server.search.p95_ms": 5.9}}
		}),
		point("documents.rewrite", "512KB", 10, []string{"no-mongodb", "mongodb"}, func(s string) *driver.SideResult {
			if s == "mongodb" {
				all503 := map[string]int64{"503": 50}
				return &driver.SideResult{Phases: []driver.Phase{phase("rewrite", 50, 0, 50, all503), phase("patch", 50, 0, 50, all503)},
					Metrics: map[driver.Metric]float64{"client.rewrite.p50_ms": 77777, "client.rewrite.p99_ms": 77777, "client.patch.p50_ms": 63020, "cost_ratio.p50": 1.234}}
			}
			return &driver.SideResult{Phases: []driver.Phase{okPhase("rewrite"), okPhase("patch")},
				Metrics: map[driver.Metric]float64{"client.rewrite.p50_ms": 63.5, "client.rewrite.p99_ms": 164, "client.patch.p50_ms": 3.29, "cost_ratio.p50": 16.3}}
		}),
		{Scenario: "documents.rewrite", Name: "2MB", Rate: 5, DurationS: 5, Sides: []string{"no-mongodb", "mongodb"}},
	}
	fdatasync := 2100.0
	queue := &driver.Run{Schema: driver.SchemaVersion, ID: "20260102T030000Z-queue", Command: "queue", StartedAt: at, FinishedAt: at.Add(time.Minute),
		Machine: machine, Settings: map[string]any{}, Versions: driver.Versions{Fsync: &driver.Fsync{Tool: "pg_test_fsync -s 1", FdatasyncOpsPerSec: &fdatasync}}}
	sides := []string{"no-rabbitmq", "rabbitmq"}
	queue.Points = []driver.Point{
		point("queue.rate", "1000/s", 1000, sides, func(s string) *driver.SideResult {
			if s == "no-rabbitmq" {
				return &driver.SideResult{} // nothing recorded
			}
			return &driver.SideResult{Phases: []driver.Phase{phase("send", 5000, 5000, 0, map[string]int64{"202": 5000})},
				Metrics: map[driver.Metric]float64{"server.delivery.p99_ms": 53, "throughput": 1000, "client.errors": 0}}
		}),
		point("queue.rate", "2000/s", 2000, sides, func(s string) *driver.SideResult {
			if s == "no-rabbitmq" {
				return &driver.SideResult{Phases: []driver.Phase{phase("send", 0, 0, 0, map[string]int64{})},
					Metrics: map[driver.Metric]float64{"server.delivery.p99_ms": 0, "throughput": 0, "client.errors": 0}}
			}
			return &driver.SideResult{Phases: []driver.Phase{phase("send", 10000, 10000, 0, map[string]int64{"202": 10000})},
				Metrics: map[driver.Metric]float64{"server.delivery.p99_ms": 257, "throughput": 2000, "client.errors": 0}}
		}),
	}
	queue.Ceilings = []driver.Ceiling{
		{Scenario: "queue.ceiling", Service: "no-rabbitmq", Criteria: "fixture", Rounds: []driver.CeilingRound{{Rate: 0}, {Index: 1, Rate: 0}}, Rate: driver.Aggregate([]float64{0, 0})},
		{Scenario: "queue.ceiling", Service: "rabbitmq", Criteria: "fixture", Rounds: []driver.CeilingRound{{Rate: 2000}, {Index: 1, Rate: 2000}}, Rate: driver.Aggregate([]float64{2000, 2000})},
	}
	scanned := int64(1183068)
	es := eventstore.Results{
		Append: &eventstore.AppendResult{RunID: "fixture", At: at, Options: eventstore.DefaultOptions(),
			Engines:  []*eventstore.Engine{{Name: "no-kurrentdb", Up: true, Conditional: true}, {Name: "kafka-eventstore", Up: true}},
			Verdicts: []string{"kafka-eventstore, read-then-append: growing streams +0%, reset streams +0% from round 1 to 3 — no decline of more than 10% in either series."},
			Rows: []eventstore.AppendRow{
				{Engine: "no-kurrentdb", Series: "growing", Ops: 5000, Seconds: 5, OpsPerSec: 1000, Measured: true},
				{Engine: "kafka-eventstore", Series: "growing", Ops: 0, Seconds: 5, OpsPerSec: 0, Measured: true},
			}},
		PointRead: &eventstore.PointReadResult{At: at, Options: eventstore.DefaultOptions(), Rows: []eventstore.PointReadRow{
			{Engine: "no-kurrentdb", Stream: "s-1", Matched: 239, MedianMS: 3.47, Measured: true},
			{Engine: "kafka-eventstore", Stream: "0", Matched: 0, RecordsScanned: &scanned, MedianMS: 1478, Measured: true},
		}},
	}
	return []*driver.Run{queue, docs}, es
}

// zeroFigure matches what an invalid value used to print as: a zero
// ratio, a zero latency or rate, a dash for a missing value.
var zeroFigure = regexp.MustCompile(`(^|[ (:|\[])0(\.0+)?×|[^0-9.]0 ms[^0-9]|[^0-9.]0(\.0)? events/s|\| – \||\b0 vs 0\b`)

// TestFailedPointsAreNeverFigures renders the failed fixture: the report,
// the README block and the terminal table name every failed point with
// its reason, draw no zero, ratio or bar from them, and the claims that
// read them are "failed run".
func TestFailedPointsAreNeverFigures(t *testing.T) {
	runs, es := failedFixture()
	dir := t.TempDir()
	out := filepath.Join(dir, "RESULTS.md")
	charts := filepath.Join(dir, "docs", "results")
	if err := Write(Files{out, charts}, withES(runs, es), Sources{Raw: notifyFixture()}, time.Date(2026, 1, 3, 0, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var tb bytes.Buffer
	for _, r := range runs {
		Table(&tb, r)
	}
	texts := map[string]string{"RESULTS.md": string(b), "README block": Findings(withES(runs, es), Sources{Raw: notifyFixture()}), "terminal table": tb.String()}
	for name, text := range texts {
		for _, l := range strings.Split(text, "\n") {
			if zeroFigure.MatchString(l) {
				t.Errorf("%s prints an invalid value as a figure: %s", name, l)
			}
			for _, bad := range []string{"77777", "77778", "63020", "1.23×", "1183068 records for 0", "+0%"} {
				if strings.Contains(l, bad) {
					t.Errorf("%s prints a failed side's figure %q: %s", name, bad, l)
				}
			}
		}
	}
	md := string(b)
	wantContains(t, "RESULTS.md", md,
		"failed: 100% of search requests failed (24 transport errors (timeouts), 1 answered 503) (every round)",
		"failed: 100% of rewrite requests failed (50 answered 503) (every round)",
		"| 2MB | validity | failed: the run aborted before this point was measured (mongodb POST /users: 503)",
		"failed: no metrics recorded (every round)",
		"failed: send sent no request (every round)",
		"no ratio: no-rabbitmq not valid",
		"failed: no step passed in any round",
		"failed: no append completed within the 5 s window",
		"kafka-eventstore, read-then-append: no trend: every loop failed",
		`failed: stream "0" holds no event on this engine`,
		"## Failed points",
		"| fsync | 2,100 fdatasync/s, 0.48 ms per flush (`pg_test_fsync -s 1`) |",
	)
	// Every claim reading a failed side says so; none is decided on it.
	for _, c := range Claims(runs, notifyFixture()) {
		reads := map[string]bool{"search p95 vs MongoDB": true, "rewrite ÷ patch on Postgres": true, "rewrite ÷ patch on MongoDB": true,
			"large rewrite p99 vs MongoDB": true, "delivery p99 close to RabbitMQ's": true, "design-target ceiling": c.Pair == "queue"}
		if reads[c.Short] && (c.Verdict != FailedRun || c.Why == "") {
			t.Errorf("%s %q reads a failed point, yet: %s (%s; measured %s)", c.Pair, c.Short, c.Verdict, c.Why, c.Measured)
		}
	}
	// Charts: the failed values are marked, never drawn.
	cost, err := os.ReadFile(filepath.Join(charts, "documents-cost-ratio.svg"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(cost), failedMark) || strings.Contains(string(cost), ">1.23<") {
		t.Errorf("cost-ratio chart: want %q marks and no 1.23 bar", failedMark)
	}
	lat, err := os.ReadFile(filepath.Join(charts, "queue-latency.svg"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(lat), failedMark) {
		t.Errorf("queue latency chart: the failed no-rabbitmq points are not marked")
	}
	if ceil, err := os.ReadFile(filepath.Join(charts, "ceilings.svg")); err != nil || !strings.Contains(string(ceil), failedMark) {
		t.Errorf("ceilings chart: the failed search is not marked (%v)", err)
	}
}

// TestOldFilesAreValidatedOnRead: a results file written before statuses
// existed gets them when read, from its response codes.
func TestOldFilesAreValidatedOnRead(t *testing.T) {
	runs, _ := failedFixture()
	docs := runs[1]
	dir := t.TempDir()
	path, err := resultfile.Write(dir, "old.json", docs) // no Validate: an old file
	if err != nil {
		t.Fatal(err)
	}
	r, err := driver.ReadRun(path)
	if err != nil {
		t.Fatal(err)
	}
	if st := r.Points[0].SideStatus("mongodb"); st.State != driver.StateFailed {
		t.Errorf("search on mongodb: %v", st)
	}
	if st := r.Points[0].SideStatus("no-mongodb"); st.State != driver.StateOK {
		t.Errorf("search on no-mongodb: %v", st)
	}
	if st := r.Points[2].SideStatus("no-mongodb"); st.State != driver.StateFailed || !strings.Contains(st.Reason, "aborted") {
		t.Errorf("2MB on no-mongodb: %v", st)
	}
}

// TestPublishDecision: results refuses to publish failed points unless
// told to, naming each.
func TestPublishDecision(t *testing.T) {
	runs, es := failedFixture()
	failed := FailedPoints(withES(runs, es))
	if err := PublishDecision(nil, false); err != nil {
		t.Errorf("nothing failed: %v", err)
	}
	if err := PublishDecision(failed, true); err != nil {
		t.Errorf("-publish-failed: %v", err)
	}
	err := PublishDecision(failed, false)
	if err == nil {
		t.Fatal("failed points published without -publish-failed")
	}
	for _, want := range []string{"documents.search 2000 users, mongodb: failed", "queue.ceiling ceiling, no-rabbitmq: failed", "eventstore point-read, kafka-eventstore: failed", "-publish-failed"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	ok, _ := fixtureOK()
	if f := FailedPoints(ok); len(f) != 0 {
		t.Errorf("the valid fixture has failed points: %v", f)
	}
}

func fixtureOK() ([]*driver.Run, error) { return fixture(), nil }

// TestLZ4ClaimReadsTheTOASTExperiment: without lz4 points in the
// documents run, the TOAST experiment's rewrite times decide the lz4
// claim, which says where its figures come from.
func TestLZ4ClaimReadsTheTOASTExperiment(t *testing.T) {
	runs := []*driver.Run{fixture()[2]} // documents
	if runs[0].Command != "documents" {
		t.Fatalf("fixture()[2] is %s", runs[0].Command)
	}
	var keep []driver.Point
	for _, p := range runs[0].Points {
		if p.Scenario != "documents.rewrite_lz4" {
			keep = append(keep, p)
		}
	}
	runs[0].Points = keep
	find := func(cs []Claim) Claim {
		for _, c := range cs {
			if c.Short == "lz4 TOAST compression vs pglz" {
				return c
			}
		}
		t.Fatal("no lz4 claim")
		return Claim{}
	}
	if c := find(ClaimsFrom(runs, Sources{})); c.Verdict != NotMeasurable {
		t.Errorf("no lz4 points, no experiment: %s (%s)", c.Verdict, c.Why)
	}
	xf := &experiments.File{Results: []experiments.Result{{Name: toastExperiment, Metrics: map[driver.Metric]float64{
		"ms_pglz_512KiB_rewrite": 28.9, "ms_lz4_512KiB_rewrite": 5.47, "ms_pglz_2MiB_rewrite": 102, "ms_lz4_2MiB_rewrite": 31.2}}}}
	c := find(ClaimsFrom(runs, Sources{Experiments: xf}))
	if c.Verdict != Holds || !strings.Contains(c.Measured, "512KiB: rewrite 28.9 ms (pglz) vs 5.47 ms (lz4)") || !strings.Contains(c.Measured, toastExperiment) {
		t.Errorf("TOAST experiment: %+v", c)
	}
	xf.Results[0].Metrics["ms_lz4_2MiB_rewrite"] = 150
	if c := find(ClaimsFrom(runs, Sources{Experiments: xf})); c.Verdict != DoesNotHold {
		t.Errorf("lz4 slower at 2MiB: %s (%s)", c.Verdict, c.Why)
	}
}

// TestClaimsTheIssueFoundContradictory decides the claims issue 21 found
// labelled against their own figures: Redis ahead by less than claimed is
// "does not hold" saying that Redis is ahead; a tie decides no direction.
func TestClaimsTheIssueFoundContradictory(t *testing.T) {
	pt := func(sc driver.ScenarioName, name string, sides []string, vals map[driver.Metric]float64) driver.Point {
		p := driver.Point{Scenario: sc, Name: name, Sides: sides}
		_ = driver.RunPoint(t.Context(), &p, 3, func(_ context.Context, s string, _ int) (*driver.SideResult, error) {
			return &driver.SideResult{Metrics: map[driver.Metric]float64{"client.p50_ms": vals[driver.Metric(s)]}}, nil
		})
		return p
	}
	modes := []string{modeRedis, modeUnlogged}
	cache := &driver.Run{Command: "cache", Points: []driver.Point{
		pt(scenario.CacheRawScenario, "by key", []string{"postgres", "redis"}, map[driver.Metric]float64{"postgres": 0.417, "redis": 0.3}),
		pt(scenario.CacheProfileScenario, "read_heavy", modes, map[driver.Metric]float64{modeRedis: 1.0, modeUnlogged: 1.3}),
		pt(scenario.CacheProfileScenario, "write_heavy", modes, map[driver.Metric]float64{modeRedis: 1.47, modeUnlogged: 1.47}),
	}}
	byShort := map[string]Claim{}
	for _, c := range Claims([]*driver.Run{cache}) {
		byShort[c.Short] = c
	}
	raw := byShort["raw lookup by key: Redis 6.50× ahead"]
	if raw.Verdict != DoesNotHold || !strings.Contains(raw.Why, "Redis is ahead (1.39×), as claimed, but by less than the claimed 6.50×") {
		t.Errorf("Redis 1.39× ahead: %s (%s)", raw.Verdict, raw.Why)
	}
	http := byShort["Redis ahead behind HTTP"]
	if http.Verdict != Inconclusive || !strings.Contains(http.Why, "a tie (within 5%) at write_heavy") {
		t.Errorf("a tie: %s (%s)", http.Verdict, http.Why)
	}
}
