package postgres_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/ids"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/postgres"
)

// TestUUIDsEncodeInBinary checks that canonical ids become a parameter
// pgx encodes as a binary uuid[] (no failed attempt first), and that
// anything else is passed through unchanged.
func TestUUIDsEncodeInBinary(t *testing.T) {
	t.Parallel()
	a, b := ids.New(), strings.ToUpper(ids.New())
	got, ok := postgres.UUIDs([]string{a, b}).([][16]byte)
	if !ok || len(got) != 2 {
		t.Fatalf("UUIDs of two canonical ids = %T, want [][16]byte", postgres.UUIDs([]string{a, b}))
	}
	m := pgtype.NewMap()
	if _, err := m.Encode(pgtype.UUIDArrayOID, pgtype.BinaryFormatCode, got, nil); err != nil {
		t.Errorf("binary uuid[] encode: %v", err)
	}
	for _, bad := range []string{"", "not-a-uuid", strings.Replace(a, "-", "x", 1), a[:35] + "g"} {
		if v, ok := postgres.UUIDs([]string{a, bad}).([]string); !ok || len(v) != 2 {
			t.Errorf("UUIDs with %q = %#v, want the []string unchanged", bad, v)
		}
	}
}

// TestUUIDsRoundTrip sends the parameter to the real Postgres and reads
// the ids back as text: the same ids, lower case, in order.
func TestUUIDsRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := kittest.Context(t, 30*time.Second)
	conn, err := pgx.Connect(ctx, kittest.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	in := []string{ids.New(), strings.ToUpper(ids.New()), ids.New()}
	var out []string
	if err := conn.QueryRow(ctx, `SELECT array_agg(u::text ORDER BY n) FROM unnest($1::uuid[]) WITH ORDINALITY AS t(u, n)`, postgres.UUIDs(in)).Scan(&out); err != nil {
		t.Fatal(err)
	}
	for i := range in {
		if out[i] != strings.ToLower(in[i]) {
			t.Errorf("id %d: sent %s, read back %s", i, in[i], out[i])
		}
	}
}
