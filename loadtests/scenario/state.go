package scenario

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// DefaultSchemas are the Postgres schemas the services keep their tables
// in by default: each service's DefaultSchema (DATABASE_SCHEMA's default
// in its main.go). The mongodb service keeps nothing in Postgres.
var DefaultSchemas = map[string]string{
	pairs.NoRabbitMQ: "queue", pairs.RabbitMQ: "queue_rabbitmq",
	pairs.NoKafka: "log", pairs.Kafka: "log_kafka",
	pairs.NoMongoDB: "documents", pairs.NoKurrentDB: "eventstore",
}

// stateTimeout bounds each statement of the state's preparation and
// reading; building a history of millions of rows takes longer
// (historyTimeout).
const (
	stateTimeout   = 2 * time.Minute
	historyTimeout = 20 * time.Minute
	// lockTimeout keeps TRUNCATE from queueing behind a service's long
	// transaction (and every later query behind it): it fails instead.
	lockTimeout = "10s"
)

//go:embed sql/*.sql
var historySQL embed.FS

// ServiceVar returns the value of an environment variable as the named
// service sees it when the driver starts it: its ServiceEnv entry, else
// the driver's own environment (which it inherits), else def.
func (e *Env) ServiceVar(svc, key, def string) string {
	if v := e.ServiceEnv[svc][key]; v != "" {
		return v
	}
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// Schemas returns the Postgres schemas of the pair's services, A's first,
// each once (a service without one, the mongodb side, is skipped).
func (e *Env) Schemas(p Pair) []string { return e.SchemasOf(p.Services()) }

// SchemasOf returns the Postgres schemas of svcs, in order, each once.
func (e *Env) SchemasOf(svcs []Service) []string {
	var out []string
	for _, s := range svcs {
		if DefaultSchemas[s.Name] == "" && e.ServiceEnv[s.Name]["DATABASE_SCHEMA"] == "" {
			continue // not a Postgres service
		}
		sch := e.ServiceVar(s.Name, "DATABASE_SCHEMA", DefaultSchemas[s.Name])
		if !slices.Contains(out, sch) {
			out = append(out, sch)
		}
	}
	return out
}

func (e *Env) connect(ctx context.Context) (*pgx.Conn, error) {
	if e.PostgresURL == "" {
		return nil, errors.New("no Postgres URL (-database-url)")
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return pgx.Connect(cctx, e.PostgresURL)
}

// connectWithin connects to e's Postgres for work bounded by timeout:
// it returns the bounded context, the connection and done, which closes
// the connection and releases the bound.
func (e *Env) connectWithin(ctx context.Context, timeout time.Duration) (context.Context, *pgx.Conn, func(), error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	conn, err := e.connect(ctx)
	if err != nil {
		cancel()
		return nil, nil, nil, err
	}
	return ctx, conn, func() {
		conn.Close(context.Background())
		cancel()
	}, nil
}

// countRows counts table's rows (those matching where, with args, when
// where is not empty) on a connection of its own, within 30 s.
func (e *Env) countRows(ctx context.Context, table pgx.Identifier, where string, args ...any) (int64, error) {
	ctx, conn, done, err := e.connectWithin(ctx, 30*time.Second)
	if err != nil {
		return 0, err
	}
	defer done()
	q := "SELECT count(*) FROM " + table.Sanitize()
	if where != "" {
		q += " WHERE " + where
	}
	var n int64
	err = conn.QueryRow(ctx, q, args...).Scan(&n)
	return n, err
}

// tables lists the pair's tables in schemas (the migrations' bookkeeping,
// goose_db_version, left out), ordered by schema as given, then name.
func tables(ctx context.Context, conn *pgx.Conn, schemas []string) ([][2]string, error) {
	rows, err := conn.Query(ctx, `SELECT schemaname::text, tablename::text FROM pg_tables
		WHERE schemaname = ANY($1) AND tablename <> 'goose_db_version'
		ORDER BY array_position($1, schemaname::text), tablename`, schemas)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) ([2]string, error) {
		var t [2]string
		return t, r.Scan(&t[0], &t[1])
	})
}

