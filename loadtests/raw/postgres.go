package raw

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Loop sizes: the batched insert's rows per statement (the batch
// endpoints' middle size), the claim batch (no-rabbitmq's
// DefaultClaimBatch), and the rows written for the slot to decode.
const (
	insertBatchRows = 100
	claimBatch      = 256
	claimFill       = 200_000
	recordFill      = 300_000
	slotRows        = 100_000
)

// schema is the loops' scratch schema.
func (o Options) schema() string { return "wpe_raw_" + o.Name }

// withSchema connects a pool to o.PostgresURL, creates the scratch schema
// with setup (statements run in it), runs fn, and drops the schema.
func withSchema(ctx context.Context, o Options, setup []string, fn func(*pgxpool.Pool) error) error {
	cfg, err := pgxpool.ParseConfig(o.PostgresURL)
	if err != nil {
		return err
	}
	cfg.MaxConns = int32(max(o.Conns, 2)) + 1
	cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	cfg.ConnConfig.RuntimeParams["search_path"] = o.schema()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+o.schema()); err != nil {
		return err
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = pool.Exec(dctx, "DROP SCHEMA IF EXISTS "+o.schema()+" CASCADE")
	}()
	for _, s := range setup {
		if _, err := pool.Exec(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	return fn(pool)
}

// logTable is a log-like table: a logged table with an identity key, a
// timestamp and a jsonb payload, as no-kafka's messages and the queue's
// tasks records are.
const logTable = `CREATE TABLE t (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, created_at timestamptz NOT NULL DEFAULT now(), payload jsonb NOT NULL)`

// workers runs n copies of fn until d has passed (or one fails) and
// returns the items they counted and the wall time.
func workers(ctx context.Context, n int, d time.Duration, fn func(ctx context.Context) (int64, error)) (int64, time.Duration, error) {
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var total atomic.Int64
	start := time.Now()
	first := concurrently(n, func(int) error {
		for wctx.Err() == nil {
			k, err := fn(wctx)
			if err != nil {
				if wctx.Err() != nil {
					return nil
				}
				cancel()
				return err
			}
			total.Add(k)
		}
		return nil
	})
	el := time.Since(start)
	if ctx.Err() != nil {
		return total.Load(), el, ctx.Err()
	}
	return total.Load(), el, first
}

// concurrently runs fn(0) to fn(n-1), each in a goroutine of its own,
// and returns their errors joined once all have returned.
func concurrently(n int, fn func(i int) error) error {
	var mu sync.Mutex
	var errs error
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if err := fn(i); err != nil {
				mu.Lock()
				errs = errors.Join(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errs
}

// insertCommitDesc says what insertCommit counts, and how.
func insertCommitDesc(f figures, _ bool) string {
	return fmt.Sprintf("rows/s: one-row INSERT + COMMIT, %d connections, logged table", f.Conns)
}

// insertCommit inserts one row per transaction (an autocommitted INSERT)
// from o.Conns connections: the engine's commit rate, what a
// single-request enqueue or append costs Postgres at least.
func insertCommit(ctx context.Context, o Options) (Result, error) {
	var r Result
	err := withSchema(ctx, o, []string{logTable}, func(pool *pgxpool.Pool) error {
		n, d, err := workers(ctx, o.Conns, o.Duration, func(ctx context.Context) (int64, error) {
			_, err := pool.Exec(ctx, `INSERT INTO t (payload) VALUES ($1)`, payload)
			return 1, err
		})
		finish(&r, n, d)
		return err
	})
	return r, err
}

// payloads returns n copies of payload as a jsonb[] parameter.
func payloads(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = string(payload)
	}
	return out
}

// insertBatchDesc says what insertBatch counts, and how.
func insertBatchDesc(f figures, _ bool) string {
	return fmt.Sprintf("rows/s: %d-row INSERT per transaction, %d connections, logged table", f.BatchInsertRows, f.Conns)
}

// insertBatch inserts insertBatchRows rows per statement and transaction
// (unnest of arrays, as the services' batch endpoints do) from o.Conns
// connections.
func insertBatch(ctx context.Context, o Options) (Result, error) {
	var r Result
	rows := payloads(insertBatchRows)
	err := withSchema(ctx, o, []string{logTable}, func(pool *pgxpool.Pool) error {
		n, d, err := workers(ctx, o.Conns, o.Duration, func(ctx context.Context) (int64, error) {
			_, err := pool.Exec(ctx, `INSERT INTO t (payload) SELECT unnest($1::jsonb[])`, rows)
			return insertBatchRows, err
		})
		finish(&r, n, d)
		return err
	})
	return r, err
}

// claimDeleteDesc says what claimDelete counts, and how, and when its
// rows ran out.
func claimDeleteDesc(f figures, ranOut bool) string {
	return withRanOut(fmt.Sprintf("rows/s: SKIP LOCKED claim of %d (lease UPDATE) then DELETE, %d workers, unlogged table", f.ClaimBatch, f.Conns),
		ranOut, fmt.Sprintf("%d rows", f.ClaimFill))
}

// withRanOut is desc followed, when ranOut, by a note that what (the
// loop's rows) ran out before the loop's end.
func withRanOut(desc string, ranOut bool, what string) string {
	if ranOut {
		desc += " (the " + what + " ran out before the loop's end)"
	}
	return desc
}

// claimDelete fills an unlogged queue table shaped like queue_jobs with
// claimFill rows, then o.Conns workers each claim claimBatch due rows
// with FOR UPDATE SKIP LOCKED (moving run_at to a lease's end, as
// no-rabbitmq's claim does) and delete them in a second statement (its
// completion): the engine's part of a task's trip through the queue.
func claimDelete(ctx context.Context, o Options) (Result, error) {
	var r Result
	setup := []string{
		`CREATE UNLOGGED TABLE q (id bigint PRIMARY KEY, run_at timestamptz NOT NULL, locked_until timestamptz, attempts int NOT NULL DEFAULT 0, payload jsonb NOT NULL)`,
		`CREATE INDEX q_run_at ON q (run_at)`,
		fmt.Sprintf(`INSERT INTO q (id, run_at, payload) SELECT g, now() - interval '1 hour' + g * interval '1 microsecond', '%s' FROM generate_series(1, %d) g`, payload, claimFill),
		`ANALYZE q`,
	}
	const claim = `
WITH picked AS (
    SELECT id FROM q WHERE run_at <= now() ORDER BY run_at LIMIT $1 FOR UPDATE SKIP LOCKED
)
UPDATE q SET attempts = q.attempts + 1, run_at = now() + interval '30 seconds', locked_until = now() + interval '30 seconds'
  FROM picked WHERE q.id = picked.id
RETURNING q.id`
	err := withSchema(ctx, o, setup, func(pool *pgxpool.Pool) error {
		var empty atomic.Bool
		n, d, err := workers(ctx, o.Conns, o.Duration, claimThenDelete[int64](pool, claim, `DELETE FROM q WHERE id = ANY($1)`, &empty))
		finish(&r, n, d)
		r.RanOut = empty.Load()
		return err
	})
	return r, err
}

// claimThenDelete is a workers loop body: it claims claimBatch rows with
// claim (which returns their ids, of type T), deletes them with del (ids
// as $1) and counts the rows deleted. When a claim finds no due row it
// sets empty and idles until the loop's end.
func claimThenDelete[T any](pool *pgxpool.Pool, claim, del string, empty *atomic.Bool) func(ctx context.Context) (int64, error) {
	return func(ctx context.Context) (int64, error) {
		if empty.Load() {
			<-ctx.Done()
			return 0, nil
		}
		rows, err := pool.Query(ctx, claim, claimBatch)
		if err != nil {
			return 0, err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[T])
		if err != nil {
			return 0, err
		}
		if len(ids) == 0 {
			empty.Store(true)
			return 0, nil
		}
		tag, err := pool.Exec(ctx, del, ids)
		return tag.RowsAffected(), err
	}
}

// recordUpdateDesc says what recordUpdate counts, and how, and when its
// rows ran out.
func recordUpdateDesc(f figures, ranOut bool) string {
	return withRanOut(fmt.Sprintf("rows/s: %d-row UPDATE by primary key (queued → running, then → done), %d connections, logged table with a partial index on open statuses", f.ClaimBatch, f.Conns),
		ranOut, fmt.Sprintf("%d rows' two updates", f.RecordFill))
}

// recordUpdate fills a logged table shaped like the queue's task records
// (status, timestamps, a jsonb payload, a partial index on the open
// statuses as tasks_open is) with recordFill queued rows, then o.Conns
// workers update claimBatch rows per statement by primary key, each row
// twice: to running (a delivery) then to done (a completion), the two
// record updates each task costs the queue pair's services. The index
// makes these updates non-HOT, as the services' are.
func recordUpdate(ctx context.Context, o Options) (Result, error) {
	var r Result
	setup := []string{
		`CREATE TABLE rec (id bigint PRIMARY KEY, status text NOT NULL, enqueued_at timestamptz NOT NULL DEFAULT now(), delivered_at timestamptz, processed_at timestamptz, payload jsonb NOT NULL)`,
		`CREATE INDEX rec_open ON rec (status, enqueued_at) WHERE status <> 'done'`,
		fmt.Sprintf(`INSERT INTO rec (id, status, payload) SELECT g, 'queued', '%s' FROM generate_series(1, %d) g`, payload, recordFill),
		`ANALYZE rec`,
	}
	const update = `
UPDATE rec SET status = CASE status WHEN 'queued' THEN 'running' ELSE 'done' END,
       delivered_at = coalesce(delivered_at, clock_timestamp()),
       processed_at = CASE status WHEN 'running' THEN clock_timestamp() END
 WHERE id = ANY($1) AND (status IN ('queued', 'running')) IS TRUE`
	err := withSchema(ctx, o, setup, func(pool *pgxpool.Pool) error {
		// next hands out batches: the first pass over the ids delivers,
		// the second completes.
		var next atomic.Int64
		var ranOut atomic.Bool
		n, d, err := workers(ctx, o.Conns, o.Duration, func(ctx context.Context) (int64, error) {
			k := next.Add(claimBatch) - claimBatch
			if k >= 2*recordFill {
				ranOut.Store(true)
				<-ctx.Done()
				return 0, nil
			}
			ids := make([]int64, 0, claimBatch)
			for i := k; i < k+claimBatch && i < 2*recordFill; i++ {
				ids = append(ids, i%recordFill+1)
			}
			tag, err := pool.Exec(ctx, update, ids)
			return tag.RowsAffected(), err
		})
		finish(&r, n, d)
		r.RanOut = ranOut.Load()
		return err
	})
	return r, err
}

// wal2jsonDesc says what wal2jsonDecode counts, and how.
func wal2jsonDesc(f figures, _ bool) string {
	return fmt.Sprintf("rows/s: %d rows written first, then streamed through one temporary wal2json slot and decoded", f.SlotRows)
}

// wal2jsonDecode creates a temporary wal2json slot, writes slotRows rows
// in 1000-row transactions, then streams the slot (format-version 2,
// inserts of the scratch table only, as no-kafka's consumer asks) and
// decodes each change's JSON until every row has come through: the rate
// one slot decodes at when it has a backlog.
func wal2jsonDecode(ctx context.Context, o Options) (Result, error) {
	var r Result
	err := withSchema(ctx, o, []string{logTable}, func(pool *pgxpool.Pool) error {
		conn, err := ReplicationConn(ctx, o.PostgresURL, 5*time.Second)
		if err != nil {
			return err
		}
		defer conn.Close(context.Background())
		slot := "wpe_raw_" + o.Name
		if _, err := pglogrepl.CreateReplicationSlot(ctx, conn, slot, "wal2json",
			pglogrepl.CreateReplicationSlotOptions{Temporary: true, Mode: pglogrepl.LogicalReplication, SnapshotAction: "NOEXPORT_SNAPSHOT"}); err != nil {
			return fmt.Errorf("create temporary slot: %w", err)
		}
		rows := payloads(1000)
		for i := 0; i < slotRows; i += 1000 {
			if _, err := pool.Exec(ctx, `INSERT INTO t (payload) SELECT unnest($1::jsonb[])`, rows); err != nil {
				return err
			}
		}
		var end pglogrepl.LSN
		args := []string{`"format-version" '2'`, `"add-tables" '` + o.schema() + `.t'`, `"actions" 'insert'`,
			`"include-transaction" 'true'`, `"include-types" 'false'`}
		start := time.Now()
		if err := pglogrepl.StartReplication(ctx, conn, slot, 0, pglogrepl.StartReplicationOptions{Mode: pglogrepl.LogicalReplication, PluginArgs: args}); err != nil {
			return fmt.Errorf("start replication: %w", err)
		}
		var got int64
		for got < slotRows {
			msg, err := conn.ReceiveMessage(ctx)
			if err != nil {
				finish(&r, got, time.Since(start))
				return fmt.Errorf("receive after %d rows: %w", got, err)
			}
			x, err := ReplicationData(ctx, conn, msg, end)
			if err != nil {
				return err
			}
			if x == nil {
				continue
			}
			end = x.WALStart
			var m struct {
				Action  string `json:"action"`
				Table   string `json:"table"`
				Columns []struct {
					Name  string          `json:"name"`
					Value json.RawMessage `json:"value"`
				} `json:"columns"`
			}
			if err := json.Unmarshal(x.WALData, &m); err != nil {
				return fmt.Errorf("decode wal2json: %w", err)
			}
			if m.Action == "I" && m.Table == "t" {
				got++
			}
		}
		finish(&r, got, time.Since(start))
		return nil
	})
	return r, err
}
