package records

import (
	"io/fs"
	"os"
	"testing"

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
	migrations, err := fs.Sub(os.DirFS("../../../../../migrations"), "queue")
	if err != nil {
		t.Fatal(err)
	}
	pool := kittest.MigratedPool(t, migrations, 2)
	ids := kittest.StaleOpenTasks(t, pool, 20000, 2000)[:64]
	statuses, errs := make([]string, len(ids)), make([]*string, len(ids))
	for i := range ids {
		statuses[i] = "done"
	}
	kittest.UpdatesTasksByPrimaryKey(t, pool, map[string]kittest.Statement{
		"deliverMany": {SQL: deliverMany, Args: []any{postgres.UUIDs(ids)}},
		"finishMany":  {SQL: finishMany, Args: []any{postgres.UUIDs(ids), statuses, errs}},
	})
}