// ReadState reads every table of schemas: its exact row count, its total
// size and its dead tuples (pg_stat_user_tables, as of the statistics'
// last flush: the writers of this package flush theirs before they
// return).
func (e *Env) ReadState(ctx context.Context, schemas []string) ([]driver.TableState, error) {
	ctx, conn, done, err := e.connectWithin(ctx, stateTimeout)
	if err != nil {
		return nil, err
	}
	defer done()
	return readState(ctx, conn, schemas)
}

func readState(ctx context.Context, conn *pgx.Conn, schemas []string) ([]driver.TableState, error) {
	if _, err := conn.Exec(ctx, "SELECT pg_stat_clear_snapshot()"); err != nil {
		return nil, err
	}
	ts, err := tables(ctx, conn, schemas)
	if err != nil {
		return nil, err
	}
	out := []driver.TableState{}
	for _, t := range ts {
		s := driver.TableState{Schema: t[0], Table: t[1]}
		name := pgx.Identifier{t[0], t[1]}.Sanitize()
		if err := conn.QueryRow(ctx, `SELECT count(*), pg_total_relation_size($1::regclass),
			coalesce((SELECT n_dead_tup FROM pg_stat_user_tables WHERE relid = $1::regclass), 0)
			FROM `+name, name).Scan(&s.Rows, &s.TotalBytes, &s.DeadTuples); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out = append(out, s)
	}
	return out, nil
}

// flushStats makes the connection's backend publish its table statistics
// (dead tuples, a truncation's reset) as soon as its current statement
// ends, instead of up to a second later or at its exit, which a reader on
// another connection could otherwise overtake (Postgres 15 and later;
// older servers ignore the request).
func flushStats(ctx context.Context, conn *pgx.Conn) {
	var ok bool
	if err := conn.QueryRow(ctx, `SELECT to_regproc('pg_stat_force_next_flush') IS NOT NULL`).Scan(&ok); err == nil && ok {
		_, _ = conn.Exec(ctx, "SELECT pg_stat_force_next_flush()")
	}
}

// truncate empties every table of schemas (but the migrations' own) in
// one TRUNCATE ... RESTART IDENTITY: new, empty files for the tables and
// their indexes, no dead tuples, identity sequences restarted. The
// schemas stay what the services' goose migrations made them; a schema
// that does not exist yet is skipped (the services create and migrate it
// when they start).
func truncate(ctx context.Context, conn *pgx.Conn, schemas []string) error {
	ts, err := tables(ctx, conn, schemas)
	if err != nil || len(ts) == 0 {
		return err
	}
	var names []string
	for _, t := range ts {
		names = append(names, pgx.Identifier{t[0], t[1]}.Sanitize())
	}
	if _, err := conn.Exec(ctx, "SET lock_timeout = '"+lockTimeout+"'"); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "TRUNCATE "+strings.Join(names, ", ")+" RESTART IDENTITY"); err != nil {
		return fmt.Errorf("truncate %s: %w", strings.Join(names, ", "), err)
	}
	flushStats(ctx, conn)
	return nil
}

// PrepareStart declares the run's starting state: with mode
// driver.StateFresh it truncates the pair's tables first, with
// driver.StateKeep it leaves them; either way it records every table's
// rows, size and dead tuples in run.StartState. It is called before the
// pair's services start (a service already running keeps its
// connections; TRUNCATE waits at most lockTimeout for them). A failure is
// recorded in the state and returned.
func (e *Env) PrepareStart(ctx context.Context, run *driver.Run, p Pair, mode string) error {
	st := &driver.StartState{Mode: mode, Tables: []driver.TableState{}}
	run.StartState = st
	err := e.prepare(ctx, st, e.Schemas(p))
	if err == nil && mode == driver.StateFresh && p.Name == pairs.Log {
		// The slot decodes the whole cluster's WAL: what the pairs before
		// wrote while no-kafka was stopped (gigabytes after the queue's
		// ceiling search) would be read through before its first event.
		err = e.skipForeignWAL(ctx, run, p)
	}
	if err == nil && mode == driver.StateFresh && p.Name == pairs.Queue && !e.answers(ctx, p.B) {
		// The broker keeps the rabbitmq side's messages apart from its
		// emptied tables: messages of records just truncated would be
		// work no step offered. The service declares them again.
		err = deleteQueues(firstURL(e.ServiceVar(pairs.RabbitMQ, "RABBITMQ_URL", rabbitMQURL())), e.ServiceVar(pairs.RabbitMQ, "RABBITMQ_QUEUE", rabbitMQDefaultQueue))
	}
	if err != nil {
		st.Error = err.Error()
	}
	return err
}

