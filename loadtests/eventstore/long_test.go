package eventstore

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	contract "github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/eventstore"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/eventstore/memory"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/stats"
)

// serveMemoryEventStore serves the event store contract's in-memory
// reference backend (the one the kit's -short conformance run uses) on a
// TCP port of this process and returns its base URL. It stands in for a
// service so that the scenarios' bookkeeping can be checked without the
// stack; the figures themselves only mean something on the real ones.
func serveMemoryEventStore(t testing.TB) string {
	t.Helper()
	svc := kittest.NewService(t, stats.Info{Service: "no-kurrentdb", Pair: "eventstore", Backend: "memory"}, 0, contract.LatencyNames, contract.CounterNames)
	contract.Mount(svc.Router, new(memory.Backend), contract.Options{Stats: svc.Stats, Stopping: svc.Stopping()})
	return kittest.Serve(t, svc)
}

// TestExpectedTank: the fold of a long stream's first events, and
// checkFold refusing a fold that differs from it.
func TestExpectedTank(t *testing.T) {
	got := expectedTank(6) // registered, four OxygenAdded of 1, one OxygenConsumed of 2
	if want := (tank{Events: 6, Version: 5, Balance: 2}); got != want {
		t.Fatalf("expectedTank(6) = %+v, want %+v", got, want)
	}
	if err := checkFold(got, got); err != nil {
		t.Error(err)
	}
	short := got
	short.Events--
	if err := checkFold(short, got); err == nil || !strings.Contains(err.Error(), "5 events") {
		t.Errorf("a fold missing an event: %v", err)
	}
}

// TestLongFlags: -sizes parses a list and refuses what is not a stream
// length; Validate names the setting that cannot run.
func TestLongFlags(t *testing.T) {
	o := DefaultLongOptions()
	fs := flag.NewFlagSet("eventstore-long", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.Register(fs)
	if err := fs.Parse([]string{"-sizes", "100000, 1000000", "-loads", "1"}); err != nil {
		t.Fatal(err)
	}
	if len(o.Sizes) != 2 || o.Sizes[1] != 1000000 || o.Loads != 1 {
		t.Fatalf("parsed %+v", o)
	}
	if err := fs.Parse([]string{"-sizes", "100,x"}); err == nil {
		t.Error("-sizes 100,x was accepted")
	}
	for _, c := range []struct {
		edit func(*LongOptions)
		want string
	}{
		{func(o *LongOptions) { o.Sizes = []int{500} }, "sizes"},
		{func(o *LongOptions) { o.Page = 10001 }, "page"},
		{func(o *LongOptions) { o.Loads = 0 }, "loads"},
		{func(o *LongOptions) { o.SnapshotEvery = 1 }, "snapshot-every"},
	} {
		o := DefaultLongOptions()
		c.edit(&o)
		if err := o.Validate(); err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("Validate() = %v, want an error naming %s", err, c.want)
		}
	}
	co := DefaultCleanupOptions()
	co.Batch = 0
	if err := co.Validate(); err == nil || !strings.HasPrefix(err.Error(), "batch") {
		t.Errorf("cleanup Validate() = %v, want an error naming batch", err)
	}
	if err := DefaultCleanupOptions().Validate(); err != nil {
		t.Error(err)
	}
}

// TestProcessMemory: the bench finds the process listening on a port
// (here itself), reads its memory, and refuses a service on another
// machine.
func TestProcessMemory(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	pid, err := servicePID("http://" + ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if pid != strconv.Itoa(os.Getpid()) {
		t.Fatalf("port %s: pid %s, want this test's %d", ln.Addr(), pid, os.Getpid())
	}
	mem, err := readProcMem(pid)
	if err != nil || mem.RSS <= 0 || mem.HWM < mem.RSS {
		t.Fatalf("readProcMem: %+v, %v", mem, err)
	}
	m := map[driver.Metric]float64{}
	p := startMem(pid, nil)
	buf := bytes.Repeat([]byte{1}, 8<<20)
	why := p.finish(m)
	if m["bench_alloc_mb"] < 8 {
		t.Errorf("8 MiB allocated, bench_alloc_mb %v", m["bench_alloc_mb"])
	}
	if _, ok := m["service_rss_after_mb"]; !ok && len(why) == 0 {
		t.Errorf("no service memory and no reason: %v", m)
	}
	_ = buf[len(buf)-1]
	if _, err := servicePID("http://example.com:8090"); err == nil || !strings.Contains(err.Error(), "not on this machine") {
		t.Errorf("a remote service: %v", err)
	}
	m = map[driver.Metric]float64{}
	if why := startMem("", nil).finish(m); len(why) == 0 || m["service_rss_after_mb"] != 0 {
		t.Errorf("no service process: %v %v", why, m)
	}
}

// TestDirBytes counts a directory's allocated space.
func TestDirBytes(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "00000000000000000000.log"), bytes.Repeat([]byte{7}, 100000), 0o644); err != nil {
		t.Fatal(err)
	}
	n, err := dirBytes(dir)
	if err != nil || n < 100000 {
		t.Fatalf("dirBytes = %d, %v; want at least 100000", n, err)
	}
}

