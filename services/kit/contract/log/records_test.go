package log

import (
	"encoding/json"
	"io/fs"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// recordsPool returns a one-connection pool on a fresh schema migrated
// with the log pair's migrations, so that every statement of a test runs
// on the same session.
func recordsPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	migrations, err := fs.Sub(os.DirFS("../../../../migrations"), "log")
	if err != nil {
		t.Fatal(err)
	}
	return kittest.MigratedPool(t, migrations, 1)
}

// TestInsertCommitsWithItsOwnSynchronousCommit: the events of one Insert
// commit together, with the records' synchronous_commit applied inside
// their transaction (a trigger records the setting each row saw) and not
// left on the pooled connection afterwards; a batch with a duplicate id
// writes none of its events.
func TestInsertCommitsWithItsOwnSynchronousCommit(t *testing.T) {
	t.Parallel()
	pool := recordsPool(t)
	ctx := kittest.Context(t, 30*time.Second)
	for _, q := range []string{
		`CREATE TABLE seen (id uuid, sync text)`,
		`CREATE FUNCTION note_sync() RETURNS trigger LANGUAGE plpgsql AS $$
		 BEGIN INSERT INTO seen VALUES (NEW.id, current_setting('synchronous_commit')); RETURN NEW; END $$`,
		`CREATE TRIGGER note_sync AFTER INSERT ON messages FOR EACH ROW EXECUTE FUNCTION note_sync()`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	var def string
	if err := pool.QueryRow(ctx, `SHOW synchronous_commit`).Scan(&def); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"on": "off", "off": "on"}[def]
	if want == "" {
		want = "off"
	}
	recs := NewRecords(pool, want)
	ev := func(id string) NewEvent {
		return NewEvent{ID: id, Type: "t", Key: "k", Payload: json.RawMessage(`{}`)}
	}
	a, b := "00000000-0000-4000-8000-00000000000a", "00000000-0000-4000-8000-00000000000b"
	out, err := recs.Insert(ctx, []NewEvent{ev(a), ev(b)})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 2 || out[0].ID != a || out[1].ID != b || !out[0].CreatedAt.Before(out[1].CreatedAt) && !out[0].CreatedAt.Equal(out[1].CreatedAt) {
		t.Fatalf("Insert = %+v, want a then b with their created_at", out)
	}
	rows, err := pool.Query(ctx, `SELECT sync FROM seen`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var got string
		if err := rows.Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("an inserted row saw synchronous_commit %q, want %q", got, want)
		}
	}
	rows.Close()
	var after string
	if err := pool.QueryRow(ctx, `SHOW synchronous_commit`).Scan(&after); err != nil {
		t.Fatal(err)
	}
	if after != def {
		t.Errorf("synchronous_commit on the pooled connection after Insert = %q, want the server's %q", after, def)
	}

	c := "00000000-0000-4000-8000-00000000000c"
	if _, err := recs.Insert(ctx, []NewEvent{ev(c), ev(a)}); err == nil {
		t.Fatal("Insert with a duplicate id succeeded")
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM messages WHERE id = $1`, c).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("the failed batch's other event was written (%d rows)", n)
	}
}
