package experiments

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/raw"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// runSmall runs the experiment named name at Small size against the
// stack and returns its Result, failing the test when it could not
// measure or left a field of the table empty.
func runSmall(t testing.TB, name string) Result {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: needs the stack's Postgres (DATABASE_URL) and pgbouncer (PGBOUNCER_URL)")
	}
	kittest.Server(t, "DATABASE_URL", kittest.DefaultPostgresURL)
	if name == ListenThroughPgBouncer {
		kittest.Server(t, "PGBOUNCER_URL", kittest.DefaultPgBouncerURL)
	}
	xs, err := Select([]string{name})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	f, err := Run(ctx, Env{Out: logWriter{t}}, Small, xs)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Results) != 1 {
		t.Fatalf("%d results", len(f.Results))
	}
	r := f.Results[0]
	if r.Error != "" {
		t.Fatalf("could not measure: %s", r.Error)
	}
	t.Logf("figure: %s", Describe(r).Figure)
	for _, n := range Describe(r).Notes {
		t.Logf("note: %s", n)
	}
	if p := Describe(r); r.Name != name || p.Title == "" || p.Happens == "" || p.Figure == "" || p.UserMust == "" || len(p.Missing) > 0 || r.DurationS <= 0 {
		t.Errorf("incomplete result %+v", r)
	}
	if r.AckedLost > 0 && !r.LossDocumented {
		t.Errorf("%d acknowledged writes lost", r.AckedLost)
	}
	return r
}

// TestNotifySerializesCommits measures every mode at every concurrency,
// hears every committed NOTIFY, and carries the source's answer to the
// version question.
func TestNotifySerializesCommits(t *testing.T) {
	t.Parallel()
	r := runSmall(t, NotifySerializes)
	for _, mode := range raw.NotifyModes {
		for _, n := range raw.NotifyCommitters {
			k := mode + "_" + strconv.Itoa(n)
			if r.Metrics[driver.Metric("tps_"+k)] <= 0 || r.Metrics[driver.Metric("p99_ms_"+k)] <= 0 {
				t.Errorf("%s: tps %v p99 %v", k, r.Metrics[driver.Metric("tps_"+k)], r.Metrics[driver.Metric("p99_ms_"+k)])
			}
		}
	}
	if r.AckedLost != 0 {
		t.Errorf("%d committed NOTIFYs not received", r.AckedLost)
	}
	if !strings.Contains(strings.Join(Describe(r).Notes, " "), "282b1cde9dedf456ecf02eb27caf086023a7bb71") {
		t.Error("the notes do not cite the PostgreSQL 19 commit")
	}
}

// TestListenThroughPgBouncer: the direct listener hears every
// notification, the one through pgbouncer fewer, and no-rabbitmq refuses
// to start with its LISTEN URL on pgbouncer.
func TestListenThroughPgBouncer(t *testing.T) {
	t.Parallel()
	r := runSmall(t, ListenThroughPgBouncer)
	sent := r.Metrics["sent"]
	if sent <= 0 || r.Metrics["received_direct"] != sent || r.AckedLost != 0 {
		t.Errorf("direct: sent %v, received %v", sent, r.Metrics["received_direct"])
	}
	if r.Metrics["received_pgbouncer"] >= sent {
		t.Errorf("through pgbouncer: sent %v, received %v", sent, r.Metrics["received_pgbouncer"])
	}
	if r.Metrics["service_refused"] != 1 {
		t.Errorf("the service did not refuse: %s", Describe(r).Figure)
	}
}

// TestCommitOrderGap: the watermark cursor reads every committed event.
// (Whether the global_pos cursor misses some in a small run is chance, so
// it is logged, not asserted.)
func TestCommitOrderGap(t *testing.T) {
	t.Parallel()
	r := runSmall(t, CommitOrderGap)
	if r.Metrics["committed"] <= 0 {
		t.Fatalf("nothing committed: %v", r.Metrics)
	}
	if r.AckedLost != 0 || r.Metrics["watermark_cursor_missed"] != 0 {
		t.Errorf("the watermark cursor missed %v events", r.Metrics["watermark_cursor_missed"])
	}
}

// TestToastRewrite prices every update of every size and compression.
func TestToastRewrite(t *testing.T) {
	t.Parallel()
	r := runSmall(t, ToastRewrite)
	for _, c := range toastCompressions {
		for _, sz := range toastSizes {
			for _, op := range toastOps {
				k := c + "_" + sizeName(sz) + "_" + op
				if r.Metrics[driver.Metric("wal_bytes_min_"+k)] <= 0 || r.Metrics[driver.Metric("ms_"+k)] <= 0 {
					t.Errorf("%s: WAL %v, %v ms", k, r.Metrics[driver.Metric("wal_bytes_min_"+k)], r.Metrics[driver.Metric("ms_"+k)])
				}
			}
		}
	}
}
