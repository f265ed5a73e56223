package main

import (
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue/conformance"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// TestServiceVacuumsTheHotTable: once more than vacuumChurn tasks have
// finished, the service vacuums queue_jobs itself (pg_stat_user_tables
// counts a manual vacuum), without waiting for autovacuum's next visit;
// with VACUUM_INTERVAL=0 it leaves the table alone.
func TestServiceVacuumsTheHotTable(t *testing.T) {
	t.Parallel()
	vacuums := func(t testing.TB, sc schema) int {
		return scalar[int](t, sc.pool, `SELECT vacuum_count FROM pg_stat_user_tables WHERE relid = 'queue_jobs'::regclass`)
	}
	for _, c := range []struct {
		interval string
		want     bool
	}{{"100ms", true}, {"0", false}} {
		t.Run("VACUUM_INTERVAL="+c.interval, func(t *testing.T) {
			t.Parallel()
			sc := newSchema(t)
			worker := sc.start(t, conformance.Settings{Workers: 8}, map[string]string{"VACUUM_INTERVAL": c.interval})
			for range 3 {
				post(t, worker.URL(), 500)
			}
			kittest.Eventually(t, 60*time.Second, "1500 tasks done", func() bool { return doneCount(t, sc.pool) == 1500 })
			if !c.want {
				time.Sleep(500 * time.Millisecond) // five intervals of the other case
				if n := worker.App().vacuums.Load(); n != 0 {
					t.Errorf("VACUUM_INTERVAL=0 ran %d vacuums", n)
				}
				return
			}
			kittest.Eventually(t, 30*time.Second, "a vacuum by the service", func() bool {
				return worker.App().vacuums.Load() >= 1 && vacuums(t, sc) >= 1
			})
		})
	}
}
