package main

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue/conformance"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue/records"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/ids"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/postgres"
)

// TestWorkersKeepWorkingWithTheRequestPoolExhausted: under a batch
// overload the enqueues hold every connection of the requests' pool. The
// fetcher, the completer and the backlog count use the workers' pool
// (WorkerConns), so tasks already queued keep being claimed and
// completed: the intake cannot take the workers' connections.
func TestWorkersKeepWorkingWithTheRequestPoolExhausted(t *testing.T) {
	t.Parallel()
	const n = 200
	sc := newSchema(t)
	in := sc.start(t, conformance.Settings{Workers: 4},
		map[string]string{"DATABASE_MAX_CONNS": "2", "POLL_INTERVAL": "50ms", "MAX_BACKLOG": "1000"})
	kittest.HoldConns(t, in.App().pool)
	tasks := make([]queue.NewTask, n)
	for i := range tasks {
		tasks[i] = queue.NewTask{ID: ids.New(), Kind: "t", Payload: json.RawMessage(`{}`), EnqueuedAt: time.Now()}
	}
	// Queued as an enqueue queues them, through the test's own pool,
	// without a NOTIFY: the fallback poll finds them.
	id, kinds, payloads, fails, at := records.TaskColumns(tasks)
	kittest.Exec(t, sc.pool, enqueueSQL, postgres.UUIDs(id), kinds, payloads, fails, at, "unheard", false)
	kittest.Eventually(t, time.Minute, "every task done with the requests' pool held", func() bool {
		return kittest.Count(t, sc.pool, `SELECT count(*) FROM tasks WHERE status = 'done'`) == n
	})
}
