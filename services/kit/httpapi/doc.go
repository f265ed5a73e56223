// Package httpapi is the HTTP layer every service shares: a chi router with
// request logging (log/slog), panic recovery and a request body limit;
// strict JSON decoding, which also holds every body to the one rule for
// JSON values (CheckJSONValues: no lone surrogates, no numbers that
// Postgres would write back far longer than sent); and the one place where an error returned by a
// handler becomes an HTTP status and a {"error": "..."} body.
//
// Handlers are written as HandlerFunc, which returns an error instead of
// writing one. Business code returns errors wrapping the sentinels
// (ErrNotFound, ErrConflict, ErrUnavailable, ErrUnsupported) or an *Error
// with an explicit status; WriteError maps them. An error that maps to
// nothing is a bug: it becomes a 500 whose body says "internal error" while
// the detail goes to the log.
package httpapi
