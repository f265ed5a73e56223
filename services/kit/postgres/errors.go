package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
)

// SQLSTATE returns the code of the first *pgconn.PgError in err's chain,
// or "" if there is none. Compare it with the constants of
// github.com/jackc/pgerrcode.
func SQLSTATE(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// IsDataError reports whether err is Postgres refusing a value (SQLSTATE
// class 22, data exception: a NUL byte in text, an invalid Unicode escape
// in jsonb, a number out of range, ...). Such an error is the client's
// input, not a server failure: services answer it with 400. Validation
// should catch these first; this is the backstop.
func IsDataError(err error) bool {
	return pgerrcode.IsDataException(SQLSTATE(err))
}

// IsUnavailable reports whether err means that Postgres could not be
// reached or could not serve the statement now, so that the same request
// may succeed if retried: a timeout, a connection that failed or was lost
// (also earlier in the same operation: pgconn.ErrConnClosed),
// a server starting up or shutting down (57P03 cannot_connect_now, 57P01
// admin_shutdown, class 57), out of connections or other resources (class
// 53), a serialization failure or deadlock (class 40), a lock timeout
// (55P03) or a read-only standby (25006, after a failover).
func IsUnavailable(err error) bool {
	if code := SQLSTATE(err); code != "" {
		return pgerrcode.IsConnectionException(code) ||
			pgerrcode.IsOperatorIntervention(code) ||
			pgerrcode.IsInsufficientResources(code) ||
			pgerrcode.IsTransactionRollback(code) ||
			code == pgerrcode.LockNotAvailable ||
			code == pgerrcode.ReadOnlySQLTransaction
	}
	var netErr net.Error
	var connectErr *pgconn.ConnectError
	return errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err) ||
		pgconn.SafeToRetry(err) || errors.As(err, &connectErr) || errors.As(err, &netErr) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, pgconn.ErrConnClosed)
}

// MapError turns an error of a Postgres call into the error a handler
// returns, so that httpapi.WriteError answers with the right status; what
// names the operation ("read task") and prefixes the message. The cause
// always stays in the chain (errors.Is and errors.As see it):
//
//   - nil stays nil;
//   - context.Canceled (the client went away) stays so: 499;
//   - a refused value (class 22, data exception) is the client's: an
//     *httpapi.Error with status 400 naming Postgres's message;
//   - a unique violation (23505) wraps httpapi.ErrConflict: 409;
//   - what IsUnavailable reports wraps httpapi.ErrUnavailable: 503;
//   - anything else (a bug: a syntax error, a missing table, a scan into
//     the wrong type) is wrapped as it is: 500.
//
// Callers that give some codes a contract-specific answer (a 409 body with
// the conflicting id, 404 for pgx.ErrNoRows) check for them first.
func MapError(what string, err error) error {
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("%s: %w", what, err)
	case IsDataError(err) && errors.As(err, &pgErr):
		return &httpapi.Error{Status: http.StatusBadRequest, Cause: err,
			Message: what + ": the database refused a value: " + pgErr.Message}
	case SQLSTATE(err) == pgerrcode.UniqueViolation:
		return fmt.Errorf("%s: %w: %w", what, httpapi.ErrConflict, err)
	case IsUnavailable(err):
		return fmt.Errorf("%s: %w: %w", what, httpapi.ErrUnavailable, err)
	default:
		return fmt.Errorf("%s: %w", what, err)
	}
}
