package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/cleaner"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/documents"
)

var (
	_ documents.Reporter   = (*store)(nil)
	_ documents.Sessions   = (*store)(nil)
	_ documents.ChangeFeed = (*feed)(nil)
)

// reportSQL is the aggregation report: @> selects the users (the GIN
// index serves a selective match), the group is the string at
// profile->>$2 (jsonb_typeof leaves out a missing key or another type),
// the average takes the numbers at profile->$3 only (as MongoDB's $avg
// ignores non-numbers; profile->” is NULL when none was asked, so the
// average is NULL), and COLLATE "C" orders ties by bytes, as MongoDB
// compares strings.
const reportSQL = `SELECT profile->>$2 AS value, count(*) AS n,
	       avg((profile->>$3)::float8) FILTER (WHERE jsonb_typeof(profile->$3) = 'number') AS average
	FROM users
	WHERE profile @> $1::jsonb AND jsonb_typeof(profile->$2) = 'string'
	GROUP BY 1
	ORDER BY n DESC, (profile->>$2) COLLATE "C"
	LIMIT $4`

// Report runs reportSQL (documents.Reporter).
func (s *store) Report(ctx context.Context, q documents.ReportQuery) ([]documents.ReportGroup, error) {
	rows, err := s.pool.Query(ctx, reportSQL, string(documents.Encode(q.Match)), q.GroupBy, q.Average, q.Top)
	if err != nil {
		return nil, mapErr(err, "")
	}
	groups, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (documents.ReportGroup, error) {
		var g documents.ReportGroup
		err := row.Scan(&g.Value, &g.Count, &g.Average)
		return g, err
	})
	return groups, mapErr(err, "")
}

const sessionCols = `id::text, user_id::text, data, created_at, expires_at`

func scanSession(row pgx.Row) (documents.Session, error) {
	var s documents.Session
	var data []byte
	err := row.Scan(&s.ID, &s.UserID, &data, &s.CreatedAt, &s.ExpiresAt)
	s.Data = data
	s.CreatedAt, s.ExpiresAt = s.CreatedAt.UTC(), s.ExpiresAt.UTC()
	return s, err
}

// CreateSession inserts the session (documents.Sessions).
func (s *store) CreateSession(ctx context.Context, n documents.NewSession) (documents.Session, error) {
	out, err := scanSession(s.pool.QueryRow(ctx,
		`INSERT INTO sessions (id, user_id, data, created_at, expires_at) VALUES ($1, $2, $3::jsonb, $4, $5)
		 RETURNING `+sessionCols, n.ID, n.UserID, string(documents.Encode(n.Data)), n.CreatedAt, n.ExpiresAt))
	return out, mapErr(err, n.ID)
}

// GetSession reads the session unless it expired at now: the delete job
// removes expired rows late (every RETENTION_INTERVAL), the read never
// returns one.
func (s *store) GetSession(ctx context.Context, id string, now time.Time) (documents.Session, error) {
	out, err := scanSession(s.pool.QueryRow(ctx, `SELECT `+sessionCols+` FROM sessions WHERE id = $1 AND expires_at > $2`, id, now))
	if errors.Is(err, pgx.ErrNoRows) {
		return out, documents.SessionNotFound(id)
	}
	return out, mapErr(err, id)
}

