package main

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/where-postgres-ends/where-postgres-ends/migrations"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/cleaner"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/documents"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/ids"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/postgres"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/stats"
)

// migratedPool opens a pool on a migrated schema of the test's own.
func migratedPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	cfg := schemaConfig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := postgres.OpenMigrated(ctx, cfg.Postgres, migrations.MustFS("documents"), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// TestCleanerRemovesExpiredSessionsAndOldChanges: one pass of the cleaner
// removes the sessions expired longer than EXPIRED_RETENTION (and keeps a
// live one), removes the changes older than CHANGES_RETENTION, and raises
// the horizon, so that a token below it is a 410 while the newest change's
// token still opens a stream.
func TestCleanerRemovesExpiredSessionsAndOldChanges(t *testing.T) {
	t.Parallel()
	pool := migratedPool(t)
	ctx := context.Background()
	st := &store{pool: pool}
	now := time.Now().UTC().Truncate(time.Millisecond)
	expired, live := ids.New(), ids.New()
	for id, exp := range map[string]time.Time{expired: now.Add(-time.Minute), live: now.Add(time.Hour)} {
		if _, err := st.CreateSession(ctx, documents.NewSession{ID: id, UserID: ids.New(), Data: documents.Object{}, CreatedAt: now.Add(-2 * time.Minute), ExpiresAt: exp}); err != nil {
			t.Fatal(err)
		}
	}
	f := &feed{pool: pool, poll: 50 * time.Millisecond, batch: 10}
	first := openToken(t, f)
	threeChangesTwoAged(t, st)
	c := cleaner.New(cleaner.Config{Retention: time.Hour, Batch: 1}, stats.New(stats.Info{}, nil, nil), slog.New(slog.DiscardHandler),
		changesJob(pool), sessionsJob(pool, time.Millisecond))
	if n, err := c.RunOnce(ctx); err != nil || n != 3 {
		t.Fatalf("RunOnce removed %d (%v), want 2 changes and 1 session", n, err)
	}
	if _, err := st.GetSession(ctx, live, now); err != nil {
		t.Errorf("the live session: %v", err)
	}
	var left int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM sessions WHERE id = $1`, expired).Scan(&left); err != nil || left != 0 {
		t.Errorf("the expired session is still stored (%d, %v)", left, err)
	}
	err := f.Changes(ctx, first, func(string) error { return nil }, func(documents.Change) error { return nil })
	if httpapi.StatusOf(err) != http.StatusGone {
		t.Errorf("a token below the horizon: %v, want a 410", err)
	}
	var tx, seq string
	if err := pool.QueryRow(ctx, `SELECT tx::text, seq::text FROM user_changes ORDER BY tx DESC, seq DESC LIMIT 1`).Scan(&tx, &seq); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	opened := false
	err = f.Changes(cctx, tx+"-"+seq, func(string) error { opened = true; return nil }, func(c documents.Change) error {
		t.Errorf("after the newest change: %+v", c)
		return nil
	})
	if !opened || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("the newest change's token: opened %v, %v", opened, err)
	}
}

// openToken is the token a stream from now opens at.
func openToken(t testing.TB, f *feed) string {
	t.Helper()
	var token string
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errOpened := errors.New("opened")
	err := f.Changes(ctx, "", func(tok string) error { token = tok; return errOpened }, func(documents.Change) error { return nil })
	if !errors.Is(err, errOpened) {
		t.Fatal(err)
	}
	return token
}

// TestStreamOvertakenByTheCleanerEnds: a stream whose position the
// cleaner has passed (it removed changes the stream had not read yet)
// ends with a 410 on its next read instead of going on past the gap.
func TestStreamOvertakenByTheCleanerEnds(t *testing.T) {
	t.Parallel()
	pool := migratedPool(t)
	ctx := context.Background()
	st := &store{pool: pool}
	f := &feed{pool: pool, poll: 50 * time.Millisecond, batch: 10}
	from, err := parsePosition(openToken(t, f))
	if err != nil {
		t.Fatal(err)
	}
	// The stream at from reads none of the three before the cleaner
	// removes the first two.
	threeChangesTwoAged(t, st)
	c := cleaner.New(cleaner.Config{Retention: time.Hour, Batch: 10}, stats.New(stats.Info{}, nil, nil), slog.New(slog.DiscardHandler), changesJob(pool))
	if n, err := c.RunOnce(ctx); err != nil || n != 2 {
		t.Fatalf("RunOnce removed %d (%v), want the 2 aged changes", n, err)
	}
	var got []documents.Change
	_, _, err = f.read(ctx, from, func(c documents.Change) error { got = append(got, c); return nil })
	if httpapi.StatusOf(err) != http.StatusGone || len(got) != 0 {
		t.Errorf("a read behind the horizon delivered %d changes and returned %v, want none and a 410", len(got), err)
	}
}

// threeChangesTwoAged creates three users, so three changes, ages the
// first two past a retention of an hour, and waits until all three are
// below the watermark, where the cleaner removes changes: any other
// test's transaction that holds it back has ended.
func threeChangesTwoAged(t testing.TB, st *store) {
	t.Helper()
	ctx := context.Background()
	for range 3 {
		if _, err := st.Create(ctx, documents.NewUser{ID: ids.New(), Email: ids.New() + "@example.com", Name: "n", Plan: "p", Profile: documents.Object{}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.pool.Exec(ctx, `UPDATE user_changes SET at = now() - interval '2 hours' WHERE (tx, seq) IN (SELECT tx, seq FROM user_changes ORDER BY tx, seq LIMIT 2)`); err != nil {
		t.Fatal(err)
	}
	kittest.Eventually(t, 10*time.Second, "the changes below the watermark", func() bool {
		var n int
		err := st.pool.QueryRow(ctx, `SELECT count(*) FROM user_changes WHERE tx < pg_snapshot_xmin(pg_current_snapshot())`).Scan(&n)
		return err == nil && n == 3
	})
}