// skipForeignWAL moves no-kafka's slot, inactive while its service is
// stopped, to the current WAL position after its tables were emptied, and
// notes how far behind it was; an active slot is left, with a note.
func (e *Env) skipForeignWAL(ctx context.Context, run *driver.Run, p Pair) error {
	ctx, conn, done, err := e.connectWithin(ctx, stateTimeout)
	if err != nil {
		return err
	}
	defer done()
	lag, ok := e.slotLag(ctx, p.A.Name)
	notes, err := e.advanceSlot(ctx, conn, p)
	for _, n := range notes {
		run.Note("%s", n)
	}
	if ok && len(notes) == 0 && err == nil {
		run.Settings["start_slot_skipped_bytes"] = lag
	}
	return err
}

func (e *Env) prepare(ctx context.Context, st *driver.StartState, schemas []string) error {
	if st.Mode != driver.StateFresh && st.Mode != driver.StateKeep {
		return fmt.Errorf("start state %q: want %s or %s", st.Mode, driver.StateFresh, driver.StateKeep)
	}
	ctx, conn, done, err := e.connectWithin(ctx, stateTimeout)
	if err != nil {
		return err
	}
	defer done()
	if st.Mode == driver.StateFresh {
		if err := truncate(ctx, conn, schemas); err != nil {
			return err
		}
	}
	st.Tables, err = readState(ctx, conn, schemas)
	return err
}

// BuildHistory gives the pair's schemas the long-lived variant's
// history: it truncates them, then writes n finished tasks (queue) or n
// delivered events (log) and n/10 more past the default 24-hour
// retention, vacuums, and churns (deletes the rows past retention as the
// cleaner does, updates one task in twenty), so that the tables start
// with history and dead tuples (sql/history_*.sql). The services must be
// stopped (the log pair's slot is then advanced past the history, so that
// no-kafka does not deliver it again); it returns notes for the run.
func (e *Env) BuildHistory(ctx context.Context, p Pair, n int64) ([]string, error) {
	file := map[string]string{pairs.Queue: "sql/history_queue.sql", pairs.Log: "sql/history_log.sql"}[p.Name]
	if file == "" {
		return nil, fmt.Errorf("no history for the %s pair", p.Name)
	}
	if n < 1 {
		return nil, fmt.Errorf("history of %d rows", n)
	}
	b, err := historySQL.ReadFile(file)
	if err != nil {
		return nil, err
	}
	steps := splitSteps(string(b))
	ctx, conn, done, err := e.connectWithin(ctx, historyTimeout)
	if err != nil {
		return nil, err
	}
	defer done()
	schemas := e.Schemas(p)
	if err := truncate(ctx, conn, schemas); err != nil {
		return nil, err
	}
	args := pgx.NamedArgs{"n": n, "old": n / 10}
	for _, sch := range schemas {
		t0 := time.Now()
		if _, err := conn.Exec(ctx, "SET search_path = "+pgx.Identifier{sch}.Sanitize()); err != nil {
			return nil, err
		}
		for _, s := range steps {
			var err error
			if strings.Contains(s, "@") {
				_, err = conn.Exec(ctx, s, args)
			} else {
				_, err = conn.Exec(ctx, s)
			}
			if err != nil {
				return nil, fmt.Errorf("%s history: %w\n%s", sch, err, s)
			}
		}
		e.logf("history of %d rows (+%d past retention) in %s in %s", n, n/10, sch, time.Since(t0).Round(time.Millisecond))
	}
	flushStats(ctx, conn)
	if p.Name != pairs.Log {
		return nil, nil
	}
	return e.advanceSlot(ctx, conn, p)
}

