package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/postgres"
)

// TestMapError checks every rule of MapError on errors built here, each
// wrapped once more as a caller would, and that the cause always unwraps.
func TestMapError(t *testing.T) {
	t.Parallel()
	pg := func(code string) error {
		return fmt.Errorf("query: %w", &pgconn.PgError{Code: code, Message: "msg " + code})
	}
	netErr := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	for _, c := range []struct {
		name string
		err  error
		want int
	}{
		{"canceled", fmt.Errorf("q: %w", context.Canceled), httpapi.StatusClientClosedRequest},
		{"deadline", fmt.Errorf("q: %w", context.DeadlineExceeded), 503},
		{"22P05 untranslatable_character", pg(pgerrcode.UntranslatableCharacter), 400},
		{"22003 numeric_value_out_of_range", pg(pgerrcode.NumericValueOutOfRange), 400},
		{"23505 unique_violation", pg(pgerrcode.UniqueViolation), 409},
		{"57P03 cannot_connect_now", pg(pgerrcode.CannotConnectNow), 503},
		{"57P01 admin_shutdown", pg(pgerrcode.AdminShutdown), 503},
		{"57014 query_canceled", pg(pgerrcode.QueryCanceled), 503},
		{"08006 connection_failure", pg(pgerrcode.ConnectionFailure), 503},
		{"53300 too_many_connections", pg(pgerrcode.TooManyConnections), 503},
		{"40001 serialization_failure", pg(pgerrcode.SerializationFailure), 503},
		{"40P01 deadlock_detected", pg(pgerrcode.DeadlockDetected), 503},
		{"55P03 lock_not_available", pg(pgerrcode.LockNotAvailable), 503},
		{"25006 read_only_sql_transaction", pg(pgerrcode.ReadOnlySQLTransaction), 503},
		{"net error", fmt.Errorf("q: %w", netErr), 503},
		{"unexpected EOF", fmt.Errorf("q: %w", io.ErrUnexpectedEOF), 503},
		// What pgx answers when the connection died earlier in the same
		// operation (an immediate Postgres stop under a transaction):
		// seen as a 500 by loadtests/experiments' postgres-restart-under-load.
		{"conn closed", fmt.Errorf("insert events: %w", pgconn.ErrConnClosed), 503},
		{"42P01 undefined_table", pg(pgerrcode.UndefinedTable), 500},
		{"42601 syntax_error", pg(pgerrcode.SyntaxError), 500},
		{"23503 foreign_key_violation", pg(pgerrcode.ForeignKeyViolation), 500},
		{"not from postgres", errors.New("cannot scan"), 500},
	} {
		got := postgres.MapError("do it", c.err)
		if s := httpapi.StatusOf(got); s != c.want {
			t.Errorf("%s: status %d (%v), want %d", c.name, s, got, c.want)
		}
		if !errors.Is(got, c.err) {
			t.Errorf("%s: %v does not unwrap to its cause", c.name, got)
		}
		var pgErr *pgconn.PgError
		if errors.As(c.err, &pgErr) && !errors.As(got, &pgErr) {
			t.Errorf("%s: the *pgconn.PgError does not unwrap", c.name)
		}
		if got.Error()[:len("do it")] != "do it" {
			t.Errorf("%s: %q does not name the operation", c.name, got)
		}
	}
	if postgres.MapError("x", nil) != nil {
		t.Error("MapError(nil) != nil")
	}
}

// TestMapErrorOnRealErrors maps errors the server and the driver really
// return: a refused value, a missing table, an unreachable server and a
// connection terminated under a running statement.
func TestMapErrorOnRealErrors(t *testing.T) {
	t.Parallel()
	url := kittest.PostgresURL(t)
	pool := kittest.Pool(t, url, "")
	ctx := kittest.Context(t, 30*time.Second)

	_, err := pool.Exec(ctx, "SELECT $1::jsonb", `{"x": "\u0000"}`)
	if !postgres.IsDataError(err) || httpapi.StatusOf(postgres.MapError("x", err)) != http.StatusBadRequest {
		t.Errorf("a NUL in jsonb: %v", postgres.MapError("x", err))
	}
	_, err = pool.Exec(ctx, "SELECT * FROM no_such_table_here")
	if err == nil || postgres.IsDataError(err) || httpapi.StatusOf(postgres.MapError("x", err)) != http.StatusInternalServerError {
		t.Errorf("an unknown table: %v", postgres.MapError("x", err))
	}

	_, err = pgx.Connect(ctx, "postgres://postgres@127.0.0.1:1/wpe?sslmode=disable&connect_timeout=2")
	if got := postgres.MapError("x", err); httpapi.StatusOf(got) != http.StatusServiceUnavailable {
		t.Errorf("an unreachable server: %v, want 503", got)
	}

	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var pid int
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "SELECT pg_terminate_backend($1)", pid); err != nil {
		t.Fatal(err)
	}
	_, err = conn.Exec(ctx, "SELECT 1")
	if got := postgres.MapError("x", err); err == nil || httpapi.StatusOf(got) != http.StatusServiceUnavailable {
		t.Errorf("a terminated connection: %v, want 503", got)
	}
}