// TestLongOnMemoryBackend runs the long-stream scenario against the
// contract's in-memory backend: every load folds the stream written,
// from the snapshot it reads only the tail, and the results file reads
// back with every point valid.
func TestLongOnMemoryBackend(t *testing.T) {
	base := serveMemoryEventStore(t)
	o := DefaultLongOptions()
	o.Targets, o.Out, o.DatabaseURL = "no-kurrentdb="+base, t.TempDir(), ""
	o.Sizes, o.SnapshotEvery, o.Loads, o.Page = []int{2500}, 1000, 1, 1000
	var log bytes.Buffer
	path, err := Long(context.Background(), o, &log)
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	run, err := driver.ReadRun(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(run.Points) != 4 {
		t.Fatalf("%d points, want fill, paged read, service fold, snapshot", len(run.Points))
	}
	for _, p := range run.Points {
		if st := p.SideStatus("no-kurrentdb"); !st.OK() {
			t.Errorf("%s: %s", p.Scenario, st)
		}
	}
	val := func(scenario driver.ScenarioName, name driver.Metric) float64 {
		for _, p := range run.Points {
			if p.Scenario == scenario {
				if m := p.Find(name); m != nil {
					return m.Sides["no-kurrentdb"].Median
				}
			}
		}
		t.Fatalf("%s: no %s", scenario, name)
		return 0
	}
	// 2,500 events: snapshots after 1,000 and 2,000 (the last at least
	// half an interval before the end), appends cut at each.
	if got := val(LongFillPoint, "snapshots"); got != 2 {
		t.Errorf("snapshots %v, want 2", got)
	}
	if got := val(LongFoldPoint, "events_folded"); got != 2500 {
		t.Errorf("paged read folded %v events", got)
	}
	if got := val(LongFoldPoint, "requests"); got != 3 {
		t.Errorf("paged read of 2,500 events in pages of 1,000: %v requests, want 3", got)
	}
	if got, v := val(LongSnapshotPoint, "tail_events"), val(LongSnapshotPoint, "snapshot_version"); got != 500 || v != 1999 {
		t.Errorf("from the snapshot: %v events after version %v, want 500 after 1999", got, v)
	}
	if val(LongFoldPoint, "bench_alloc_mb") <= 0 {
		t.Error("no bench allocation recorded")
	}
	if !strings.Contains(strings.Join(run.Notes, "\n"), "records touched not measured") {
		t.Errorf("a Postgres side without a database URL must say its records touched were not measured: %v", run.Notes)
	}
}

// TestLiveLoadOnMemoryBackend: the cleanup's concurrent appender and
// live subscriber count every append, per phase, and the subscriber
// receives them all.
func TestLiveLoadOnMemoryBackend(t *testing.T) {
	base := serveMemoryEventStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	live, stop, err := runLiveLoad(ctx, &Engine{Name: "no-kurrentdb", URL: base}, "live-"+runID())
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	live.setPhase(phaseDelete)
	time.Sleep(200 * time.Millisecond)
	stop()
	m := map[driver.Metric]float64{}
	live.record(m)
	if m["live_sent"] < 4 || m["live_received"] != m["live_sent"] || m["live_failed"] != 0 {
		t.Fatalf("sent %v, received %v, failed %v", m["live_sent"], m["live_received"], m["live_failed"])
	}
	if m["append_baseline_n"] < 1 || m["append_delete_n"] < 1 || m["append_baseline_n"]+m["append_delete_n"] != m["live_sent"] {
		t.Errorf("per phase: %v", m)
	}
	if _, ok := m["deliver_delete_max_ms"]; !ok {
		t.Errorf("no delivery latency in the delete phase: %v", m)
	}
}

// TestDeleteAndVacuumOnRealPostgres deletes a stream of 1,000 rows in
// batches of 300 from an events table in a schema of its own, with the
// live load on the memory backend: every row and batch is counted, the
// other stream stays, and both phases record their seconds, WAL and the
// table's sizes.
func TestDeleteAndVacuumOnRealPostgres(t *testing.T) {
	ctx, dbURL := realPostgres(t)
	conn, schema := scratchSchema(t, ctx, dbURL, "CREATE TABLE {schema}.events (stream_id text, version bigint, PRIMARY KEY (stream_id, version)); "+
		"INSERT INTO {schema}.events SELECT 'customer', v FROM generate_series(0, 999) v; INSERT INTO {schema}.events VALUES ('other', 0)")
	live, stop, err := runLiveLoad(ctx, &Engine{Name: "no-kurrentdb", URL: serveMemoryEventStore(t)}, "live-"+runID())
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	tbl := cleanupTable{conn: conn, table: pgx.Identifier{schema, "events"}.Sanitize()}
	m := map[driver.Metric]float64{}
	deleted, err := tbl.deleteAndVacuum(ctx, CleanupOptions{StreamEvents: 1000, Batch: 300}, "customer", live, m)
	if err != nil {
		t.Fatal(err)
	}
	if deleted != 1000 || m[MetricEventsDeleted] != 1000 || m[MetricBatches] != 4 {
		t.Errorf("deleted %d (%v rows in %v batches), want 1000 in 4", deleted, m[MetricEventsDeleted], m[MetricBatches])
	}
	var left int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+tbl.table).Scan(&left); err != nil || left != 1 {
		t.Errorf("%d rows left (%v), want the other stream's 1", left, err)
	}
	for _, k := range []driver.Metric{MetricDeleteSeconds, MetricVacuumSeconds, MetricDeleteWALMB, MetricVacuumWALMB, MetricSizeAfterDeleteMB, MetricSizeAfterVacuumMB, MetricReturnedMB} {
		if _, ok := m[k]; !ok {
			t.Errorf("no %s: %v", k, m)
		}
	}
	if m[MetricSizeBeforeMB] <= 0 || m[MetricSizeAfterDeleteMB] <= 0 {
		t.Errorf("table sizes %v before, %v after the delete", m[MetricSizeBeforeMB], m[MetricSizeAfterDeleteMB])
	}
}

