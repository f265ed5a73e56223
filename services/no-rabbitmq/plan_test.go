package main

import (
	"testing"

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
	pool := kittest.MigratedPool(t, migrations.MustFS("queue"), 2)
	ids := postgres.UUIDs(kittest.StaleOpenTasks(t, pool, 20000, 2000)[:64])
	texts, delays := make([]string, 64), make([]int64, 64)
	kittest.UpdatesTasksByPrimaryKey(t, pool, map[string]kittest.Statement{
		"claim": {SQL: claimSQL, Args: []any{64, 30000}},
		"stale": {SQL: staleSQL, Args: []any{ids}},
		"done":  {SQL: doneSQL, Args: []any{ids}},
		"retry": {SQL: retrySQL, Args: []any{ids, delays, texts}},
		"dead":  {SQL: deadSQL, Args: []any{ids, texts}},
	})
}
