package stats_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/stats"
)

func TestSnapshotPercentilesAndReset(t *testing.T) {
	t.Parallel()
	r := stats.New(stats.Info{Service: "no-kafka", Pair: "log", Backend: "postgres"}, []string{"write", "delivery"}, []string{"written"})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := 1; i <= 250; i++ {
				r.Observe("write", time.Duration(g*250+i)*time.Millisecond)
				r.Inc("written")
			}
		})
	}
	wg.Wait()
	s := r.Snapshot()
	w := s.Latencies["write"]
	if w.Count != 1000 || s.Counters["written"] != 1000 {
		t.Fatalf("count %d / counter %d, want 1000", w.Count, s.Counters["written"])
	}
	near := func(got, want float64) bool { return got >= want*0.99 && got <= want*1.01 }
	if !near(w.P50MS, 500) || !near(w.P99MS, 990) || !near(w.MaxMS, 1000) || !near(w.MeanMS, 500.5) {
		t.Errorf("summary off: %+v", w)
	}
	if d, ok := s.Latencies["delivery"]; !ok || d.Count != 0 {
		t.Errorf("declared latency missing or non-zero: %+v", s.Latencies)
	}
	r.Reset()
	s = r.Snapshot()
	if s.Latencies["write"].Count != 0 || s.Counters["written"] != 0 {
		t.Errorf("reset left numbers: %+v", s)
	}
}

func TestHandlersShape(t *testing.T) {
	t.Parallel()
	r := stats.New(stats.Info{Service: "rabbitmq", Pair: "queue", Backend: "rabbitmq"}, []string{"send"}, []string{"enqueued"})
	r.Observe("send", 3*time.Millisecond)
	r.Inc("enqueued")

	rec := httptest.NewRecorder()
	r.ResetHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/stats/reset", nil))
	var before map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &before); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"service", "pair", "backend", "started_at", "uptime_s", "since_reset_s", "counters", "latencies"} {
		if _, ok := before[k]; !ok {
			t.Errorf("/stats lacks %q: %v", k, before)
		}
	}
	send := before["latencies"].(map[string]any)["send"].(map[string]any)
	for _, k := range []string{"count", "mean_ms", "p50_ms", "p90_ms", "p95_ms", "p99_ms", "p999_ms", "max_ms"} {
		if _, ok := send[k]; !ok {
			t.Errorf("latency summary lacks %q: %v", k, send)
		}
	}
	if send["count"] != float64(1) {
		t.Errorf("reset answered %v, want the numbers before the reset", send)
	}
	if got := r.Snapshot().Latencies["send"].Count; got != 0 {
		t.Errorf("after reset count = %d", got)
	}

	rec = httptest.NewRecorder()
	r.MetricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{`wpe_latency_seconds_count{backend="rabbitmq",name="send",pair="queue",service="rabbitmq"} 1`, `wpe_events_total{backend="rabbitmq",name="enqueued"`, "go_goroutines"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
