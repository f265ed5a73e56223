package driver

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestAttackPacesAtTheRequestedRate counts the requests a local server
// receives inside a window in the middle of a constant-rate attack: the
// count must be the rate times the window within a tolerance. No latency
// is asserted.
func TestAttackPacesAtTheRequestedRate(t *testing.T) {
	const rate = 200.0
	var mu sync.Mutex
	var arrivals []time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		arrivals = append(arrivals, time.Now())
		mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()

	start := time.Now()
	res := Attack(context.Background(), AttackSpec{
		Name: "pacing", Rate: rate, Duration: 3 * time.Second,
		Next: func(uint64) Request { return Request{Method: http.MethodPost, URL: srv.URL, Body: []byte(`{}`)} },
	})
	if res.Requests != res.OK || res.Errors != 0 {
		t.Fatalf("requests %d ok %d errors %d %v", res.Requests, res.OK, res.Errors, res.ErrorSamples)
	}
	// The whole attack: rate × duration, within 5%.
	if want := rate * 3; math.Abs(float64(res.Requests)-want) > 0.05*want {
		t.Errorf("sent %d requests in 3 s, want %.0f ± 5%%", res.Requests, want)
	}
	// A 2 s window from 0.5 s to 2.5 s: 400 requests, within 10%.
	mu.Lock()
	defer mu.Unlock()
	from, to := start.Add(500*time.Millisecond), start.Add(2500*time.Millisecond)
	n := 0
	for _, a := range arrivals {
		if !a.Before(from) && a.Before(to) {
			n++
		}
	}
	if want := rate * 2; math.Abs(float64(n)-want) > 0.10*want {
		t.Errorf("%d requests arrived between 0.5 s and 2.5 s, want %.0f ± 10%%", n, want)
	}
	if res.Latency.Count != res.Requests || res.ServiceTime.Count != res.Requests {
		t.Errorf("histogram counts %d/%d, want %d", res.Latency.Count, res.ServiceTime.Count, res.Requests)
	}
}

// TestAttackCountsErrorsAndStatuses checks that non-2xx answers are
// errors, counted by status, with a sample of the body, except a 503 with
// Retry-After: a shed, counted apart.
func TestAttackCountsErrorsAndStatuses(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch n.Add(1) % 3 {
		case 1:
			http.Error(w, `{"error":"nope"}`, http.StatusServiceUnavailable)
		case 2:
			w.Header().Set("Retry-After", "1")
			http.Error(w, `{"error":"overloaded"}`, http.StatusServiceUnavailable)
		default:
			w.WriteHeader(http.StatusCreated)
		}
	}))
	defer srv.Close()
	res := Attack(context.Background(), AttackSpec{Rate: 60, Duration: time.Second,
		Next: func(uint64) Request { return Request{URL: srv.URL} }})
	if res.OK+res.Errors+res.Shed != res.Requests || res.Errors == 0 || res.Shed == 0 || res.Codes["201"] != res.OK || res.Codes["503"] != res.Errors+res.Shed {
		t.Fatalf("%+v", res)
	}
	if len(res.ErrorSamples) != 1 || !slices.ContainsFunc(res.ErrorSamples, func(s string) bool { return strings.Contains(s, "nope") }) {
		t.Errorf("samples %q: want the error only, not the shed", res.ErrorSamples)
	}
	m := map[Metric]float64{}
	FlattenClient(m, "client.", res)
	if m["client.shed"] != float64(res.Shed) || m["client.errors"] != float64(res.Errors) {
		t.Errorf("flattened %v", m)
	}
}

// TestAttackMeasuresFromTheIntendedSendTime caps the attack at one worker
// against a server that takes 50 ms: arrivals pile up in the driver, and
// the latency from the intended send time must grow far beyond the
// service time (which vegeta alone would report).
func TestAttackMeasuresFromTheIntendedSendTime(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(50 * time.Millisecond)
	}))
	defer srv.Close()
	res := Attack(context.Background(), AttackSpec{Rate: 100, Duration: time.Second, MaxWorkers: 1,
		Next: func(uint64) Request { return Request{URL: srv.URL} }})
	if res.Requests == 0 {
		t.Fatal("nothing sent")
	}
	if res.Latency.MaxMS < 4*res.ServiceTime.MaxMS {
		t.Errorf("latency max %.1f ms vs service time max %.1f ms: the queueing in the driver is not counted", res.Latency.MaxMS, res.ServiceTime.MaxMS)
	}
}

