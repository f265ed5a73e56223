package raw

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// How the retention measurement's WAL figures were taken, Retention.WAL.
const (
	// WALRecords counts the WAL records pg_walinspect reads between a
	// removal's start and end that belong to it: every record that
	// changes a page of the measured table (heap, visibility map,
	// indexes, TOAST) and every record of the transactions that wrote
	// them or that the removal ran. Other work on the server does not
	// count.
	WALRecords = "records"
	// WALAdvance is the server's WAL insert position's advance over the
	// removal: anything else writing at the time counts too. It is the
	// fallback when pg_walinspect cannot be read (not installed, or the
	// role is neither a superuser nor in pg_read_server_files).
	WALAdvance = "advance"
)

// walMeter measures the WAL a piece of work writes: with pg_walinspect
// when it can (fn is its qualified pg_get_wal_records_info), else as the
// server's WAL position's advance.
type walMeter struct {
	db *pgxpool.Pool
	// fn is the schema-qualified pg_get_wal_records_info, "" when the
	// meter falls back to WALAdvance.
	fn string
}

// newWALMeter creates pg_walinspect in db's database when it is missing
// (in schema public, and leaves it there: a concurrent measurement may be
// using it) and returns a meter that reads it; when it cannot, the meter
// measures the WAL position's advance and note says why.
func newWALMeter(ctx context.Context, db *pgxpool.Pool) (m walMeter, note string) {
	m.db = db
	schema, err := walinspectSchema(ctx, db)
	if err == nil && schema == "" {
		_, err = db.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_walinspect SCHEMA public`)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "23505" {
			err = nil // created at the same moment by another session
		}
		if err == nil {
			schema, err = walinspectSchema(ctx, db)
		}
	}
	if err == nil && schema != "" {
		fn := pgx.Identifier{schema, "pg_get_wal_records_info"}.Sanitize()
		// Reading needs a superuser or pg_read_server_files.
		var ok bool
		err = db.QueryRow(ctx, `SELECT has_function_privilege($1, 'EXECUTE')`, fn+"(pg_lsn, pg_lsn)").Scan(&ok)
		if err == nil && ok {
			m.fn = fn
			return m, ""
		}
		if err == nil {
			err = errors.New("no EXECUTE on pg_get_wal_records_info: the role is neither a superuser nor in pg_read_server_files")
		}
	}
	if err == nil {
		err = errors.New("extension not found after CREATE EXTENSION")
	}
	return m, fmt.Sprintf("pg_walinspect cannot be read (%v): WAL is the server's WAL position's advance", err)
}

// walinspectSchema is the schema pg_walinspect is installed in, "" when it
// is not installed.
func walinspectSchema(ctx context.Context, db *pgxpool.Pool) (string, error) {
	var s string
	err := db.QueryRow(ctx, `SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pg_walinspect'`).Scan(&s)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	return s, err
}

// source is the meter's Retention.WAL.
func (m walMeter) source() string {
	if m.fn == "" {
		return WALAdvance
	}
	return WALRecords
}

// walScope says which records are a piece of work's own.
type walScope struct {
	// table is the table whose pages count (with its indexes, TOAST
	// table and TOAST index), "" for none. It must exist when timed
	// begins and keep its files until the work ends (DML and VACUUM do).
	table string
	// xids are the transactions (32-bit xids as text) the work ran,
	// filled in by the work itself when it cannot be found by table.
	xids []string
}

// timed runs fn and returns its wall time and the WAL it wrote, measured
// as m.source() says, scope naming its own records.
func (m walMeter) timed(ctx context.Context, scope *walScope, fn func() error) (time.Duration, int64, error) {
	pages := "" // a regular expression on block_ref; "" matches nothing
	if m.fn != "" && scope.table != "" {
		// block_ref reads "blkref #0: rel 1663/16384/16390 fork main blk 0"
		// (tablespace/database/relfilenode).
		err := m.db.QueryRow(ctx, `
WITH t AS (SELECT $1::regclass AS rel, (SELECT reltoastrelid FROM pg_class WHERE oid = $1::regclass) AS toast),
     rels AS (
         SELECT rel FROM t UNION ALL SELECT toast FROM t WHERE toast <> 0
         UNION ALL SELECT indexrelid FROM pg_index, t WHERE indrelid IN (t.rel, t.toast)
     )
SELECT 'rel \d+/' || (SELECT oid FROM pg_database WHERE datname = current_database()) || '/('
       || string_agg(pg_relation_filenode(rel)::text, '|') || ') '
  FROM rels`, scope.table).Scan(&pages)
		if err != nil {
			return 0, 0, err
		}
	}
	var start string
	if err := m.db.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&start); err != nil {
		return 0, 0, err
	}
	began := time.Now()
	ferr := fn()
	el := time.Since(began)
	var n int64
	var err error
	if m.fn == "" {
		err = m.db.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $1::pg_lsn)::bigint`, start).Scan(&n)
	} else {
		n, err = m.records(ctx, start, pages, scope.xids)
	}
	return el, n, errors.Join(ferr, err)
}

// records sums the length (full-page images included) of the records
// from start to the current insert position that change pages matching
// the regular expression pages, belong to a transaction that wrote such
// a record, or belong to one of xids.
func (m walMeter) records(ctx context.Context, start, pages string, xids []string) (int64, error) {
	var end string
	if err := m.db.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&end); err != nil {
		return 0, err
	}
	// pg_walinspect reads only flushed WAL; a VACUUM's records wait for
	// the WAL writer (wal_writer_delay, 200 ms by default).
	for flushed := false; !flushed; {
		if err := m.db.QueryRow(ctx, `SELECT pg_current_wal_flush_lsn() >= $1::pg_lsn`, end).Scan(&flushed); err != nil {
			return 0, err
		}
		if !flushed {
			select {
			case <-ctx.Done():
				return 0, ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	var n int64
	var empty bool
	if err := m.db.QueryRow(ctx, `SELECT $1::pg_lsn <= $2::pg_lsn`, end, start).Scan(&empty); err != nil || empty {
		return 0, err // nothing written: pg_walinspect refuses an empty range
	}
	err := m.db.QueryRow(ctx, `
WITH r AS (
    SELECT xid::text AS x, record_length AS n, $3 <> '' AND coalesce(block_ref ~ $3, false) AS mine
      FROM `+m.fn+`($1::pg_lsn, $2::pg_lsn)
), writers AS (SELECT DISTINCT x FROM r WHERE mine AND x <> '0')
SELECT coalesce(sum(n), 0)::bigint FROM r
 WHERE mine OR x = ANY($4::text[]) OR x IN (SELECT x FROM writers)`, start, end, pages, xids).Scan(&n)
	return n, err
}
