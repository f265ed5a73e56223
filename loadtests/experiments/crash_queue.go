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
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// unloggedQueueCrash is issue 14's item 4: no-rabbitmq with N tasks
// queued in its UNLOGGED queue_jobs table and no workers, Postgres
// stopped immediately and started: crash recovery empties the table, and
// the service's start rebuilds it from the logged task records.
func unloggedQueueCrash() Experiment {
	return Experiment{Name: "unlogged-queue-crash", Run: runUnloggedQueueCrash, Text: queueCrashText}
}

// queueCrashText is unlogged-queue-crash's prose.
var queueCrashText = Text{
	Title:    "Unlogged queue table after a crash",
	Happens:  "Crash recovery empties an UNLOGGED table: every queued task's queue row is gone. no-rabbitmq keeps the task records in a logged table and rebuilds the queue from them at start (and after every reconnect), so no task is lost.",
	UserMust: "Keep the source of truth logged: an UNLOGGED queue (QUEUE_TABLE=unlogged) must be rebuildable from logged records, and rebuilt after every crash or failover (unlogged tables are not replicated either: a promoted standby starts with them empty).",
	Figure: func(f *Figures) string {
		fig := fmt.Sprintf("%d tasks queued, Postgres stopped immediately: queue_jobs held %d before and %d after recovery; the service's start rebuilt %d rows (the rebuild statement took %s, start to ready %.2f s); tasks lost %d.",
			f.Int(MetricTasks), f.Int(MetricQueueRowsBefore), f.Int(MetricQueueRowsAfterCrash), f.Int(MetricQueueRowsRebuilt), fmtRebuildMS(f.Num(MetricRebuildMS)),
			f.Num(MetricStartToReadySeconds), f.Int(MetricRecordsMissing)+f.Int(MetricStranded))
		if f.Has(MetricDoneAfterRebuild) {
			fig += fmt.Sprintf(" With workers started, %d of %d were done in %.1f s.", f.Int(MetricDoneAfterRebuild), f.Int(MetricTasks), f.Num(MetricDrainSeconds))
		}
		return fig
	},
	Notes: func(f *Figures) []string {
		notes := crashNotes(f,
			"the rebuild time is the rebuild statement's own duration in the server log (log_min_duration_statement = 0)",
			"tasks lost = acknowledged tasks without a record + open records without a queue row after the rebuild")
		if f.Has(MetricDoneAfterRebuild) {
			if undone := f.Int(MetricTasks) - f.Int(MetricDoneAfterRebuild); undone > 0 {
				notes = append(notes, fmt.Sprintf("%d tasks were not done within 60 s of starting the workers", undone))
			}
		}
		return notes
	},
}

// durationRE finds the duration of a logged statement.
var durationRE = regexp.MustCompile(`duration: ([0-9.]+) ms`)

func runUnloggedQueueCrash(ctx context.Context, env Env, size Size) (Result, error) {
	began := time.Now()
	n := 3000
	if size == Full {
		n = 100_000
	}
	rig, err := newCrashRig(ctx, env, nil)
	if err != nil {
		return Result{}, err
	}
	defer rig.Close()
	res := Result{Name: "unlogged-queue-crash", Metrics: map[driver.Metric]float64{}}
	ids, err := queueFillAndCrash(ctx, rig, n, res.Metrics)
	if err != nil {
		return Result{}, err
	}
	conn, err := pgx.Connect(ctx, rig.cluster.URL())
	if err != nil {
		return Result{}, err
	}
	defer func() { conn.Close(context.Background()) }()
	if err := queueRebuild(ctx, rig, conn, ids, res.Metrics); err != nil {
		return Result{}, err
	}
	res.AckedLost = int64(res.Metrics[MetricRecordsMissing] + res.Metrics[MetricStranded])
	// Small: run the workers and see every task done once.
	if size == Small {
		done, err := queueDrain(ctx, rig, conn, ids, res.Metrics)
		if err != nil {
			return Result{}, err
		}
		res.AckedLost += int64(len(ids)) - done
	}
	crashSettings(&res, rig.cluster)
	res.DurationS = time.Since(began).Seconds()
	return res, nil
}

// queueService is the service unlogged-queue-crash runs.
const queueService = pairs.NoRabbitMQ

