package eventstore

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/segmentio/kafka-go"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/migrations"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/postgres"
)

func causalNear(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// TestFitLine: least squares recovers an exact line, computes the slope,
// intercept and R² of a noisy set by hand, calls a flat set fully
// explained, and refuses what is not a line.
func TestFitLine(t *testing.T) {
	t.Parallel()
	f, err := FitLine([]float64{0, 10, 20, 30}, []float64{3, 23, 43, 63})
	if err != nil || !causalNear(f.Slope, 2) || !causalNear(f.Intercept, 3) || !causalNear(f.R2, 1) || f.N != 4 || !causalNear(f.At(100), 203) {
		t.Errorf("exact line: %+v %v", f, err)
	}
	// x̄ 2.5, ȳ 3.75, Sxy 3.5, Sxx 5, Syy 4.75.
	f, err = FitLine([]float64{1, 2, 3, 4}, []float64{2, 4, 5, 4})
	if err != nil || !causalNear(f.Slope, 0.7) || !causalNear(f.Intercept, 2) || !causalNear(f.R2, 3.5*3.5/(5*4.75)) {
		t.Errorf("noisy set: %+v %v", f, err)
	}
	f, err = FitLine([]float64{1, 2, 3}, []float64{5, 5, 5})
	if err != nil || f.Slope != 0 || f.Intercept != 5 || f.R2 != 1 {
		t.Errorf("flat set: %+v %v", f, err)
	}
	for _, c := range [][2][]float64{{{1}, {1}}, {{2, 2, 2}, {1, 2, 3}}, {nil, nil}} {
		if _, err := FitLine(c[0], c[1]); !errors.Is(err, ErrFewPoints) {
			t.Errorf("FitLine(%v, %v): %v, want ErrFewPoints", c[0], c[1], err)
		}
	}
	if _, err := FitLine([]float64{1, 2}, []float64{1}); err == nil {
		t.Error("x and y of different lengths fitted")
	}
}

// TestPercentile: nearest rank, so p50 of nine reads is the fifth and
// p99 of fewer than a hundred is the slowest.
func TestPercentile(t *testing.T) {
	t.Parallel()
	xs := []float64{9, 1, 8, 2, 7, 3, 6, 4, 5}
	if p := NearestRank(xs, 0.5); p != 5 {
		t.Errorf("p50 %v", p)
	}
	if p := NearestRank(xs, 0.99); p != 9 {
		t.Errorf("p99 %v", p)
	}
	if xs[0] != 9 {
		t.Error("Percentile sorted its input")
	}
	if !math.IsNaN(NearestRank(nil, 0.5)) {
		t.Error("p50 of nothing is a number")
	}
}

// TestCausalOptions: the default run has at least four sizes and leaves
// 5 M to -causal-max, the estimate of the default run fits the results
// run's six minutes, and settings that cannot run are named.
func TestCausalOptions(t *testing.T) {
	t.Parallel()
	o := DefaultCausalOptions()
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := o.Run(); len(got) < 4 || got[len(got)-1] != 1_000_000 {
		t.Errorf("default sizes %v: want ≥ 4, up to 1 M", got)
	}
	if est := CausalEstimate(o); est.Typical <= 0 || est.Typical > 6*time.Minute {
		t.Errorf("default estimate %v, want within the 6 minutes budgeted", est.Typical)
	}
	o.Max = 5_000_000
	if got := o.Run(); got[len(got)-1] != 5_000_000 {
		t.Errorf("-causal-max 5000000 runs %v", got)
	}
	sizes, err := ParseCausalSizes("1K, 5000,10k,2M")
	if err != nil || len(sizes) != 4 || sizes[0] != 1000 || sizes[2] != 10_000 || sizes[3] != 2_000_000 {
		t.Errorf("ParseCausalSizes: %v %v", sizes, err)
	}
	if _, err := ParseCausalSizes("10,x"); err == nil || !strings.Contains(err.Error(), `"x"`) {
		t.Errorf("bad size: %v", err)
	}
	for _, c := range []struct {
		edit func(*CausalOptions)
		want string
	}{
		{func(o *CausalOptions) { o.Max = 10 }, "-causal-max"},
		{func(o *CausalOptions) { o.Sizes = []int64{100, 10} }, "increasing"},
		{func(o *CausalOptions) { o.Streams = []int{20_000} }, "-causal-streams"},
		{func(o *CausalOptions) { o.Reads = 0 }, "-causal-reads"},
		{func(o *CausalOptions) { o.KeyedPartitions = 1 }, "-causal-keyed-partitions"},
	} {
		o := DefaultCausalOptions()
		c.edit(&o)
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("want an error naming %s, got %v", c.want, err)
		}
	}
}

