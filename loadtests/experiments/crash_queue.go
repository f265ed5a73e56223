package experiments

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
)

// unloggedQueueCrash is issue 14's item 4: no-rabbitmq with N tasks
// queued in its UNLOGGED queue_jobs table and no workers, Postgres
// stopped immediately and started: crash recovery empties the table, and
// the service's start rebuilds it from the logged task records.
func unloggedQueueCrash() Experiment {
	return Experiment{Name: "unlogged-queue-crash", Run: runUnloggedQueueCrash}
}

// durationRE finds the duration of a logged statement.
var durationRE = regexp.MustCompile(`duration: ([0-9.]+) ms`)

func runUnloggedQueueCrash(ctx context.Context, env Env, size Size) (Result, error) {
	began := time.Now()
	n := 3000
	if size == Full {
		n = 100_000
	}
	const svc = "no-rabbitmq"
	rig, err := newCrashRig(ctx, env, nil)
	if err != nil {
		return Result{}, err
	}
	defer rig.Close()
	// WORKERS=0: an API-only instance, so that every task stays queued.
	base, err := rig.start(ctx, svc, map[string]string{"WORKERS": "0"})
	if err != nil {
		return Result{}, err
	}
	ids, err := enqueueTasks(ctx, base, n)
	if err != nil {
		return Result{}, err
	}
	conn, err := pgx.Connect(ctx, rig.cluster.URL())
	if err != nil {
		return Result{}, err
	}
	var before int64
	err = conn.QueryRow(ctx, `SELECT count(*) FROM queue.queue_jobs`).Scan(&before)
	conn.Close(ctx)
	if err != nil {
		return Result{}, err
	}
	rig.logf("%d tasks queued (queue_jobs holds %d); stopping the service and crashing Postgres", len(ids), before)
	if err := rig.stop(svc); err != nil {
		return Result{}, err
	}
	if err := rig.cluster.Stop(ctx, "immediate"); err != nil {
		return Result{}, err
	}
	if err := rig.cluster.Start(ctx); err != nil {
		return Result{}, err
	}
	// Log the rebuild's statement with its duration.
	if err := rig.cluster.Exec(ctx, `ALTER SYSTEM SET log_min_duration_statement = 0`); err != nil {
		return Result{}, err
	}
	if err := rig.cluster.Exec(ctx, `SELECT pg_reload_conf()`); err != nil {
		return Result{}, err
	}
	conn, err = pgx.Connect(ctx, rig.cluster.URL())
	if err != nil {
		return Result{}, err
	}
	defer func() { conn.Close(context.Background()) }()
	var afterCrash, open int64
	if err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM queue.queue_jobs), (SELECT count(*) FROM queue.tasks WHERE status IN ('queued', 'running'))`).Scan(&afterCrash, &open); err != nil {
		return Result{}, err
	}
	rig.logf("after the crash: queue_jobs holds %d, open task records %d", afterCrash, open)

	t0 := time.Now()
	if _, err := rig.start(ctx, svc, map[string]string{"WORKERS": "0"}); err != nil {
		return Result{}, err
	}
	startToReady := time.Since(t0)
	var missingRecords, stranded, rebuilt int64
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM unnest($1::uuid[]) AS a(id) WHERE NOT EXISTS (SELECT 1 FROM queue.tasks t WHERE t.id = a.id)`, ids).Scan(&missingRecords); err != nil {
		return Result{}, err
	}
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM queue.tasks t WHERE status IN ('queued', 'running')
		AND NOT EXISTS (SELECT 1 FROM queue.queue_jobs j WHERE j.task_id = t.id)`).Scan(&stranded); err != nil {
		return Result{}, err
	}
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM queue.queue_jobs`).Scan(&rebuilt); err != nil {
		return Result{}, err
	}
	rebuild := rebuildDuration(rig.cluster.log)

	// Small: run the workers and see every task done once.
	var done int64 = -1
	var drain time.Duration
	if size == Small {
		if err := rig.stop(svc); err != nil {
			return Result{}, err
		}
		t1 := time.Now()
		if _, err := rig.start(ctx, svc, map[string]string{"WORK_MS": "0"}); err != nil {
			return Result{}, err
		}
		for time.Since(t1) < 60*time.Second {
			if err := conn.QueryRow(ctx, `SELECT count(*) FROM queue.tasks WHERE status = 'done' AND id = ANY($1::uuid[])`, ids).Scan(&done); err != nil {
				return Result{}, err
			}
			if done == int64(len(ids)) {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		drain = time.Since(t1)
	}

	lost := missingRecords + stranded
	res := Result{
		Name:    "unlogged-queue-crash",
		Title:   "Unlogged queue table after a crash",
		Happens: "Crash recovery empties an UNLOGGED table: every queued task's queue row is gone. no-rabbitmq keeps the task records in a logged table and rebuilds the queue from them at start (and after every reconnect), so no task is lost.",
		Figure: fmt.Sprintf("%d tasks queued, Postgres stopped immediately: queue_jobs held %d before and %d after recovery; the service's start rebuilt %d rows (the rebuild statement took %s, start to ready %.2f s); tasks lost %d.",
			len(ids), before, afterCrash, rebuilt, fmtRebuild(rebuild), startToReady.Seconds(), lost),
		UserMust:  "Keep the source of truth logged: an UNLOGGED queue (QUEUE_TABLE=unlogged) must be rebuildable from logged records, and rebuilt after every crash or failover (unlogged tables are not replicated either: a promoted standby starts with them empty).",
		AckedLost: lost,
		Metrics: map[string]float64{
			"tasks": float64(len(ids)), "queue_rows_before": float64(before), "queue_rows_after_crash": float64(afterCrash),
			"queue_rows_rebuilt": float64(rebuilt), "rebuild_ms": crashMS(rebuild), "start_to_ready_s": startToReady.Seconds(),
			"records_missing": float64(missingRecords), "stranded": float64(stranded),
		},
		Notes: crashNotes(rig.cluster,
			"the rebuild time is the rebuild statement's own duration in the server log (log_min_duration_statement = 0)",
			"tasks lost = acknowledged tasks without a record + open records without a queue row after the rebuild"),
	}
	if done >= 0 {
		res.Metrics["done_after_rebuild"] = float64(done)
		res.Metrics["drain_s"] = drain.Seconds()
		res.Figure += fmt.Sprintf(" With workers started, %d of %d were done in %.1f s.", done, len(ids), drain.Seconds())
		if done < int64(len(ids)) {
			res.AckedLost += int64(len(ids)) - done
			res.Notes = append(res.Notes, fmt.Sprintf("%d tasks were not done within 60 s of starting the workers", int64(len(ids))-done))
		}
	}
	res.DurationS = time.Since(began).Seconds()
	return res, nil
}

// enqueueTasks enqueues n tasks through POST /tasks/batch (1000 each, 4
// at a time) and returns their ids.
func enqueueTasks(ctx context.Context, base string, n int) ([]string, error) {
	var mu sync.Mutex
	var ids []string
	var firstErr error
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for from := 0; from < n; from += 1000 {
		k := min(1000, n-from)
		wg.Add(1)
		sem <- struct{}{}
		go func(from, k int) {
			defer wg.Done()
			defer func() { <-sem }()
			var b strings.Builder
			b.WriteString(`{"tasks":[`)
			for i := 0; i < k; i++ {
				if i > 0 {
					b.WriteByte(',')
				}
				b.WriteString(`{"kind":"exp","payload":{"n":` + strconv.Itoa(from+i) + `},"fail_times":0}`)
			}
			b.WriteString(`]}`)
			code, body, err := driver.Do(ctx, http.MethodPost, base+"/tasks/batch", []byte(b.String()))
			var v struct {
				IDs []string `json:"ids"`
			}
			if err == nil && code != http.StatusAccepted {
				err = fmt.Errorf("POST /tasks/batch: %d %s", code, body)
			}
			if err == nil {
				err = json.Unmarshal(body, &v)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil && firstErr == nil {
				firstErr = err
			}
			ids = append(ids, v.IDs...)
		}(from, k)
	}
	wg.Wait()
	return ids, firstErr
}

// rebuildDuration finds the rebuild statement's duration in the server
// log at path, or -1.
func rebuildDuration(path string) time.Duration {
	b, err := os.ReadFile(path)
	if err != nil {
		return -1
	}
	lines := strings.Split(string(b), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if !strings.Contains(lines[i], "AS held FROM tasks") {
			continue
		}
		for j := i; j >= 0 && j > i-12; j-- {
			if m := durationRE.FindStringSubmatch(lines[j]); m != nil {
				f, _ := strconv.ParseFloat(m[1], 64)
				return time.Duration(f * float64(time.Millisecond))
			}
		}
	}
	return -1
}

func fmtRebuild(d time.Duration) string {
	if d < 0 {
		return "an unknown time"
	}
	return fmt.Sprintf("%.1f ms", crashMS(d))
}
