package experiments

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/migrations"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/postgres"
)

// The readers' SQL. naiveSQL is the cursor the pitfall uses; pageSQL and
// watermarkSQL are copied from services/no-kurrentdb/store.go (package
// main there, so copied, not imported): read only rows of transactions
// below the watermark pg_snapshot_xmin(pg_current_snapshot()), every one
// of which has committed or aborted, with (xid, global_pos) as the cursor.
const (
	naiveSQL = `SELECT global_pos FROM events WHERE global_pos > $1 ORDER BY global_pos LIMIT $2`

	pageSQL = `
SELECT global_pos, xid::text
FROM events
WHERE (xid, global_pos) > ($1::text::xid8, $2::bigint)
  AND xid < $4::text::xid8
ORDER BY events.xid, events.global_pos
LIMIT $3`

	watermarkSQL = `SELECT pg_snapshot_xmin(pg_current_snapshot())::text`

	appendSQL = `INSERT INTO events (stream_id, version, event_type, data) VALUES ($1, $2, 'gap', '{}') RETURNING global_pos`
)

// gapSize is commitOrderGap's size: runs, writers, events per writer, and
// the longest pause between a writer's INSERT and its COMMIT.
type gapSize struct {
	runs, writers, events int
	stagger               time.Duration
}

func gapSizeOf(size Size) gapSize {
	if size == Full {
		return gapSize{runs: 20, writers: 8, events: 100, stagger: 4 * time.Millisecond}
	}
	return gapSize{runs: 3, writers: 8, events: 40, stagger: 4 * time.Millisecond}
}

// catchUp bounds the watermark reader's wait for the last events after
// the writers finished: an open transaction anywhere on the server holds
// the watermark back (the shared stack has other users).
const catchUp = 30 * time.Second

// gapText is commit-order-gap's prose.
var gapText = Text{
	Title:    "The commit-order gap of a sequence cursor",
	Happens:  "A bigserial position is taken at INSERT and becomes visible at COMMIT, so a later position can be read before an earlier one commits: a reader paging by global_pos > last moves past the slower transaction's event and never reads it.",
	UserMust: "Never page a table by a sequence alone while writers commit concurrently: read only below the transaction watermark (xid8 < pg_snapshot_xmin(pg_current_snapshot())) with (xid, global_pos) as the cursor, as no-kurrentdb does, or serialize the writers.",
	Figure: func(f *Figures) string {
		runs, committed, naive := f.Int(MetricRuns), f.Int(MetricCommitted), f.Int(MetricGlobalPosCursorMissed)
		return fmt.Sprintf("Over %d runs of %d writers (%d committed events): paging by global_pos > last missed %d events (%.2f%%, in %d of %d runs); the (xid, global_pos) watermark cursor missed %d",
			runs, f.Int(MetricWriters), committed, naive, 100*float64(naive)/float64(max(committed, 1)), f.Int(MetricGlobalPosCursorRunsWithLoss), runs, f.Int(MetricWatermarkCursorMissed))
	},
	Notes: func(f *Figures) []string {
		return []string{
			fmt.Sprintf("Each writer appends %d events one transaction each, pausing up to %v between INSERT and COMMIT; both readers poll while they write, then read until caught up.",
				f.Int(MetricEventsPerWriter), msDur(f.Num(MetricStaggerMS))),
			fmt.Sprintf("The watermark reader waits for transactions open anywhere on the server (the watermark is cluster-wide): its longest wait after the writers finished was %.2f s here (bound %v).",
				f.Num(MetricWatermarkCatchUpMaxSeconds), secondsDur(f.Num(MetricCatchUpBoundSeconds))),
		}
	},
}

// commitOrderGap appends events from concurrent writers that pause a
// random moment between INSERT and COMMIT, into a scratch schema's copy
// of the event store (migrations/eventstore), while two readers follow:
// one pages by global_pos > last, the other by no-kurrentdb's (xid,
// global_pos) watermark cursor. It counts the committed events each never
// read, over several runs.
func commitOrderGap(ctx context.Context, env Env, size Size) (Result, error) {
	r := Result{AckedLost: -1, Metrics: map[driver.Metric]float64{}}
	g := gapSizeOf(size)
	// eventstore.notify=off: the migrations' trigger would NOTIFY in every
	// append, which serializes commits (notify-serializes-commits).
	s, err := openScratch(ctx, env.PostgresURL, "gap", g.writers+3, map[string]string{"eventstore.notify": "off"})
	if err != nil {
		return r, err
	}
	defer s.Close()
	if err := postgres.Migrate(ctx, s.Pool, migrations.MustFS("eventstore"), nil); err != nil {
		return r, err
	}
	var committed, naiveLost, wmLost, runsWithLoss int
	var wmWait time.Duration
	for run := range g.runs {
		if _, err := s.Pool.Exec(ctx, "TRUNCATE events RESTART IDENTITY"); err != nil {
			return r, err
		}
		c, nl, wl, wait, err := gapRun(ctx, s.Pool, g, run)
		if err != nil {
			return r, fmt.Errorf("run %d: %w", run+1, err)
		}
		env.logf("commit-order-gap run %d: %d committed, global_pos cursor missed %d, watermark cursor missed %d", run+1, c, nl, wl)
		committed, naiveLost, wmLost = committed+c, naiveLost+nl, wmLost+wl
		wmWait = max(wmWait, wait)
		if nl > 0 {
			runsWithLoss++
		}
	}
	r.AckedLost = int64(wmLost)
	r.Metrics[MetricRuns] = float64(g.runs)
	r.Metrics[MetricWriters] = float64(g.writers)
	r.Metrics[MetricEventsPerWriter] = float64(g.events)
	r.Metrics[MetricStaggerMS] = float64(g.stagger) / float64(time.Millisecond)
	r.Metrics[MetricCatchUpBoundSeconds] = catchUp.Seconds()
	r.Metrics[MetricCommitted] = float64(committed)
	r.Metrics[MetricGlobalPosCursorMissed] = float64(naiveLost)
	r.Metrics[MetricGlobalPosCursorRunsWithLoss] = float64(runsWithLoss)
	r.Metrics[MetricWatermarkCursorMissed] = float64(wmLost)
	r.Metrics[MetricWatermarkCatchUpMaxSeconds] = wmWait.Seconds()
	return r, nil
}

