package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/launch"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/launch/launchtest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/localport"
)

// queueBacklog is how many tasks the queue test queues before the
// promotion: with 2 workers of 10 ms, many are still queued when it comes.
const queueBacklog = 3000

// TestQueueKeepsTasksAcrossPromotion: no-rabbitmq, started as a process
// with DATABASE_URL the multi-host URL and QUEUE_TABLE=unlogged, has a
// backlog of acknowledged tasks and keeps accepting more while the
// synchronous standby is promoted (a switchover, then a failover). The
// UNLOGGED queue table is not replicated (a standby refuses to read it),
// so the promoted standby starts with it empty; the service rebuilds it
// from the logged task records when its LISTEN connection reconnects,
// and every acknowledged task is processed: none lost. Tasks delivered
// more than once (at-least-once: a task whose completion was cut off by
// the promotion runs again) are counted and logged.
func TestQueueKeepsTasksAcrossPromotion(t *testing.T) {
	url, ctx, l, pool := promotionRig(t, "no-rabbitmq")

	for _, how := range promotions {
		t.Run(how.name, func(t *testing.T) {
			r := wholePG(t, ctx, url)
			schema := uniqueName(t, "qpromote_")
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				if _, err := pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE"); err != nil {
					t.Errorf("drop schema %s: %v", schema, err)
				}
			})
			name := "no-rabbitmq@" + how.name
			base, logPath := startService(t, ctx, l, name, map[string]string{
				"DATABASE_URL": url, "DATABASE_SCHEMA": schema, "QUEUE_TABLE": "unlogged",
				"WORKERS": "2", "WORK_MS": "10", "LEASE": "3s", "TASK_RETENTION": "0", "LOG_FORMAT": "text",
			})

			ids := enqueueBacklog(t, ctx, base, queueBacklog)
			// The queue rows are not on the standbys: Postgres refuses to
			// read an UNLOGGED table in recovery (0A000).
			standby := connect(t, ctx, hostConfig(t, url, mustStandby(t, r, "sync").Host))
			var lsn string
			if err := pool.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&lsn); err != nil {
				t.Fatal(err)
			}
			if err := WaitReplayed(ctx, standby, lsn); err != nil { // the schema is there
				t.Fatal(err)
			}
			var n int
			err := standby.QueryRow(ctx, "SELECT count(*) FROM "+schema+".queue_jobs").Scan(&n)
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != "0A000" {
				t.Errorf("reading the UNLOGGED queue_jobs on the standby %s: %d rows, %v; want SQLSTATE 0A000", r.sync, n, err)
			}
			_ = standby.Close(ctx)
			var open int
			if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+schema+".tasks WHERE status <> 'done'").Scan(&open); err != nil {
				t.Fatal(err)
			}

			p := startProducer(ctx, base)
			newPrimary := promoteSync(t, ctx, url, r, how)
			// The service accepts tasks again after the promotion.
			p.waitAcked(t, p.count()+10)
			more, failed, _ := p.stop()
			all := append(ids, more...)
			t.Logf("%s from %s to %s: %d tasks queued before it (%d not done yet when the producer started), %d more accepted one by one around it (%d refused meanwhile)",
				how.name, r.primary, newPrimary, len(ids), open, len(more), failed)

			done, missing, dup := waitDone(t, ctx, pool, schema, all)
			t.Logf("%d of %d acknowledged tasks done, %d without a record, %d delivered more than once (at-least-once)", done, len(all), missing, dup)
			if lost := len(all) - done; lost > 0 {
				t.Errorf("%d acknowledged tasks lost (%d without a record, the others not done within 3 minutes)", lost, missing)
			}
			// The promoted standby's queue_jobs was empty, and the service
			// rebuilt it from the records when its LISTEN connection came
			// back: it says so in its log.
			if b, err := os.ReadFile(logPath); err != nil {
				t.Error(err)
			} else if open > 0 && !strings.Contains(string(b), "re-queued open tasks missing from queue_jobs") {
				t.Errorf("the service's log (%s) does not say it re-queued the open tasks after the promotion:\n%s", logPath, launch.Tail(logPath, 30))
			}
		})
	}
}

// promotionRig is what a service's test across a promotion starts from:
// the cluster's multi-host URL (or a skip), root, a context of 25
// minutes, a launcher of service and a pool on the URL, each closed or
// stopped at the test's end.
func promotionRig(t *testing.T, service string) (string, context.Context, *launch.Launcher, *pgxpool.Pool) {
	t.Helper()
	url := clusterURL(t)
	requireRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	t.Cleanup(cancel)
	l := newLauncher(t, ctx, service)
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return url, ctx, l, pool
}