// TestCausalPointNames: a point's name carries its stream and size.
func TestCausalPointNames(t *testing.T) {
	t.Parallel()
	n, s, ok := parseCausalPointName(causalPointName(1000, 300_000))
	if !ok || n != 1000 || s != 300_000 {
		t.Errorf("round trip: %d %d %v", n, s, ok)
	}
	if _, _, ok := parseCausalPointName("eventstore.point-read"); ok {
		t.Error("a foreign name parsed")
	}
}

// TestCausalReadSQLIsTheService: the statement explainCausalRead runs under
// EXPLAIN is no-kurrentdb's read, character for character.
func TestCausalReadSQLIsTheService(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("..", "..", "services", "no-kurrentdb", "store.go"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "const readSQL = `")
	sql, _, ok2 := strings.Cut(rest, "`")
	if !ok || !ok2 {
		t.Fatal("no readSQL in services/no-kurrentdb/store.go")
	}
	if sql != causalReadSQL {
		t.Errorf("causalReadSQL differs from no-kurrentdb's readSQL:\n%s\nvs\n%s", causalReadSQL, sql)
	}
}

// TestParseExplain reads the rows visited and buffers of a plan in the
// shape the service's read gets: an index-only max() and an index scan
// under a limit, with rows removed by a filter counted as touched and a
// subquery scan's rows (read from its child) not counted again.
func TestParseExplain(t *testing.T) {
	t.Parallel()
	plan := `[{"Plan": {"Node Type": "Sort", "Actual Rows": 1000, "Actual Loops": 1, "Shared Hit Blocks": 40, "Shared Read Blocks": 2,
	  "Plans": [{"Node Type": "Nested Loop", "Actual Rows": 1000, "Actual Loops": 1,
	    "Plans": [{"Node Type": "Result", "Actual Rows": 1, "Actual Loops": 1,
	        "Plans": [{"Node Type": "Index Only Scan", "Relation Name": "events", "Actual Rows": 1, "Actual Loops": 1, "Heap Fetches": 0}]},
	      {"Node Type": "Subquery Scan", "Actual Rows": 1000, "Actual Loops": 1,
	        "Plans": [{"Node Type": "Limit", "Actual Rows": 1000, "Actual Loops": 1,
	          "Plans": [{"Node Type": "Index Scan", "Relation Name": "events", "Actual Rows": 1000, "Actual Loops": 1, "Rows Removed by Filter": 5}]}]}]}]},
	  "Execution Time": 1.2}]`
	s, err := parseCausalExplain([]byte(plan))
	if err != nil || s.Rows != 1006 || s.Buffers != 42 {
		t.Errorf("parseExplain: %+v %v, want 1006 rows, 42 buffers", s, err)
	}
	if _, err := parseCausalExplain([]byte(`{}`)); err == nil {
		t.Error("not a plan, parsed")
	}
}

