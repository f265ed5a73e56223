package main

import (
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/migrations"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// TestStrandedClaimWalksThePrimaryKey: with statistics that say almost no
// task is open (a long-lived tasks table, a backlog below the analyze
// threshold), the reconciler's claim finds the tasks it marks through the
// primary key. Its search for stranded tasks walks tasks_open, as it
// should (oldest first, among the open tasks); the UPDATE of the ids it
// found must not walk the open backlog again for each pass.
func TestStrandedClaimWalksThePrimaryKey(t *testing.T) {
	t.Parallel()
	pool := kittest.MigratedPool(t, migrations.MustFS("queue"), 2)
	kittest.StaleOpenTasks(t, pool, 20000, 2000)
	plan := kittest.Explain(t, pool, claimStranded, int64(time.Minute/time.Microsecond), 64)
	// The search (tasks s) walks tasks_open; the UPDATE (tasks t) must
	// not, and only it can use tasks_pkey.
	if strings.Contains(plan, "using tasks_open on tasks t ") || !strings.Contains(plan, "tasks_pkey") {
		t.Errorf("want the UPDATE to look tasks t up by tasks_pkey, got\n%s", plan)
	}
}
