package main

import (
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/migrations"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/postgres"
)

// TestRecordUpdatesWalkThePrimaryKey: with statistics that say almost no
// task is open (a long-lived tasks table, a backlog below the analyze
// threshold), the claim and the completions still find task records
// through the primary key. Written "status IN (...)", the status condition
// made tasks_open (status <> 'done') look like a one-row index: every
// claim and completion walked the whole open backlog and compared each row
// with every id of the batch.
func TestRecordUpdatesWalkThePrimaryKey(t *testing.T) {
	t.Parallel()
	url := kittest.PostgresURL(t)
	schema := kittest.Schema(t, url)
	pool, err := postgres.OpenMigrated(kittest.Context(t, time.Minute), postgres.Config{URL: url, Schema: schema, MaxConns: 2}, migrations.MustFS("queue"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	ids := postgres.UUIDs(kittest.StaleOpenTasks(t, pool, 20000, 2000)[:64])
	texts, delays := make([]string, 64), make([]int64, 64)
	for name, c := range map[string]struct {
		sql  string
		args []any
	}{
		"claim": {claimSQL, []any{64, 30000}},
		"stale": {staleSQL, []any{ids}},
		"done":  {doneSQL, []any{ids}},
		"retry": {retrySQL, []any{ids, delays, texts}},
		"dead":  {deadSQL, []any{ids, texts}},
	} {
		plan := kittest.Explain(t, pool, c.sql, c.args...)
		if strings.Contains(plan, "tasks_open") || !strings.Contains(plan, "tasks_pkey") {
			t.Errorf("%s: want primary key lookups of tasks, got\n%s", name, plan)
		}
	}
}