// TestKafkaCompactionOnRealKafka runs the compaction policy on the
// stack's Kafka with a small stream: the customer's events disappear, the
// other streams keep only their last event, and the partition's
// directory shrinks.
func TestKafkaCompactionOnRealKafka(t *testing.T) {
	if testing.Short() {
		t.Skip("talks to Kafka and waits for its log cleaner")
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	o := DefaultCleanupOptions()
	o.KafkaBrokers = envOr("KAFKA_BROKERS", o.KafkaBrokers)
	o.StreamEvents, o.Others, o.KafkaWait = 20000, 3, 2*time.Minute
	c, err := kafkaClient(o.KafkaBrokers)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := kafkaLogDir(ctx, c, "", "__consumer_offsets"); err != nil && strings.Contains(err.Error(), "not under") {
		t.Skipf("the broker's log directory is not on this machine: %v", err)
	}
	m := map[driver.Metric]float64{}
	var log bytes.Buffer
	if err := kafkaPolicy(ctx, o, runID(), KafkaCompaction, cleanupOut{m: m, log: &log}); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	if m["customer_before"] != 20000 || m["customer_after"] != 0 {
		t.Errorf("the customer's events: %v → %v, want 20000 → 0", m["customer_before"], m["customer_after"])
	}
	if m["others_after"] != 3 {
		t.Errorf("the other streams after compaction: %v events, want their last one each (3)", m["others_after"])
	}
	if m["dir_mb_after"]*2 > m["dir_mb_before"] {
		t.Errorf("the directory: %v → %v MB", m["dir_mb_before"], m["dir_mb_after"])
	}
}

// TestLiveLoadCountsOnlyAnsweredAppends: an append cut off by the stop
// may be committed and delivered though its answer never came; it counts
// neither as sent nor as received (CI once read "sent 35, received 36"),
// and a delivery seen twice counts once.
func TestLiveLoadCountsOnlyAnsweredAppends(t *testing.T) {
	t0 := time.Now()
	l := &liveLoad{
		sentAt:   []time.Time{t0, t0, t0},
		sentIn:   []string{phaseBaseline, phaseBaseline, phaseDelete},
		answered: []bool{true, true, false},
		gotAt:    map[int]time.Time{},
		appends:  map[string][]float64{},
	}
	ch := make(chan sseMsg, 4)
	for _, i := range []int{0, 2, 0} {
		ch <- sseMsg{Event: "event", At: t0.Add(5 * time.Millisecond), Data: fmt.Sprintf(`{"stream":"s","data":{"i":%d}}`, i)}
	}
	close(ch)
	got := make(chan struct{})
	l.receive(ch, "s", got)
	m := map[driver.Metric]float64{}
	l.record(m)
	if m["live_sent"] != 2 || m["live_received"] != 1 {
		t.Fatalf("sent %v, received %v: want 2 answered, 1 of them delivered", m["live_sent"], m["live_received"])
	}
	if _, ok := m["deliver_"+phaseDelete+"_max_ms"]; ok {
		t.Errorf("the unanswered append's delivery was recorded: %v", m)
	}
	if m["deliver_"+phaseBaseline+"_max_ms"] != 5 {
		t.Errorf("delivery latency %v ms, want 5", m["deliver_"+phaseBaseline+"_max_ms"])
	}
}