// gapRun is one run: it returns the events committed, those each cursor
// never read, and how long the watermark reader took to catch up after
// the writers finished.
func gapRun(ctx context.Context, pool *pgxpool.Pool, g gapSize, run int) (committed, naiveLost, wmLost int, wait time.Duration, err error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var mu sync.Mutex
	done := map[int64]bool{}
	var werr error
	var writers sync.WaitGroup
	for w := range g.writers {
		writers.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(run), uint64(w)))
			stream := "w" + strconv.Itoa(w)
			for i := range g.events {
				pos, err := appendStaggered(ctx, pool, stream, i, time.Duration(rng.Int64N(int64(g.stagger))))
				mu.Lock()
				if err != nil {
					werr = err
					mu.Unlock()
					return
				}
				done[pos] = true
				mu.Unlock()
			}
		})
	}
	writing := make(chan struct{})
	var finished time.Time
	go func() { writers.Wait(); finished = time.Now(); close(writing) }()

	var naive, wm map[int64]bool
	var nerr, merr error
	var readers sync.WaitGroup
	readers.Go(func() { naive, nerr = readNaive(ctx, pool, writing) })
	readers.Go(func() {
		wm, merr = readWatermark(ctx, pool, writing, func() int {
			mu.Lock()
			defer mu.Unlock()
			return len(done)
		})
	})
	readers.Wait()
	if werr != nil || nerr != nil || merr != nil {
		return 0, 0, 0, 0, fmt.Errorf("writers: %v; global_pos reader: %v; watermark reader: %v", werr, nerr, merr)
	}
	wait = time.Since(finished)
	for pos := range done {
		if !naive[pos] {
			naiveLost++
		}
		if !wm[pos] {
			wmLost++
		}
	}
	return len(done), naiveLost, wmLost, wait, nil
}

// appendStaggered appends one event and waits pause before committing.
func appendStaggered(ctx context.Context, pool *pgxpool.Pool, stream string, version int, pause time.Duration) (int64, error) {
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var pos int64
	err := pgx.BeginFunc(tctx, pool, func(tx pgx.Tx) error {
		if err := tx.QueryRow(tctx, appendSQL, stream, version).Scan(&pos); err != nil {
			return err
		}
		time.Sleep(pause)
		return nil
	})
	return pos, err
}

// pageLimit is each reader's page size.
const pageLimit = 500

// readNaive pages by global_pos > last until writing is closed and a page
// comes back empty; it returns the positions read.
func readNaive(ctx context.Context, pool *pgxpool.Pool, writing <-chan struct{}) (map[int64]bool, error) {
	seen := map[int64]bool{}
	var last int64
	for {
		over := closed(writing)
		n := 0
		qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		rows, err := pool.Query(qctx, naiveSQL, last, pageLimit)
		if err == nil {
			var pos int64
			_, err = pgx.ForEachRow(rows, []any{&pos}, func() error {
				seen[pos], last, n = true, pos, n+1
				return nil
			})
		}
		cancel()
		if err != nil {
			return nil, err
		}
		if n == 0 {
			if over {
				return seen, nil
			}
			time.Sleep(time.Millisecond)
		}
	}
}

// readWatermark pages by (xid, global_pos) below the watermark until
// writing is closed and it has read committed() events, or catchUp after
// writing closed; it returns the positions read.
func readWatermark(ctx context.Context, pool *pgxpool.Pool, writing <-chan struct{}, committed func() int) (map[int64]bool, error) {
	seen := map[int64]bool{}
	xid, last := "0", int64(0)
	var deadline time.Time
	for {
		if closed(writing) {
			if deadline.IsZero() {
				deadline = time.Now().Add(catchUp)
			}
			if len(seen) >= committed() || time.Now().After(deadline) {
				return seen, nil
			}
		}
		n := 0
		qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		var w string
		err := pool.QueryRow(qctx, watermarkSQL).Scan(&w)
		if err == nil {
			var rows pgx.Rows
			rows, err = pool.Query(qctx, pageSQL, xid, last, pageLimit, w)
			if err == nil {
				var pos int64
				var x string
				_, err = pgx.ForEachRow(rows, []any{&pos, &x}, func() error {
					seen[pos], xid, last, n = true, x, pos, n+1
					return nil
				})
			}
		}
		cancel()
		if err != nil {
			return nil, err
		}
		if n == 0 {
			time.Sleep(time.Millisecond)
		}
	}
}

// closed reports whether ch is closed.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
