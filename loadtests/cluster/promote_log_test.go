package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/launch"
)

// The log lines of no-kafka that say which recovery followed a promotion
// (services/no-kafka/consumer.go and main.go).
const (
	logSlotMissing      = "replication slot is missing"
	logSlotMade         = "made the missing replication slot again"
	logGroupSlotMade    = "made the missing replication slot of a consumer group again"
	promotedGroup       = "promoted"
	groupReadyTimeout   = 2 * time.Minute
	groupSlotNameSuffix = "_g_" + promotedGroup // no-kafka's groupSlot, for a short SLOT_NAME
)

// resyncEvents finds the number of events the resync delivered in that
// line ("events=N" with LOG_FORMAT=text).
var resyncEvents = regexp.MustCompile(logSlotMade + `.* events=(\d+)`)

// TestLogKeepsEventsAcrossPromotion: no-kafka, started as a process with
// DATABASE_URL the multi-host URL, its own schema and slot (SLOT_PLUGIN
// pgoutput on 17+, wal2json before), receives one event at a time through
// POST /events while the synchronous standby is promoted (a switchover,
// then a failover), and after it. Every acknowledged event (201) must be
// delivered (lost: none allowed); redeliveries are counted (at-least-once
// allows them), and so are phantoms: events the consumer had recorded as
// delivered on the old primary that the new primary does not hold.
//
// Which recovery happened is read from the service's log and the slots:
// on 15 and 16 the promoted standby has no slot, so the service must say
// it made the slot again and resynced from the messages table; on 17+
// the slot, made with FAILOVER, is synchronized to the standby
// (sync_replication_slots) before the promotion, the promoted standby
// holds it (failover and synced in pg_replication_slots) and the service
// streams from it: no resync.
//
// A consumer group besides the default one ("promoted", from earliest,
// made before the load) must get every acknowledged event as well,
// through its own slot and the same recovery: made again and resynced
// from the messages table for the group on 15 and 16, its synchronized
// failover slot on 17+.
func TestLogKeepsEventsAcrossPromotion(t *testing.T) {
	url, ctx, l, pool := promotionRig(t, "no-kafka")

	for _, how := range promotions {
		t.Run(how.name, func(t *testing.T) {
			r := wholePG(t, ctx, url)
			failoverSlots := r.top.VersionNum >= 170000
			plugin := "wal2json" // the stack's 15 has it; 18.4 from npm has not
			if failoverSlots {
				plugin = "pgoutput"
			}
			schema := uniqueName(t, "lpromote_")
			slot := schema // with pgoutput also the publication's name
			groupSlot := slot + groupSlotNameSuffix
			t.Cleanup(func() { dropSlots(t, pool, groupSlot); dropLogSchema(t, pool, schema, slot) })
			name := "no-kafka@" + how.name
			// Stopped before the schema and the slot are dropped.
			base, logPath := startService(t, ctx, l, name, map[string]string{
				"DATABASE_URL": url, "DATABASE_SCHEMA": schema, "SLOT_NAME": slot, "SLOT_PLUGIN": plugin,
				"LOG_FORMAT": "text",
			})

			putGroupReady(t, ctx, base, promotedGroup)

			p := startEventProducer(ctx, base)
			w := startDeliveryWatcher(ctx, pool, schema)
			t.Cleanup(func() { p.stop(); w.Stop() }) // on a failure before they are stopped
			p.waitAcked(t, 50)
			if failoverSlots {
				waitSlotSafe(t, ctx, pool, url, mustStandby(t, r, "sync").Host, slot)
				waitSlotSafe(t, ctx, pool, url, mustStandby(t, r, "sync").Host, groupSlot)
			}
			newPrimary := promoteSync(t, ctx, url, r, how)
			// Writes are accepted again after the promotion.
			p.waitAcked(t, p.count()+50)
			acked, failed, seen := p.stop()
			t.Logf("%s from %s to %s (PostgreSQL %d, %s): %d events acknowledged one by one, %d writes refused meanwhile: %s",
				how.name, r.primary, newPrimary, r.top.VersionNum, plugin, len(acked), failed, strings.Join(seen, "; "))

			delivered, missing := waitDelivered(t, ctx, pool, schema, acked)
			observed := w.Stop()
			var st struct {
				Delivered  int64 `json:"delivered"`
				Duplicates int64 `json:"duplicates"`
				Reconnects int64 `json:"reconnects"`
			}
			if code, body, err := driver.Do(ctx, http.MethodGet, base+"/consumer", nil); err != nil || code != http.StatusOK || json.Unmarshal(body, &st) != nil {
				t.Errorf("GET /consumer: %d %s %v", code, body, err)
			}
			phantoms := absentFrom(t, ctx, pool, schema, observed)
			t.Logf("%d of %d acknowledged events delivered, %d not in messages; the consumer delivered %d events, %d more than once (duplicates), reconnected %d times; %d deliveries seen by a reader, %d of them phantoms (absent on %s)",
				delivered, len(acked), missing, st.Delivered, st.Duplicates, st.Reconnects, len(observed), len(phantoms), newPrimary)
			if lost := len(acked) - delivered; lost > 0 {
				t.Errorf("%d acknowledged events lost (%d not in messages, the others not delivered within 3 minutes)", lost, missing)
			}
			inGroup := waitDeliveredToGroup(t, ctx, pool, schema, promotedGroup, acked)
			t.Logf("group %s: %d of %d acknowledged events delivered", promotedGroup, inGroup, len(acked))
			if lost := len(acked) - inGroup; lost > 0 {
				t.Errorf("group %s: %d acknowledged events lost (not delivered to it within 3 minutes)", promotedGroup, lost)
			}
			if len(phantoms) > 0 {
				t.Errorf("%d events delivered on the old primary are absent on the new primary %s (phantoms): %v", len(phantoms), newPrimary, phantoms[:min(5, len(phantoms))])
			}

			b, err := os.ReadFile(logPath)
			if err != nil {
				t.Fatal(err)
			}
			logText := string(b)
			if !failoverSlots {
				// 15: the promoted standby has no slot; the service made it
				// again and resynced from the messages table.
				m := resyncEvents.FindStringSubmatch(logText)
				if !strings.Contains(logText, logSlotMissing) || m == nil {
					t.Fatalf("the service's log (%s) does not say it made the missing slot again and resynced:\n%s", logPath, launch.Tail(logPath, 30))
				}
				t.Logf("recovery: the slot was missing on %s, made again, and the resync delivered %s events from messages", newPrimary, m[1])
				if line := logLine(logText, logGroupSlotMade); line == "" {
					t.Errorf("the service's log (%s) does not say it made group %s's missing slot again and resynced it:\n%s", logPath, promotedGroup, launch.Tail(logPath, 30))
				} else {
					t.Logf("recovery of group %s: %s", promotedGroup, line)
				}
				return
			}
			// 17+: the promoted standby holds the synchronized failover
			// slot, and the service streams from it.
			if strings.Contains(logText, logSlotMissing) {
				t.Errorf("the service found its slot missing on %s, which held a synchronized failover slot:\n%s", newPrimary, launch.Tail(logPath, 30))
			}
			for _, sl := range []string{slot, groupSlot} {
				var fo, synced bool
				if err := pool.QueryRow(ctx, `SELECT failover, synced FROM pg_replication_slots WHERE slot_name = $1`, sl).Scan(&fo, &synced); err != nil {
					t.Fatalf("slot %s on the new primary %s: %v", sl, newPrimary, err)
				}
				if !fo || !synced {
					t.Errorf("slot %s on the new primary %s: failover %v, synced %v; want the synchronized failover slot (both true)", sl, newPrimary, fo, synced)
				} else {
					t.Logf("recovery: %s held the synchronized failover slot %s (failover, synced) and the service streamed from it, no resync", newPrimary, sl)
				}
			}
		})
	}
}