// causalFixture is a results run in RunCausal's shape: three engines, one
// 100-event stream, four sizes; Kafka's read time and records scanned
// grow with the store, Postgres's do not, and the keyed side's read at
// the largest size failed.
func causalFixture(t testing.TB) *driver.Run {
	t.Helper()
	o := CausalOptions{Sizes: []int64{1000, 10_000, 100_000, 1_000_000}, Max: 1_000_000, Streams: []int{100}, Reads: 3, FillStreams: 10, KeyedPartitions: 4}
	run := driver.NewRun(CausalCommand, nil, time.Date(2026, 12, 1, 23, 0, 0, 0, time.UTC))
	sides := causalSides(o, "fixture", run.StartedAt)
	var engines []*Engine
	var fills []CausalFill
	for _, s := range sides {
		engines = append(engines, &s.Engine)
	}
	run.Settings["engines"], run.Settings["causal_options"] = engines, o
	run.Settings["backend_timeout_s"] = CausalBackendTimeout.Seconds()
	for _, size := range o.Run() {
		for _, s := range sides {
			n := size
			fills = append(fills, CausalFill{Engine: s.Name, Size: size, Records: &n})
		}
		p := driver.Point{Scenario: CausalPoint, Name: causalPointName(100, size), Sides: []string{sides[0].Name, sides[1].Name, sides[2].Name}}
		if size == 1_000_000 {
			p.FailSide(KeyedName, "read causal-fixture-read-100: answered 503: kafka fetch timed out")
		}
		x := float64(size)
		err := driver.RunPoint(context.Background(), &p, o.Reads, func(_ context.Context, svc string, round int) (*driver.SideResult, error) {
			jitter := float64(round) * 0.1
			switch svc {
			case "no-kurrentdb":
				return &driver.SideResult{Metrics: map[driver.Metric]float64{"read_ms": 2 + jitter, "rows_touched": 101, "shared_buffers": 9}}, nil
			case "kafka-eventstore":
				return &driver.SideResult{Metrics: map[driver.Metric]float64{"read_ms": 1 + x/1000 + jitter, "records_scanned": x}}, nil
			}
			return &driver.SideResult{Metrics: map[driver.Metric]float64{"read_ms": 1 + x/4000 + jitter, "records_scanned": x / 4}}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		run.Points = append(run.Points, p)
	}
	run.Settings["fills"] = fills
	return run
}

// TestCausalResultsAndFits writes the fixture as a results file and reads
// it back: every size of every engine is a row with its measured store
// size, percentiles and records scanned; the keyed side's failed read is
// a row with its reason, left out of its fit and named there; Kafka's
// slope is its 1 ms per thousand records with all of its growth due to
// them, Postgres's is flat.
func TestCausalResultsAndFits(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	run := causalFixture(t)
	if p, err := driver.Prose(run); err != nil || len(p) > 0 {
		t.Errorf("the run holds sentences (%v): %q", err, p)
	}
	if _, err := driver.WriteRun(dir, run); err != nil {
		t.Fatal(err)
	}
	all, err := Load(dir)
	res := all.Causal
	if err != nil || res == nil {
		t.Fatalf("Load: causal %v, %v", res, err)
	}
	if len(res.Rows) != 12 || res.BackendTimeoutS != 25 || res.FillMethod != CausalFillMethod {
		t.Fatalf("%d rows, timeout %v, fill method %q", len(res.Rows), res.BackendTimeoutS, res.FillMethod)
	}
	var failed int
	for _, r := range res.Rows {
		if r.Failed != "" {
			failed++
			if r.Engine != KeyedName || r.Size != 1_000_000 || !strings.Contains(r.Failed, "503") {
				t.Errorf("failed row %+v", r)
			}
			continue
		}
		if r.Records == nil || *r.Records != r.Size || len(r.ReadsMS) != 3 || r.Scanned == nil || r.P99MS < r.P50MS {
			t.Errorf("row %+v", r)
		}
		if r.Engine == "no-kurrentdb" && (r.Buffers == nil || *r.Scanned != 101) {
			t.Errorf("postgres row %+v", r)
		}
	}
	if failed != 1 {
		t.Errorf("%d failed rows, want 1", failed)
	}
	fits := res.Fits()
	if len(fits) != 3 {
		t.Fatalf("%d fits", len(fits))
	}
	k, pg, keyed := fits[1], fits[0], fits[2]
	if k.Engine != "kafka-eventstore" || k.Sizes != 4 || !causalNear(k.Time.Slope*1e6, 1000) || k.Scan == nil || !causalNear(k.Scan.Slope, 1) || k.GrowthShare() < 0.99 {
		t.Errorf("kafka fit %+v share %v", k, k.GrowthShare())
	}
	if pg.Sizes != 4 || math.Abs(pg.Time.Slope) > 1e-12 || pg.Scan == nil || pg.Scan.Slope != 0 || math.Abs(pg.GrowthShare()) > 1e-6 {
		t.Errorf("postgres fit %+v", pg)
	}
	if keyed.Sizes != 3 || len(keyed.Failed) != 1 || !strings.Contains(keyed.Failed[0], "1000000: failed: ") || !causalNear(keyed.Scan.Slope, 0.25) {
		t.Errorf("keyed fit %+v", keyed)
	}
	if none, err := Load(t.TempDir()); none.Causal != nil || err != nil {
		t.Errorf("no results file: %v %v", none, err)
	}
}

// TestCausalFillOnRealKafka produces fill events into a keyed topic of
// three partitions: the topic then holds exactly that many records, each
// in the partition the service reads its stream from, with the
// service's envelope as its value.
func TestCausalFillOnRealKafka(t *testing.T) {
	ctx, brokers, topic := kafkaBenchTopic(t, func(ctx context.Context, brokers, topic string) error {
		return CreateTopicPartitions(ctx, brokers, topic, 3)
	})
	c := &causalRun{o: CausalOptions{KafkaBrokers: brokers, FillStreams: 7}, id: "t", filled: map[string]int64{}}
	s := &CausalSide{Engine: Engine{Name: KeyedName, Backend: "kafka", Partitions: 3}, Store: topic}
	if err := c.fillKafka(ctx, s, 1200); err != nil {
		t.Fatal(err)
	}
	if err := c.fillKafka(ctx, s, 300); err != nil {
		t.Fatal(err)
	}
	if n, err := c.records(ctx, s); err != nil || n != 1500 || c.filled[KeyedName] != 1500 {
		t.Fatalf("records %d (%v), filled %d; want 1500", n, err, c.filled[KeyedName])
	}
	seen := 0
	for p := range 3 {
		conn, err := kafka.DialLeader(ctx, "tcp", strings.Split(brokers, ",")[0], topic, p)
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
		first, last, err := conn.ReadOffsets()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Seek(first, kafka.SeekAbsolute); err != nil {
			t.Fatal(err)
		}
		b := conn.ReadBatch(1, 10<<20)
		for off := first; off < last; off++ {
			m, err := b.ReadMessage()
			if err != nil {
				t.Fatal(err)
			}
			want := kafka.Murmur2Balancer{Consistent: true}.Balance(kafka.Message{Key: m.Key}, 0, 1, 2)
			if want != p || !strings.HasPrefix(string(m.Key), "causal-t-fill-") || !strings.HasPrefix(string(m.Value), `{"type":"OxygenAdded","data":{"liters":1,"n":`) || !strings.HasSuffix(string(m.Value), `},"metadata":{}}`) {
				t.Fatalf("partition %d holds %s=%s (its partition is %d)", p, m.Key, m.Value, want)
			}
			seen++
		}
		b.Close()
		conn.Close()
	}
	if seen != 1500 {
		t.Errorf("read %d records back, want 1500", seen)
	}
}

// TestCausalFillOnRealPostgres COPYs fill events into the service's own
// events table (its migrations, a schema of the test's): the table holds
// them, a fill stream reads back in version order through the service's
// read statement under EXPLAIN, which counts at least its rows, and the
// schema is dropped; only the experiment's schemas can be.
func TestCausalFillOnRealPostgres(t *testing.T) {
	ctx, url := realPostgres(t)
	schema := CausalSchemaPrefix + "test_" + runID()
	pool, err := postgres.OpenMigrated(ctx, postgres.Config{URL: url, Schema: schema}, migrations.MustFS("eventstore"), nil)
	if err != nil {
		t.Fatal(err)
	}
	pool.Close()
	t.Cleanup(func() {
		if err := dropCausalSchema(context.Background(), url, schema); err != nil {
			t.Error(err)
		}
	})
	c := &causalRun{o: CausalOptions{DatabaseURL: url, FillStreams: 10}, id: "t", filled: map[string]int64{}}
	s := &CausalSide{Engine: Engine{Name: "no-kurrentdb", Backend: "postgres"}, Store: schema}
	if err := c.fillPostgres(ctx, s, causalCopyChunk+500); err != nil {
		t.Fatal(err)
	}
	if err := c.fillPostgres(ctx, s, 100); err != nil {
		t.Fatal(err)
	}
	if err := causalVacuum(ctx, url, schema); err != nil {
		t.Fatal(err)
	}
	if n, err := c.records(ctx, s); err != nil || n != causalCopyChunk+600 {
		t.Fatalf("records %d (%v), want %d", n, err, causalCopyChunk+600)
	}
	// Fill stream 3 holds events 3, 13, 23, … as versions 0, 1, 2, ….
	var versions, ns []int64
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `SELECT version, (data->>'n')::bigint FROM `+schema+`.events WHERE stream_id = 'causal-t-fill-3' ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var v, n int64
		if err := rows.Scan(&v, &n); err != nil {
			t.Fatal(err)
		}
		versions, ns = append(versions, v), append(ns, n)
	}
	if rows.Err() != nil || len(versions) != (causalCopyChunk+600)/10 || versions[5] != 5 || ns[5] != 53 {
		t.Fatalf("fill stream 3: %d events, %v", len(versions), rows.Err())
	}
	sc, err := explainCausalRead(ctx, url, schema, "causal-t-fill-3", 1000)
	if err != nil || sc.Rows < 1000 || sc.Buffers <= 0 {
		t.Errorf("EXPLAIN of a 1,000-event read: %+v %v", sc, err)
	}
	if err := dropCausalSchema(ctx, url, "eventstore"); err == nil {
		t.Error("the service's own schema could be dropped")
	}
}

// TestCausalStepNeverReached: a run that ended before its last step has
// that step's rows failed with the reason, not missing.
func TestCausalStepNeverReached(t *testing.T) {
	t.Parallel()
	run := causalFixture(t)
	run.Points = run.Points[:len(run.Points)-1]
	run.Aborted = "context canceled"
	res, err := CausalFromRun(run)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range res.Rows {
		if r.Size == 1_000_000 {
			n++
			if r.Failed != "the run ended before this step (context canceled)" {
				t.Errorf("row %+v", r)
			}
		}
	}
	if n != 3 || len(res.Rows) != 12 {
		t.Errorf("%d rows at 1 M, %d in all; want 3 and 12", n, len(res.Rows))
	}
}
