package kittest

import (
	"testing"
	"testing/fstest"
)

func TestMigratedPoolAndConnOnRealPostgres(t *testing.T) {
	t.Parallel()
	fsys := fstest.MapFS{"0001_things.sql": {Data: []byte(
		"-- +goose Up\nCREATE TABLE things (n int);\nINSERT INTO things VALUES (1), (2);\n-- +goose Down\nDROP TABLE things;\n")}}
	pool := MigratedPool(t, fsys, 1)
	if n := Count(t, pool, `SELECT count(*) FROM things`); n != 2 {
		t.Errorf("things has %d rows, want the migration's 2", n)
	}
	if got := pool.Config().MaxConns; got != 1 {
		t.Errorf("MaxConns = %d, want 1", got)
	}
	var schema string
	if err := pool.QueryRow(t.Context(), `SELECT current_schema()`).Scan(&schema); err != nil {
		t.Fatal(err)
	}
	conn := Conn(t, PostgresURL(t))
	var table string
	if err := conn.QueryRow(t.Context(), `SELECT to_regclass($1)::text`, schema+".things").Scan(&table); err != nil || table == "" {
		t.Errorf("a new connection does not see %s.things: %q, %v", schema, table, err)
	}
}
