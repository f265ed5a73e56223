package experiments

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
)

// runCrash runs e Small (Full with EXPERIMENTS_FULL set) against a
// private cluster and checks the shape of its result.
func runCrash(t *testing.T, e Experiment) Result {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: crash experiments build services and run a private Postgres")
	}
	if _, err := pgBindir(); err != nil {
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	size := Small
	if os.Getenv("EXPERIMENTS_FULL") != "" {
		size = Full // make results' size, to try one by hand
		ctx, cancel = context.WithTimeout(context.Background(), 15*time.Minute)
		defer cancel()
	}
	r, err := e.Run(ctx, Env{Out: logWriter{t}}, size)
	if err != nil {
		t.Fatalf("%s: %v", e.Name, err)
	}
	b, _ := json.MarshalIndent(r, "", "  ")
	t.Logf("%s", b)
	if p := Describe(r); r.Name != e.Name || p.Title == "" || p.Happens == "" || p.Figure == "" || p.UserMust == "" || len(p.Notes) == 0 || len(p.Missing) > 0 {
		t.Errorf("%s: incomplete result: %+v\n%+v", e.Name, r, p)
	}
	return r
}

func TestPostgresRestartUnderLoad(t *testing.T) {
	t.Parallel()
	r := runCrash(t, postgresRestartUnderLoad())
	if r.AckedLost != 0 {
		t.Errorf("acknowledged writes lost across a Postgres restart: %d (%s)", r.AckedLost, Describe(r).Figure)
	}
	for _, side := range restartSides {
		p := strings.ReplaceAll(side, "-", "_") + "_"
		if r.Metrics[driver.Metric(p+"failed_not_503")] != 0 {
			t.Errorf("%s answered a failed request with another status than 503 during the outage: %v", side, Describe(r).Notes)
		}
		if r.Metrics[driver.Metric(p+"recover_s")] < 0 {
			t.Errorf("%s did not recover after Postgres started", side)
		}
	}
}

func TestSynchronousCommitOffCrash(t *testing.T) {
	t.Parallel()
	r := runCrash(t, synchronousCommitOffCrash())
	if r.Metrics["on_acked_lost"] != 0 || !r.LossDocumented {
		t.Errorf("SYNCHRONOUS_COMMIT=on lost acknowledged events: %s", Describe(r).Figure)
	}
	if r.Metrics["on_acked"] == 0 || r.Metrics["off_acked"] == 0 {
		t.Errorf("no acknowledged writes: %s", Describe(r).Figure)
	}
}

func TestUnloggedQueueCrash(t *testing.T) {
	t.Parallel()
	r := runCrash(t, unloggedQueueCrash())
	if r.AckedLost != 0 {
		t.Errorf("tasks lost after a crash: %s", Describe(r).Figure)
	}
	if r.Metrics["queue_rows_after_crash"] != 0 {
		t.Errorf("the unlogged queue_jobs was not emptied by the crash: %s", Describe(r).Figure)
	}
}

func TestSlotWALRetention(t *testing.T) {
	t.Parallel()
	r := runCrash(t, slotWALRetention())
	if r.AckedLost != 0 {
		t.Errorf("events lost after the documented recovery: %s", Describe(r).Figure)
	}
	if r.Metrics["readyz_code"] != 503 || r.Metrics["readyz_names_recovery"] != 1 {
		t.Errorf("/readyz after the slot was lost: %v, want 503 naming pg_drop_replication_slot (%s)", r.Metrics["readyz_code"], Describe(r).Notes)
	}
	if r.Metrics["events_delivered"] != r.Metrics["events_written"] {
		t.Errorf("delivered %v of %v events", r.Metrics["events_delivered"], r.Metrics["events_written"])
	}
	if r.Metrics["checkpoint_max_s"] > r.Metrics["checkpoint_bound_s"] || r.Metrics["checkpoint_bound_s"] == 0 {
		t.Errorf("a CHECKPOINT with the consumer frozen took %v s, bound %v s", r.Metrics["checkpoint_max_s"], r.Metrics["checkpoint_bound_s"])
	}
}