// DeleteSession removes the session.
func (s *store) DeleteSession(ctx context.Context, id string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM sessions WHERE id = $1`, id)
	if err != nil {
		return mapErr(err, id)
	}
	if tag.RowsAffected() == 0 {
		return documents.SessionNotFound(id)
	}
	return nil
}

// sessionsJob removes expired sessions, oldest expiry first, grace
// after their expiry (EXPIRED_RETENTION; the cleaner's own retention is
// the changes'), in batches; SKIP LOCKED lets two instances' jobs share
// the work.
func sessionsJob(pool *pgxpool.Pool, grace time.Duration) cleaner.Job {
	j := cleaner.SQLJob("sessions", pool, `DELETE FROM sessions WHERE id IN (
	    SELECT id FROM sessions WHERE expires_at < clock_timestamp() - $1::bigint * interval '1 microsecond'
	    ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED)`)
	del := j.Delete
	j.Delete = func(ctx context.Context, _ time.Duration, limit int) (int64, error) { return del(ctx, grace, limit) }
	return j
}

// changesJob removes changes older than CHANGES_RETENTION in position
// order, below the watermark, and raises the horizon to the last one it
// removed, in one statement: a token below the horizon is then a 410.
func changesJob(pool *pgxpool.Pool) cleaner.Job {
	const sql = `WITH gone AS (
	    DELETE FROM user_changes WHERE (tx, seq) IN (
	        SELECT tx, seq FROM user_changes
	        WHERE at < clock_timestamp() - $1::bigint * interval '1 microsecond'
	          AND tx < pg_snapshot_xmin(pg_current_snapshot())
	        ORDER BY tx, seq LIMIT $2 FOR UPDATE SKIP LOCKED)
	    RETURNING tx, seq),
	  last AS (SELECT tx, seq FROM gone ORDER BY tx DESC, seq DESC LIMIT 1),
	  moved AS (UPDATE user_changes_horizon h SET tx = last.tx, seq = last.seq
	            FROM last WHERE (last.tx, last.seq) > (h.tx, h.seq) RETURNING 1)
	SELECT count(*) FROM gone`
	return cleaner.Job{Name: "user_changes", Delete: func(ctx context.Context, olderThan time.Duration, limit int) (int64, error) {
		var n int64
		err := pool.QueryRow(ctx, sql, olderThan.Microseconds(), limit).Scan(&n)
		return n, err
	}}
}

// position is a place in the change feed: (tx, seq), in the order of
// user_changes' primary key; its token is "<tx>-<seq>".
type position struct {
	tx  uint64
	seq int64
}

func (p position) token() string {
	return strconv.FormatUint(p.tx, 10) + "-" + strconv.FormatInt(p.seq, 10)
}

func (p position) less(q position) bool { return p.tx < q.tx || p.tx == q.tx && p.seq < q.seq }

// xid scans an xid8 sent as text (pgx has no xid8 type).
type xid uint64

// ScanText implements pgtype.TextScanner.
func (x *xid) ScanText(v pgtype.Text) error {
	n, err := strconv.ParseUint(v.String, 10, 64)
	*x = xid(n)
	return err
}

// parsePosition reads a token of this side (UnknownToken's 404 when it
// is not one).
func parsePosition(token string) (position, error) {
	tx, seq, ok := strings.Cut(token, "-")
	t, err1 := strconv.ParseUint(tx, 10, 64)
	s, err2 := strconv.ParseInt(seq, 10, 64)
	if !ok || err1 != nil || err2 != nil || s < 0 {
		return position{}, documents.UnknownToken(token, "this side's are <transaction id>-<sequence>")
	}
	return position{t, s}, nil
}

// feed is the Postgres documents.ChangeFeed: it reads user_changes below
// the xid8 watermark, woken by this process's own writes (wake) and
// polling every poll for other writers' (another instance, psql).
// Safe for concurrent use.
type feed struct {
	pool  *pgxpool.Pool
	poll  time.Duration
	batch int

	mu     sync.Mutex
	signal chan struct{} // closed by wake; replaced by waitCh
}

// wake tells the open streams that a write committed.
func (f *feed) wake() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.signal != nil {
		close(f.signal)
		f.signal = nil
	}
}

// waitCh is the channel the next wake closes.
func (f *feed) waitCh() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.signal == nil {
		f.signal = make(chan struct{})
	}
	return f.signal
}

// start is where a stream begins: after the token, which must be no
// older than the horizon (410) and not ahead of the server's next
// transaction id (404: another database's token), or, for "", at the
// watermark (every change of a transaction not yet ended is after it).
func (f *feed) start(ctx context.Context, after string) (position, error) {
	var h, xmin, xmax xid
	var hseq int64
	err := f.pool.QueryRow(ctx, `SELECT h.tx::text, h.seq,
	        pg_snapshot_xmin(pg_current_snapshot())::text, pg_snapshot_xmax(pg_current_snapshot())::text
	    FROM user_changes_horizon h`).Scan(&h, &hseq, &xmin, &xmax)
	if err != nil {
		return position{}, mapErr(err, "")
	}
	htx := uint64(h)
	if after == "" {
		return position{tx: uint64(xmin)}, nil
	}
	p, err := parsePosition(after)
	if err != nil {
		return p, err
	}
	if p.less(position{htx, hseq}) {
		return p, documents.TokenGone(after, fmt.Sprintf("CHANGES_RETENTION removed the changes up to %s", position{htx, hseq}.token()))
	}
	if p.tx >= uint64(xmax) {
		return p, documents.UnknownToken(after, "it is ahead of this database's transactions: another database's?")
	}
	return p, nil
}

// readSQL reads the horizon and the next changes after ($1, $2) that no
// running transaction can precede (see migrations/documents/0002), in
// one statement and so in one snapshot: the first row is the horizon
// (op and user_id empty), the rest the changes in position order. A
// horizon past ($1, $2) in that snapshot means the cleaner removed
// changes after the stream's position before the stream read them; a
// removal that commits after the snapshot leaves rows the read still
// sees. Either way nothing is skipped in silence.
const readSQL = `SELECT tx::text, seq, op, user_id FROM (
	    SELECT 0 AS k, tx, seq, '' AS op, '' AS user_id FROM user_changes_horizon
	    UNION ALL
	    (SELECT 1, tx, seq, op, user_id::text FROM user_changes
	     WHERE (tx, seq) > ($1::text::xid8, $2::bigint) AND tx < pg_snapshot_xmin(pg_current_snapshot())
	     ORDER BY tx, seq LIMIT $3)) r
	ORDER BY k, tx, seq`

// read delivers the changes after p, in batches, and returns the
// position of the last one delivered and whether a batch was full. A
// stream the cleaner has overtaken (the horizon is past p: changes it
// had not read are gone) ends with TokenGone's 410, as its token would
// get at the start.
func (f *feed) read(ctx context.Context, p position, deliver func(documents.Change) error) (position, bool, error) {
	rows, err := f.pool.Query(ctx, readSQL, strconv.FormatUint(p.tx, 10), p.seq, f.batch)
	if err != nil {
		return p, false, mapErr(err, "")
	}
	var changes []documents.Change
	var last []position
	var horizon position
	for n := 0; rows.Next(); n++ {
		var c documents.Change
		var tx xid
		var q position
		if err := rows.Scan(&tx, &q.seq, &c.Op, &c.ID); err != nil {
			rows.Close()
			return p, false, mapErr(err, "")
		}
		q.tx = uint64(tx)
		if n == 0 {
			horizon = q
			continue
		}
		c.Token = q.token()
		changes, last = append(changes, c), append(last, q)
	}
	if err := rows.Err(); err != nil {
		return p, false, mapErr(err, "")
	}
	if p.less(horizon) {
		return p, false, documents.TokenGone(p.token(), fmt.Sprintf("CHANGES_RETENTION removed the changes up to %s before this stream read them", horizon.token()))
	}
	for i, c := range changes {
		if err := deliver(c); err != nil {
			return p, false, err
		}
		p = last[i]
	}
	return p, len(changes) == f.batch, nil
}

// Changes streams the feed (documents.ChangeFeed).
func (f *feed) Changes(ctx context.Context, after string, open func(string) error, deliver func(documents.Change) error) error {
	p, err := f.start(ctx, after)
	if err != nil {
		return err
	}
	if err := open(p.token()); err != nil {
		return err
	}
	t := time.NewTicker(f.poll)
	defer t.Stop()
	for {
		// Take the wake channel before reading: a write that commits
		// during the read closes it, and the next read sees the write.
		woken := f.waitCh()
		next, full, err := f.read(ctx, p, deliver)
		if err != nil {
			return err
		}
		p = next
		if full {
			continue
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-woken:
		case <-t.C:
		}
	}
}