// queueFillAndCrash queues n tasks on an API-only no-rabbitmq (WORKERS=0,
// so that every task stays queued), stops it, stops Postgres immediately
// and starts it with every statement's duration logged; it returns the
// tasks' ids.
func queueFillAndCrash(ctx context.Context, rig *crashRig, n int, m map[driver.Metric]float64) ([]string, error) {
	base, err := rig.start(ctx, queueService, map[string]string{"WORKERS": "0"})
	if err != nil {
		return nil, err
	}
	ids, err := enqueueTasks(ctx, base, n)
	if err != nil {
		return nil, err
	}
	var before int64
	if err := rig.cluster.QueryRow(ctx, `SELECT count(*) FROM queue.queue_jobs`, nil, &before); err != nil {
		return nil, err
	}
	m[MetricTasks] = float64(len(ids))
	m[MetricQueueRowsBefore] = float64(before)
	rig.logf("%d tasks queued (queue_jobs holds %d); stopping the service and crashing Postgres", len(ids), before)
	if err := rig.stop(queueService); err != nil {
		return nil, err
	}
	if err := rig.cluster.Stop(ctx, "immediate"); err != nil {
		return nil, err
	}
	if err := rig.cluster.Start(ctx); err != nil {
		return nil, err
	}
	// Log the rebuild's statement with its duration.
	if err := rig.cluster.Exec(ctx, `ALTER SYSTEM SET log_min_duration_statement = 0`); err != nil {
		return nil, err
	}
	return ids, rig.cluster.Exec(ctx, `SELECT pg_reload_conf()`)
}

// queueRebuild counts what crash recovery left, starts the service
// (which rebuilds the queue) and counts the tasks it lost: acknowledged
// tasks without a record, open records without a queue row.
func queueRebuild(ctx context.Context, rig *crashRig, conn *pgx.Conn, ids []string, m map[driver.Metric]float64) error {
	var afterCrash, open int64
	if err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM queue.queue_jobs), (SELECT count(*) FROM queue.tasks WHERE status IN ('queued', 'running'))`).Scan(&afterCrash, &open); err != nil {
		return err
	}
	rig.logf("after the crash: queue_jobs holds %d, open task records %d", afterCrash, open)
	t0 := time.Now()
	if _, err := rig.start(ctx, queueService, map[string]string{"WORKERS": "0"}); err != nil {
		return err
	}
	startToReady := time.Since(t0)
	var missingRecords, stranded, rebuilt int64
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM unnest($1::uuid[]) AS a(id) WHERE NOT EXISTS (SELECT 1 FROM queue.tasks t WHERE t.id = a.id)`, ids).Scan(&missingRecords); err != nil {
		return err
	}
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM queue.tasks t WHERE status IN ('queued', 'running')
		AND NOT EXISTS (SELECT 1 FROM queue.queue_jobs j WHERE j.task_id = t.id)`).Scan(&stranded); err != nil {
		return err
	}
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM queue.queue_jobs`).Scan(&rebuilt); err != nil {
		return err
	}
	m[MetricQueueRowsAfterCrash] = float64(afterCrash)
	m[MetricQueueRowsRebuilt] = float64(rebuilt)
	m[MetricRebuildMS] = rebuildMS(rebuildDuration(rig.cluster.log))
	m[MetricStartToReadySeconds] = startToReady.Seconds()
	m[MetricRecordsMissing] = float64(missingRecords)
	m[MetricStranded] = float64(stranded)
	return nil
}

// queueDrain restarts the service with workers and waits (60 s at most)
// until every task of ids is done; it returns how many are.
func queueDrain(ctx context.Context, rig *crashRig, conn *pgx.Conn, ids []string, m map[driver.Metric]float64) (int64, error) {
	if err := rig.stop(queueService); err != nil {
		return 0, err
	}
	t1 := time.Now()
	if _, err := rig.start(ctx, queueService, map[string]string{"WORK_MS": "0"}); err != nil {
		return 0, err
	}
	var done int64
	for time.Since(t1) < 60*time.Second {
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM queue.tasks WHERE status = 'done' AND id = ANY($1::uuid[])`, ids).Scan(&done); err != nil {
			return 0, err
		}
		if done == int64(len(ids)) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	m[MetricDoneAfterRebuild] = float64(done)
	m[MetricDrainSeconds] = time.Since(t1).Seconds()
	return done, nil
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

// rebuildMS is d in milliseconds, or -1 when the log did not hold it
// (rebuildDuration's -1).
func rebuildMS(d time.Duration) float64 {
	if d < 0 {
		return -1
	}
	return crashMS(d)
}

// fmtRebuildMS formats rebuildMS's figure.
func fmtRebuildMS(ms float64) string {
	if ms < 0 {
		return "an unknown time"
	}
	return fmt.Sprintf("%.1f ms", ms)
}