// TestStackTCPSettings: scripts/stack.sh and docker-compose.yml set the
// TCP bounds the slot experiment runs with (stackTCPSettings).
func TestStackTCPSettings(t *testing.T) {
	t.Parallel()
	stack, err := os.ReadFile("../../scripts/stack.sh")
	if err != nil {
		t.Fatal(err)
	}
	compose, err := os.ReadFile("../../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range stackTCPSettings {
		if !strings.Contains(string(stack), "\n"+k+" = "+v+"\n") {
			t.Errorf("scripts/stack.sh does not set %s = %s", k, v)
		}
		if !strings.Contains(string(compose), "- "+k+"="+v+"\n") {
			t.Errorf("docker-compose.yml does not set %s=%s", k, v)
		}
	}
}

func TestNoisyNeighbourSlot(t *testing.T) {
	t.Parallel()
	r := runCrash(t, noisyNeighbourSlot())
	if r.AckedLost != 0 {
		t.Errorf("events not delivered after the noise: %s", Describe(r).Figure)
	}
	rounds := 0
	for k, lag := range r.Metrics {
		amount, ok := strings.CutPrefix(string(k), "lag_bytes_")
		if !ok {
			continue
		}
		rounds++
		noise := r.Metrics[driver.Metric("unrelated_wal_bytes_"+amount)]
		// The lag in bytes holds the whole cluster's WAL, that of the log
		// in a database of its own too.
		if lag < noise || r.Metrics[driver.Metric("other_db_lag_bytes_"+amount)] < noise {
			t.Errorf("a slot's lag (%s) does not hold the unrelated WAL: %s", amount, Describe(r).Figure)
		}
		if noise == 0 {
			continue
		}
		// Without add-tables the client receives the noise; with it, or
		// with a publication, it does not.
		all, filter, pub := r.Metrics[driver.Metric("raw_wal2json_all_bytes_received_"+amount)], r.Metrics[driver.Metric("raw_wal2json_filter_bytes_received_"+amount)], r.Metrics[driver.Metric("raw_pgoutput_pub_bytes_received_"+amount)]
		if all < noise/2 || filter >= all || pub >= all {
			t.Errorf("%s: received without a filter %v, with add-tables %v, with a publication %v bytes", amount, all, filter, pub)
		}
		// wal2json sends B and C for each transaction whose rows it
		// dropped; pgoutput skips such empty transactions.
		if strings.HasSuffix(amount, "_small_tx") && pub >= filter {
			t.Errorf("%s: pgoutput received %v bytes, not fewer than wal2json's %v", amount, pub, filter)
		}
	}
	if rounds < 3 {
		t.Errorf("%d consumer-away rounds, want 0 MB, the noise and the one-row transactions: %v", rounds, r.Metrics)
	}
	for _, k := range []driver.Metric{"running_event_s", "running_small_tx_event_s"} {
		if _, ok := r.Metrics[k]; !ok {
			t.Errorf("no %s (consumer kept running): %v", k, r.Metrics)
		}
	}
}

func TestUnloggedCacheCrash(t *testing.T) {
	t.Parallel()
	r := runCrash(t, unloggedCacheCrash())
	m := r.Metrics
	if m["cache_rows_before"] == 0 || m["cache_rows_after_crash"] != 0 {
		t.Errorf("the UNLOGGED cache_kv was not filled, or not emptied by the crash: %s", Describe(r).Figure)
	}
	if m["stale_after_restart"] != 0 {
		t.Errorf("stale values served after the crash: %s", Describe(r).Figure)
	}
	if m["product_updates_lost"] != 0 || !r.LossDocumented {
		t.Errorf("acknowledged product updates lost: %s", Describe(r).Figure)
	}
	if m["kv_gone"] != m["kv_keys"] || r.AckedLost != int64(m["kv_keys"]) {
		t.Errorf("kv values after the crash: %v gone of %v, acked lost %d (%s)", m["kv_gone"], m["kv_keys"], r.AckedLost, Describe(r).Figure)
	}
	if m["stale_before_crash"] != m["products_out_of_band"] {
		t.Errorf("before the crash, %v of %v products updated out of band were served stale, want all (no NOTIFY in CACHE_MODE=unlogged)", m["stale_before_crash"], m["products_out_of_band"])
	}
}
