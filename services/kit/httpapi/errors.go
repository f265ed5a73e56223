package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
)

// Sentinel errors that business code wraps (fmt.Errorf("task %s: %w", id,
// httpapi.ErrNotFound)) and WriteError maps to a status.
var (
	// ErrNotFound maps to 404.
	ErrNotFound = errors.New("not found")
	// ErrConflict maps to 409.
	ErrConflict = errors.New("conflict")
	// ErrUnsupported maps to 422: the request is valid but this backend
	// lacks the capability it needs (say which in the wrapping message).
	ErrUnsupported = errors.New("not supported by this backend")
	// ErrUnavailable maps to 503: a backend could not be reached or timed
	// out; the client may retry.
	ErrUnavailable = errors.New("backend unavailable")
)

// Error is an error with an explicit HTTP status and message, plus optional
// extra fields for the JSON body (for example "actual_version" on a 409).
type Error struct {
	// Status is the HTTP status code.
	Status int
	// Message is shown to the client as "error".
	Message string
	// Fields are added to the JSON body beside "error".
	Fields map[string]any
	// Cause, if set, is logged but never shown.
	Cause error
}

// Error implements error.
func (e *Error) Error() string { return e.Message }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Cause }

// Errorf returns an *Error with the status and a formatted message.
func Errorf(status int, format string, args ...any) *Error {
	return &Error{Status: status, Message: fmt.Sprintf(format, args...)}
}

// BadRequest returns a 400 *Error.
func BadRequest(format string, args ...any) *Error {
	return Errorf(http.StatusBadRequest, format, args...)
}

// StatusClientClosedRequest is the status (nginx's 499) recorded when the
// client went away before the answer: nobody reads it, but logs and
// /metrics must not count the client's hang-up as a server failure.
const StatusClientClosedRequest = 499

// StatusOf returns the HTTP status an error maps to.
func StatusOf(err error) int {
	var e *Error
	switch {
	case err == nil:
		return http.StatusOK
	case errors.As(err, &e):
		return e.Status
	case errors.Is(err, context.Canceled):
		return StatusClientClosedRequest
	case errors.Is(err, ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, ErrConflict):
		return http.StatusConflict
	case errors.Is(err, ErrUnsupported):
		return http.StatusUnprocessableEntity
	case errors.Is(err, ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable
	default:
		return http.StatusInternalServerError
	}
}

// WriteError writes err as a JSON error body with the status StatusOf
// gives, and logs server-side failures (5xx) with their cause.
func WriteError(w http.ResponseWriter, r *http.Request, err error) {
	status := StatusOf(err)
	body := map[string]any{}
	var e *Error
	if errors.As(err, &e) {
		for k, v := range e.Fields {
			body[k] = v
		}
	}
	msg := err.Error()
	switch {
	case e != nil:
	case status == http.StatusInternalServerError:
		msg = "internal error"
	case status == http.StatusServiceUnavailable:
		// A driver's error names hosts, ports, connection ids and
		// internals ("connection(localhost:27017[-3]) incomplete read
		// ..."): logged below, not shown. An *Error's message is the
		// handler's own and stays.
		msg = "backend unavailable or too slow; retry later"
	}
	body["error"] = msg
	switch {
	case status == StatusClientClosedRequest:
		Logger(r.Context()).LogAttrs(r.Context(), slog.LevelDebug, "client went away",
			slog.String("err", err.Error()))
	case status >= 500:
		Logger(r.Context()).LogAttrs(r.Context(), slog.LevelError, "request failed",
			slog.Int("status", status), slog.String("err", err.Error()))
	}
	WriteJSON(w, status, body)
}