// ReleaseSlot moves no-kafka's replication slot (its SLOT_NAME, on
// e.PostgresURL) to the current WAL position when no consumer holds it,
// so that it holds back none of the WAL written while no-kafka is
// stopped. The results command calls it after each step: the slot sat
// idle through the steps after the log pair's and held 12 GB of their
// WAL, which filled this machine's disk in one run. The log pair's steps
// drain before they stop and start on fresh tables, so nothing they
// measure is skipped. A slot in use or missing is left alone; what failed
// is logged.
func (e *Env) ReleaseSlot(ctx context.Context) {
	conn, err := e.connect(ctx)
	if err != nil {
		e.logf("replication slot not released: %v", err)
		return
	}
	defer conn.Close(context.Background())
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := e.advanceSlot(cctx, conn, LogPair); err != nil {
		e.logf("replication slot not released: %v", err)
	}
}

// advanceSlot moves no-kafka's replication slot to the current WAL
// position: the history's inserts into messages were never the service's
// events, and a consumer decoding them would spend the measurements
// delivering a million old rows. A slot in use cannot be advanced: the
// note (an incident, driver.Run.Notes) says so. A slot the server has
// invalidated (wal_status lost: max_slot_wal_keep_size removed WAL it
// still needed, as the other configurations' writes did to the
// durability scenario's idle slot on 6 December 2026) cannot be advanced
// either, and no-kafka refuses to start on it: on a fresh start, which
// needs none of its events, it is dropped, and the service makes a new
// one at the current position.
func (e *Env) advanceSlot(ctx context.Context, conn *pgx.Conn, p Pair) ([]string, error) {
	slot := e.ServiceVar(p.A.Name, "SLOT_NAME", "no_kafka")
	var active, lost bool
	err := conn.QueryRow(ctx, `SELECT active, coalesce(wal_status = 'lost', false) FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&active, &lost)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, nil // created after the history: it never sees it
	case err != nil:
		return nil, err
	case active:
		return []string{fmt.Sprintf("replication slot %s not advanced past the history: in use while it was written (%s not started by the driver), so its consumer decodes the history's inserts and counts them as duplicates", slot, p.A.Name)}, nil
	case lost:
		if _, err := conn.Exec(ctx, `SELECT pg_drop_replication_slot($1)`, slot); err != nil {
			return nil, fmt.Errorf("drop lost slot %s: %w", slot, err)
		}
		e.logf("replication slot %s was lost (max_slot_wal_keep_size): dropped, the service makes a new one", slot)
		return nil, nil
	}
	if _, err := conn.Exec(ctx, `SELECT pg_replication_slot_advance($1, pg_current_wal_lsn())`, slot); err != nil {
		return nil, fmt.Errorf("advance slot %s: %w", slot, err)
	}
	return nil, nil
}

// splitSteps splits a history file into its statements: the text between
// lines starting with "-- step", comments and blank lines dropped.
func splitSteps(s string) []string {
	var out []string
	var cur []string
	flush := func() {
		if q := strings.TrimSpace(strings.Join(cur, "\n")); q != "" {
			out = append(out, strings.TrimSuffix(q, ";"))
		}
		cur = nil
	}
	for _, line := range strings.Split(s, "\n") {
		t := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(t, "-- step"):
			flush()
		case strings.HasPrefix(t, "--"), t == "":
		default:
			cur = append(cur, line)
		}
	}
	flush()
	return out
}

// answers reports whether a service answers on svc's port (ours or
// someone else's): a resource it may use must then be left alone.
func (e *Env) answers(ctx context.Context, svc Service) bool {
	return e.Probe != nil && e.Probe(ctx, svc.Name, svc.Port+e.PortOffset) == nil
}

// LongLivedCommand is the command of the long-lived variant (the pairs
// measured on a million rows of history) and the kind of its results
// file.
const LongLivedCommand = "longlived"