func TestOrderRotatesEveryRound(t *testing.T) {
	ab := []string{"A", "B"}
	for r, want := range [][]string{{"A", "B"}, {"B", "A"}, {"A", "B"}, {"B", "A"}} {
		if got := Order(ab, r); !reflect.DeepEqual(got, want) {
			t.Errorf("round %d: %v, want %v", r, got, want)
		}
	}
	abc := []string{"A", "B", "C"}
	for r, want := range [][]string{{"A", "B", "C"}, {"B", "C", "A"}, {"C", "A", "B"}} {
		if got := Order(abc, r); !reflect.DeepEqual(got, want) {
			t.Errorf("round %d: %v, want %v", r, got, want)
		}
	}
}

// TestRunPointAlternatesAndSummarizes runs a point with a fake side
// function and checks the call order, the medians, ranges and ratios.
func TestRunPointAlternatesAndSummarizes(t *testing.T) {
	var calls []string
	p := Point{Scenario: "x.rate", Name: "1/s", Sides: []string{"pg", "x"}}
	vals := map[string][]float64{"pg": {10, 30, 20}, "x": {5, 10, 40}}
	err := RunPoint(context.Background(), &p, 3, func(_ context.Context, s string, round int) (*SideResult, error) {
		calls = append(calls, s)
		return &SideResult{Metrics: map[Metric]float64{"lat": vals[s][round]}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"pg", "x", "x", "pg", "pg", "x"}; !reflect.DeepEqual(calls, want) {
		t.Errorf("calls %v, want %v", calls, want)
	}
	if len(p.Rounds) != 3 || !reflect.DeepEqual(p.Rounds[1].Order, []string{"x", "pg"}) {
		t.Errorf("rounds %+v", p.Rounds)
	}
	m := p.Find("lat")
	if m == nil {
		t.Fatal("no metric")
	}
	if got := m.Sides["pg"]; got != (Agg{Median: 20, Min: 10, Max: 30, N: 3}) {
		t.Errorf("pg %+v", got)
	}
	if got := m.Sides["x"]; got != (Agg{Median: 10, Min: 5, Max: 40, N: 3}) {
		t.Errorf("x %+v", got)
	}
	var ratios []float64
	for _, r := range m.Ratios {
		ratios = append(ratios, *r)
	}
	if !reflect.DeepEqual(ratios, []float64{2, 3, 0.5}) || *m.Ratio != 2 {
		t.Errorf("ratios %v median %v", ratios, *m.Ratio)
	}
}

// fixtureRun is a small but complete run.
func fixtureRun() *Run {
	run := NewRun("queue", []string{"-rounds", "3"}, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	run.Versions = Versions{Postgres: "15.20", RabbitMQ: "3.10.8", Erlang: "25", Kafka: "4.3.1", Mongo: "7.0.42", MongoFlavor: "FerretDB"}
	run.Settings["rounds"] = 3
	p := Point{Scenario: "queue.rate", Name: "1000/s", Rate: 1000, DurationS: 5, Sides: []string{"no-rabbitmq", "rabbitmq"}}
	_ = RunPoint(context.Background(), &p, 3, func(_ context.Context, s string, r int) (*SideResult, error) {
		c := ClientResult{TargetRate: 1000, DurationS: 5, Requests: 5000, OK: 5000, Codes: map[string]int64{"202": 5000}}
		res := &SideResult{Phases: []Phase{{Name: "send", Client: c}}, Metrics: map[Metric]float64{},
			Stats: &ServerStats{Service: s, Counters: map[string]int64{"processed": 5000}, Latencies: map[string]Summary{"processing": {Count: 5000, P99MS: 4}}}}
		FlattenClient(res.Metrics, "client.", c)
		FlattenServer(res.Metrics, res.Stats)
		return res, nil
	})
	run.Points = append(run.Points, p)
	run.Ceilings = append(run.Ceilings, Ceiling{Scenario: "queue.ceiling", Service: "no-rabbitmq", Spec: &CeilingSpec{Latency: "processing", StepS: 3, P99MS: 100},
		Rounds: []CeilingRound{{Index: 0, Rate: 4000, Steps: []CeilingStep{{Rate: 4000, Pass: true, Why: "ok", Metrics: map[Metric]float64{}}}}},
		Rate:   Aggregate([]float64{4000})})
	run.FinishedAt = run.StartedAt.Add(time.Minute)
	return run
}

// TestResultsFileSchema writes a run and checks the JSON's field names
// (the schema docs/loadtests.md documents) and that ReadRun reads it back
// strictly.
func TestResultsFileSchema(t *testing.T) {
	dir := t.TempDir()
	run := fixtureRun()
	path, err := WriteRun(dir, run)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(path) != "20260102T030405Z-queue.json" {
		t.Errorf("file name %s", path)
	}
	b, _ := os.ReadFile(path)
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	keys := func(v any) []string {
		var ks []string
		for k := range v.(map[string]any) {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		return ks
	}
	want := map[string][]string{
		"run":      {"args", "ceilings", "command", "finished_at", "id", "machine", "notes", "points", "schema", "settings", "started_at", "versions"},
		"machine":  {"arch", "cpu_model", "cpus", "go_version", "hostname", "memory_bytes", "os"},
		"versions": {"erlang", "kafka", "mongo", "mongo_flavor", "postgres", "rabbitmq"},
		"point":    {"duration_s", "metrics", "name", "rate", "rounds", "scenario", "sides", "status"},
		"round":    {"index", "order", "sides"},
		"side":     {"metrics", "phases", "service", "started_at", "stats"},
		"phase":    {"client", "name"},
		"client":   {"codes", "duration_s", "errors", "latency", "ok", "requests", "sent_rate", "service_time", "shed", "target_rate", "throughput"},
		"latency":  {"count", "max_ms", "mean_ms", "p50_ms", "p90_ms", "p95_ms", "p999_ms", "p99_ms"},
		"metric":   {"name", "ratio", "ratios", "sides"},
		"agg":      {"max", "median", "min", "n"},
		"ceiling":  {"rate", "rounds", "scenario", "service", "spec", "status"},
	}
	point := doc["points"].([]any)[0].(map[string]any)
	round := point["rounds"].([]any)[0].(map[string]any)
	side := round["sides"].(map[string]any)["rabbitmq"].(map[string]any)
	phase := side["phases"].([]any)[0].(map[string]any)
	metric := point["metrics"].([]any)[0].(map[string]any)
	got := map[string][]string{
		"run": keys(doc), "machine": keys(doc["machine"]), "versions": keys(doc["versions"]),
		"point": keys(point), "round": keys(round), "side": keys(side), "phase": keys(phase),
		"client": keys(phase["client"]), "latency": keys(phase["client"].(map[string]any)["latency"]),
		"metric": keys(metric), "agg": keys(metric["sides"].(map[string]any)["rabbitmq"]),
		"ceiling": keys(doc["ceilings"].([]any)[0]),
	}
	for k := range want {
		if !reflect.DeepEqual(got[k], want[k]) {
			t.Errorf("%s keys:\n got %v\nwant %v", k, got[k], want[k])
		}
	}
	if doc["schema"].(float64) != SchemaVersion {
		t.Errorf("schema %v", doc["schema"])
	}
	back, err := ReadRun(path)
	if err != nil {
		t.Fatal(err)
	}
	if back.ID != run.ID || len(back.Points[0].Rounds) != 3 || back.Points[0].Find("server.processing.p99_ms") == nil {
		t.Errorf("read back %+v", back)
	}
	// A file with an unknown field or another schema version is refused.
	bad := filepath.Join(dir, "bad.json")
	_ = os.WriteFile(bad, []byte(`{"schema":1,"surprise":true}`), 0o644)
	if _, err := ReadRun(bad); err == nil {
		t.Error("unknown field accepted")
	}
	_ = os.WriteFile(bad, []byte(`{"schema":99}`), 0o644)
	if _, err := ReadRun(bad); err == nil {
		t.Error("schema 99 accepted")
	}
	// A file of schema 1 still reads, its ceilings' criteria in words.
	old := filepath.Join(dir, "old.json")
	_ = os.WriteFile(old, []byte(`{"schema":1,"ceilings":[{"scenario":"queue.ceiling","criteria":"errors < 1%"}],"notes":["an explanation"]}`), 0o644)
	if r, err := ReadRun(old); err != nil || r.Ceilings[0].Criteria != "errors < 1%" || len(r.Notes) != 1 {
		t.Errorf("schema 1: %+v, %v", r, err)
	}
	if p, err := Prose(run); err != nil || len(p) > 0 {
		t.Errorf("the fixture holds sentences: %q %v", p, err)
	}
}
