// Not an area of Run: the retention cleaner's test, which the services
// run on their own (it needs EVENT_RETENTION and RETENTION_INTERVAL set).

package conformance

import (
	"net/http"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/cleaner"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// Retention is both sides' test of the retention cleaner on the real
// servers, for a target started with EVENT_RETENTION=1h and a short
// RETENTION_INTERVAL in env (the environment its instances read; Retention
// changes EVENT_RETENTION there and restarts): an event delivered before
// the retention is gone (404, and its deliveries row), one delivered inside
// it reads back, and an undelivered event stays whatever its age, also
// under a retention of 1ms. Rows are backdated rather than waited for.
func Retention(t *testing.T, tg kittest.Target, env map[string]string) {
	t.Helper()
	pool := kittest.Pool(t, env["DATABASE_URL"], env["DATABASE_SCHEMA"])
	ids := writeDelivered(t, tg.URL(), 3)
	old, fresh, undelivered := ids[0], ids[1], ids[2]
	kittest.Exec(t, pool, `UPDATE deliveries SET delivered_at = now() - interval '2 hours' WHERE id = $1`, old)
	// Undelivered, as a row whose produce failed (kafka) would be, and
	// as old as can be.
	kittest.Exec(t, pool, `DELETE FROM deliveries WHERE id = $1`, undelivered)
	kittest.Exec(t, pool, `UPDATE messages SET created_at = now() - interval '30 days' WHERE id = $1`, undelivered)

	kittest.Eventually(t, 10*time.Second, "the event delivered past retention and its deliveries row removed", func() bool {
		return kittest.Status(t, tg.URL()+"/events/"+old) == http.StatusNotFound && kittest.Count(t, pool, `SELECT count(*) FROM deliveries WHERE id = $1`, old) == 0
	})
	// The cleaner deletes, then counts: the counters may trail the rows
	// the test saw gone (CI read retention_removed_deliveries = 0).
	for _, n := range []string{"messages", "deliveries"} {
		kittest.CountersReach(t, 10*time.Second, cleaner.StatRemovedPrefix+n, 1, tg.URL())
	}
	if last := kittest.Counter(t, tg.URL(), cleaner.StatLastRun); time.Since(time.Unix(last, 0)) > time.Minute {
		t.Errorf("/stats %s = %d, want about now", cleaner.StatLastRun, last)
	}
	if s := kittest.Status(t, tg.URL()+"/events/"+fresh); s != http.StatusOK {
		t.Errorf("GET /events/%s (delivered inside retention) = %d, want 200", fresh, s)
	}
	if s := kittest.Status(t, tg.URL()+"/events/"+undelivered); s != http.StatusOK {
		t.Errorf("GET /events/%s (undelivered) = %d, want 200", undelivered, s)
	}

	// A retention of 1ms: every delivered event goes, the undelivered one stays.
	env["EVENT_RETENTION"] = "1ms"
	tg.Restart(t)
	kittest.Eventually(t, 10*time.Second, "the fresh event and its deliveries row removed at 1ms", func() bool {
		return kittest.Status(t, tg.URL()+"/events/"+fresh) == http.StatusNotFound && kittest.Count(t, pool, `SELECT count(*) FROM deliveries WHERE id = $1`, fresh) == 0
	})
	passes := kittest.Counter(t, tg.URL(), cleaner.StatPasses)
	kittest.Eventually(t, 10*time.Second, "two more passes", func() bool { return kittest.Counter(t, tg.URL(), cleaner.StatPasses) >= passes+2 })
	if s := kittest.Status(t, tg.URL()+"/events/"+undelivered); s != http.StatusOK {
		t.Errorf("GET /events/%s (undelivered) = %d at a 1ms retention, want 200: an undelivered event was removed", undelivered, s)
	}
	if e := kittest.Counter(t, tg.URL(), cleaner.StatErrors); e != 0 {
		t.Errorf("/stats %s = %d", cleaner.StatErrors, e)
	}
}

// writeDelivered writes n events in one batch, waits until each is
// delivered, and returns their ids.
func writeDelivered(t testing.TB, base string, n int) []string {
	t.Helper()
	events := make([]map[string]any, n)
	for i := range events {
		events[i] = map[string]any{"type": "retention", "key": "k"}
	}
	var out struct {
		Events []struct {
			ID string `json:"id"`
		} `json:"events"`
	}
	if s, raw := kittest.Do(t, http.MethodPost, base+"/events/batch", map[string]any{"events": events}, &out); s != http.StatusCreated || len(out.Events) != n {
		t.Fatalf("POST /events/batch = %d %s", s, raw)
	}
	ids := make([]string, n)
	for i, e := range out.Events {
		ids[i] = e.ID
		if s, raw := kittest.Do(t, http.MethodGet, base+"/events/"+e.ID+"/wait?timeout=20s", nil, nil); s != http.StatusOK {
			t.Fatalf("wait for %s: %d %s", e.ID, s, raw)
		}
	}
	return ids
}
