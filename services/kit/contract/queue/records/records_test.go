package records

import (
	"io/fs"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/postgres"
)

// TestByIDUpdatesWalkThePrimaryKey: with statistics that say almost no
// task is open (a long-lived table, a backlog below the analyze
// threshold), the statements that update task records by id still look
// them up through the primary key. Written "status IN (...)", the status
// condition made tasks_open (status <> 'done') look like a one-row index:
// the planner walked the whole open backlog for every batch, comparing
// each row with every id (the rabbitmq side stalled for a second per
// record batch at batch size 1000).
func TestByIDUpdatesWalkThePrimaryKey(t *testing.T) {
	t.Parallel()
	url := kittest.PostgresURL(t)
	schema := kittest.Schema(t, url)
	migrations, err := fs.Sub(os.DirFS("../../../../../migrations"), "queue")
	if err != nil {
		t.Fatal(err)
	}
	pool, err := postgres.OpenMigrated(kittest.Context(t, time.Minute), postgres.Config{URL: url, Schema: schema, MaxConns: 2}, migrations, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	ids := kittest.StaleOpenTasks(t, pool, 20000, 2000)[:64]
	statuses, errs := make([]string, len(ids)), make([]*string, len(ids))
	for i := range ids {
		statuses[i] = "done"
	}
	for name, c := range map[string]struct {
		sql  string
		args []any
	}{
		"deliverMany": {deliverMany, []any{postgres.UUIDs(ids)}},
		"finishMany":  {finishMany, []any{postgres.UUIDs(ids), statuses, errs}},
	} {
		plan := kittest.Explain(t, pool, c.sql, c.args...)
		if strings.Contains(plan, "tasks_open") || !strings.Contains(plan, "tasks_pkey") {
			t.Errorf("%s: want a primary key lookup per id, got\n%s", name, plan)
		}
	}
}