// putGroupReady makes consumer group name from earliest through base's
// PUT /groups/{name} and waits (up to groupReadyTimeout) until GET /groups
// says it is ready and its consumer runs.
func putGroupReady(t testing.TB, ctx context.Context, base, name string) {
	t.Helper()
	code, body, err := driver.Do(ctx, http.MethodPut, base+"/groups/"+name, []byte(`{"from":"earliest"}`))
	if err != nil || (code != http.StatusCreated && code != http.StatusOK) {
		t.Fatalf("PUT /groups/%s: %d %s %v", name, code, body, err)
	}
	deadline := time.Now().Add(groupReadyTimeout)
	for {
		var l struct {
			Groups []struct {
				Name           string
				Ready, Running bool
			}
		}
		code, body, err := driver.Do(ctx, http.MethodGet, base+"/groups", nil)
		if err == nil && code == http.StatusOK && json.Unmarshal(body, &l) == nil {
			for _, g := range l.Groups {
				if g.Name == name && g.Ready && g.Running {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s not ready and running after %v: GET /groups %d %s %v", name, groupReadyTimeout, code, body, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitDeliveredToGroup waits (up to 3 minutes) until every event of ids
// is in schema's group_deliveries for group, and returns how many are.
func waitDeliveredToGroup(t testing.TB, ctx context.Context, pool *pgxpool.Pool, schema, group string, ids []string) int {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		var n int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM `+schema+`.group_deliveries WHERE grp = $1 AND id = ANY($2::uuid[])`, group, ids).Scan(&n)
		if (err == nil && n == len(ids)) || time.Now().After(deadline) {
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// logLine is the first line of text that contains s, "" for none.
func logLine(text, s string) string {
	for line := range strings.Lines(text) {
		if strings.Contains(line, s) {
			return strings.TrimSpace(line)
		}
	}
	return ""
}

// dropSlots drops the named slots where they are inactive on the primary
// (a synchronized copy on a standby goes with each).
func dropSlots(t testing.TB, pool *pgxpool.Pool, slots ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := pool.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = ANY($1) AND NOT active`, slots); err != nil {
		t.Errorf("drop slots %v: %v", slots, err)
	}
}

// dropLogSchema drops what a no-kafka instance made for schema and slot:
// the slot on the primary (a synchronized copy on a standby goes with it),
// the publication (pgoutput) and the schema.
func dropLogSchema(t testing.TB, pool *pgxpool.Pool, schema, slot string) {
	t.Helper()
	dropSlots(t, pool, slot)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, q := range []string{
		"DROP PUBLICATION IF EXISTS " + slot,
		"DROP SCHEMA IF EXISTS " + schema + " CASCADE",
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Errorf("%s: %v", q, err)
		}
	}
}

// waitSlotSafe waits (up to 3 minutes) until the standby at host holds a
// synchronized, persistent copy of the failover slot: a copy stays
// temporary until its consumer has confirmed a position past a
// running-transactions record (docs/cluster.md), and a promotion drops a
// temporary copy. pg_log_standby_snapshot() on the primary writes such a
// record at once (every 2 s here) instead of waiting for the next one
// (every 15 s while busy).
func waitSlotSafe(t testing.TB, ctx context.Context, pool *pgxpool.Pool, url, host, slot string) {
	t.Helper()
	standby := connect(t, ctx, hostConfig(t, url, host))
	start := time.Now()
	for time.Since(start) < 3*time.Minute {
		if _, err := pool.Exec(ctx, "SELECT pg_log_standby_snapshot()"); err != nil {
			t.Fatal(err)
		}
		var state string
		err := standby.QueryRow(ctx, `SELECT coalesce((SELECT CASE WHEN synced AND NOT temporary THEN 'safe' ELSE 'temporary' END
			FROM pg_replication_slots WHERE slot_name = $1), 'none')`, slot).Scan(&state)
		if err != nil {
			t.Fatal(err)
		}
		if state == "safe" {
			t.Logf("slot %s synchronized to the standby %s after %s", slot, host, time.Since(start).Round(100*time.Millisecond))
			return
		}
		time.Sleep(2 * time.Second)
	}
	t.Fatalf("slot %s is not synchronized to the standby %s (persistent, synced) after 3 minutes", slot, host)
}

// startEventProducer posts one event at a time through POST /events,
// every 10 ms; an event is acknowledged with 201 and its id.
func startEventProducer(ctx context.Context, base string) *acker[string] {
	return startAcker(ctx, 10*time.Millisecond, func(ctx context.Context, i int) (string, error) {
		return postForID(ctx, base, "/events", http.StatusCreated, fmt.Appendf(nil, `{"type":"promote","key":"k%d","payload":{"n":%d}}`, i%8, i))
	})
}

// startDeliveryWatcher reads schema's deliveries (new rows by seq)
// through pool until Stop: what it saw on the old primary and the new one
// is missing is a phantom.
func startDeliveryWatcher(ctx context.Context, pool *pgxpool.Pool, schema string) *Seen {
	return StartSeen(ctx, pool, "SELECT id::text, seq FROM "+schema+".deliveries WHERE seq > $1 ORDER BY seq LIMIT 5000")
}

// waitDelivered waits (up to 3 minutes) until every event of ids has a
// delivery in schema, and returns how many have one and how many are not
// in messages at all.
func waitDelivered(t testing.TB, ctx context.Context, pool *pgxpool.Pool, schema string, ids []string) (delivered, missing int) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	q := `SELECT count(d.id), count(*) FILTER (WHERE m.id IS NULL)
	        FROM unnest($1::uuid[]) AS a(id)
	        LEFT JOIN ` + schema + `.messages m ON m.id = a.id
	        LEFT JOIN ` + schema + `.deliveries d ON d.id = a.id`
	for {
		err := pool.QueryRow(ctx, q, ids).Scan(&delivered, &missing)
		if err == nil && delivered == len(ids) {
			return delivered, missing
		}
		if time.Now().After(deadline) {
			if err != nil {
				t.Fatal(err)
			}
			return delivered, missing
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// absentFrom returns the ids that schema's messages table does not hold
// (on the primary the pool is on).
func absentFrom(t testing.TB, ctx context.Context, pool *pgxpool.Pool, schema string, ids []string) []string {
	t.Helper()
	rows, err := pool.Query(ctx, `SELECT a.id::text FROM unnest($1::uuid[]) AS a(id)
		WHERE NOT EXISTS (SELECT 1 FROM `+schema+`.messages m WHERE m.id = a.id)`, ids)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
