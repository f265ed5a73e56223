package main

import (
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue/conformance"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// TestRetentionRemovesOnlyDoneTasksPastIt runs the queue pair's retention
// check (conformance.Retention) on this side, then checks this side's own
// table: the queue_jobs rows of the tasks that stayed are untouched.
func TestRetentionRemovesOnlyDoneTasksPastIt(t *testing.T) {
	t.Parallel()
	var tg conformance.Target
	kept := conformance.Retention(t, func(t testing.TB, s conformance.Settings) conformance.Target {
		tg = newTarget(t, s)
		return tg
	})
	if jobs := kittest.Count(t, tg.DB(), `SELECT count(*) FROM queue_jobs WHERE task_id = ANY($1::uuid[])`, kept); jobs != len(kept) {
		t.Errorf("%d queue_jobs rows of the open and dead tasks, want their %d untouched", jobs, len(kept))
	}
}