// newLauncher builds service (a directory of services/) for a test that
// starts it as a process, and stops what it started when the test ends.
func newLauncher(t testing.TB, ctx context.Context, service string) *launch.Launcher {
	t.Helper()
	l := launchtest.New(t)
	if err := l.Build(ctx, service); err != nil {
		t.Fatal(err)
	}
	return l
}

// startService starts name ("service@instance") on a free port with
// env, stops it when the test ends, and returns its base URL and its
// log's path.
func startService(t testing.TB, ctx context.Context, l *launch.Launcher, name string, env map[string]string) (base, logPath string) {
	t.Helper()
	port, err := localport.Free()
	if err != nil {
		t.Fatal(err)
	}
	p, err := l.Start(ctx, name, port, env, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Stop(name, 20*time.Second); err != nil {
			t.Error(err)
		}
	})
	return "http://127.0.0.1:" + strconv.Itoa(port), p.Log
}

// mustStandby is r's standby with sync_state state.
func mustStandby(t testing.TB, r pgRoles, state string) Standby {
	t.Helper()
	s, ok := r.top.Standby(state)
	if !ok {
		t.Fatalf("no %s standby in %+v", state, r.top.Standbys)
	}
	return s
}

// enqueueBacklog queues n tasks through POST /tasks/batch, 1000 a
// request, and returns their ids (each acknowledged: 202).
func enqueueBacklog(t testing.TB, ctx context.Context, base string, n int) []string {
	t.Helper()
	var ids []string
	for from := 0; from < n; from += 1000 {
		var b strings.Builder
		b.WriteString(`{"tasks":[`)
		for i := from; i < min(n, from+1000); i++ {
			if i > from {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"kind":"promote","payload":{"n":%d}}`, i)
		}
		b.WriteString(`]}`)
		code, body, err := driver.Do(ctx, http.MethodPost, base+"/tasks/batch", []byte(b.String()))
		if err != nil || code != http.StatusAccepted {
			t.Fatalf("POST /tasks/batch: %d %s %v", code, body, err)
		}
		var v struct {
			IDs []string `json:"ids"`
		}
		if err := json.Unmarshal(body, &v); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, v.IDs...)
	}
	return ids
}

// startProducer enqueues one task at a time through POST /tasks, every
// 20 ms; a task is acknowledged with 202.
func startProducer(ctx context.Context, base string) *acker[string] {
	return startAcker(ctx, 20*time.Millisecond, func(ctx context.Context, i int) (string, error) {
		return postForID(ctx, base, "/tasks", http.StatusAccepted, fmt.Appendf(nil, `{"kind":"promote","payload":{"one":%d}}`, i))
	})
}

// postForID posts body to base+path and returns the id the answer names:
// an acknowledgement is status want and an id.
func postForID(ctx context.Context, base, path string, want int, body []byte) (string, error) {
	code, answer, err := driver.Do(ctx, http.MethodPost, base+path, body)
	if err != nil {
		return "", err
	}
	var v struct {
		ID string `json:"id"`
	}
	if code != want || json.Unmarshal(answer, &v) != nil || v.ID == "" {
		return "", fmt.Errorf("POST %s: %d %s", path, code, answer)
	}
	return v.ID, nil
}

// waitDone waits (up to 3 minutes) until every task of ids is done, and
// returns how many are, how many have no record at all, and how many
// were delivered more than once (attempts > 1; no task here fails).
func waitDone(t testing.TB, ctx context.Context, pool *pgxpool.Pool, schema string, ids []string) (done, missing, dup int) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	q := `SELECT count(*) FILTER (WHERE t.status = 'done'), count(*) FILTER (WHERE t.id IS NULL),
	             count(*) FILTER (WHERE t.attempts > 1)
	        FROM unnest($1::uuid[]) AS a(id) LEFT JOIN ` + schema + `.tasks t ON t.id = a.id`
	for {
		err := pool.QueryRow(ctx, q, ids).Scan(&done, &missing, &dup)
		if err == nil && done == len(ids) {
			return done, missing, dup
		}
		if time.Now().After(deadline) {
			if err != nil {
				t.Fatal(err)
			}
			return done, missing, dup
		}
		time.Sleep(500 * time.Millisecond)
	}
}
