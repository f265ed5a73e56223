package scenario

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/postgres"
)

// migratedEnv gives each service of p a schema of its own, migrated with
// the pair's goose migrations (the repository's migrations/ folder, as
// the services apply them), and an Env pointing at them.
func migratedEnv(t *testing.T, p Pair) *Env {
	t.Helper()
	url := kittest.PostgresURL(t)
	e := &Env{PostgresURL: url, ServiceEnv: map[string]map[string]string{}}
	for _, s := range p.Services() {
		schema := kittest.Schema(t, url)
		e.ServiceEnv[s.Name] = map[string]string{"DATABASE_SCHEMA": schema, "SLOT_NAME": kittest.UniqueName(t, "slot")}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		pool, err := postgres.OpenMigrated(ctx, postgres.Config{URL: url, Schema: schema, MaxConns: 2, ConnectTimeout: 5 * time.Second},
			os.DirFS(filepath.Join("..", "..", "migrations", p.Name)), nil)
		cancel()
		if err != nil {
			t.Fatalf("migrate %s: %v", schema, err)
		}
		pool.Close()
	}
	return e
}

// tableState returns the state of one table of st, failing when absent.
func tableState(t *testing.T, st []driver.TableState, schema, table string) driver.TableState {
	t.Helper()
	for _, s := range st {
		if s.Schema == schema && s.Table == table {
			return s
		}
	}
	t.Fatalf("no %s.%s in %+v", schema, table, st)
	return driver.TableState{}
}

// TestHistoryThenFreshStart builds the long-lived history in both
// schemas of the queue and log pairs, reads it back (rows kept inside
// retention, dead tuples from the churn), then declares a fresh start:
// every table empty, sizes back to a few pages, no dead tuples.
func TestHistoryThenFreshStart(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: needs the stack's Postgres (DATABASE_URL)")
	}
	t.Parallel()
	const n = 2000
	for _, tc := range []struct {
		p     Pair
		table string
	}{{QueuePair, "tasks"}, {LogPair, "messages"}, {LogPair, "deliveries"}} {
		e := migratedEnv(t, tc.p)
		ctx := context.Background()
		if _, err := e.BuildHistory(ctx, tc.p, n); err != nil {
			t.Fatal(err)
		}
		schemas := e.Schemas(tc.p)
		if len(schemas) != 2 {
			t.Fatalf("schemas %v", schemas)
		}
		var st []driver.TableState
		// n_dead_tup is flushed by the writing backend when it ends:
		// give the statistics a moment.
		deadline := time.Now().Add(5 * time.Second)
		for {
			var err error
			if st, err = e.ReadState(ctx, schemas); err != nil {
				t.Fatal(err)
			}
			if tableState(t, st, schemas[1], tc.table).DeadTuples > 0 || time.Now().After(deadline) {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		for _, sch := range schemas {
			ts := tableState(t, st, sch, tc.table)
			if ts.Rows != n || ts.TotalBytes < 100_000 || ts.DeadTuples < n/10 {
				t.Errorf("%s.%s after a history of %d: %+v", sch, tc.table, n, ts)
			}
		}
		run := driver.NewRun(tc.p.Name, nil, time.Now())
		if err := e.PrepareStart(ctx, run, tc.p, driver.StateFresh); err != nil {
			t.Fatal(err)
		}
		if run.StartState.Mode != driver.StateFresh || len(run.StartState.Tables) != len(st) {
			t.Fatalf("fresh state %+v", run.StartState)
		}
		for _, ts := range run.StartState.Tables {
			if ts.Rows != 0 || ts.DeadTuples != 0 || ts.TotalBytes > 64<<10 {
				t.Errorf("after a fresh start: %+v", ts)
			}
		}
		if err := e.PrepareStart(ctx, run, tc.p, "stale"); err == nil || run.StartState.Error == "" {
			t.Errorf("unknown mode: %v, %+v", err, run.StartState)
		}
	}
}

// TestSplitSteps checks the history files' statement splitting.
func TestSplitSteps(t *testing.T) {
	got := splitSteps("-- header\n\n-- step: one\nSELECT 1;\n-- more\n-- step\nVACUUM\n  x;\n")
	if len(got) != 2 || got[0] != "SELECT 1" || got[1] != "VACUUM\n  x" {
		t.Errorf("%q", got)
	}
	for _, f := range []string{"sql/history_queue.sql", "sql/history_log.sql"} {
		b, err := historySQL.ReadFile(f)
		if err != nil || len(splitSteps(string(b))) < 4 {
			t.Errorf("%s: %v, %d steps", f, err, len(splitSteps(string(b))))
		}
	}
}
