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
	// ErrNotImplemented maps to 501: this backend's server has no such
	// feature at all (FerretDB's change streams); say which server in
	// the wrapping message.
	ErrNotImplemented = errors.New("not implemented by this backend's server")
	// ErrUnavailable maps to 503: a backend could not be reached or timed
	// out. Its kind (KindOf) is "unknown" for a write unless the error
	// also wraps ErrNotRecorded.
	ErrUnavailable = errors.New("backend unavailable")
	// ErrNotRecorded maps to 503 of kind "not_recorded": the write was
	// refused before anything was recorded, so a retry is safe. It wraps
	// ErrUnavailable.
	ErrNotRecorded = fmt.Errorf("%w; nothing was recorded", ErrUnavailable)
	// ErrDeliveryUnknown maps to 503 of kind "unknown": the write may be
	// recorded (or is) and may still be delivered or run, so a retry may
	// do it twice. It wraps ErrUnavailable.
	ErrDeliveryUnknown = fmt.Errorf("%w; the write may be recorded and may still take effect", ErrUnavailable)
)

// Kind says what a 503 means for the request that got it; WriteError puts
// it in the body's "kind" and the Error-Kind header, and KindOf is the one
// place that decides it.
type Kind string

// The kinds of 503.
const (
	// KindNotRecorded: nothing was recorded; a retry is safe. Every 503 on
	// a read (GET, HEAD) is of this kind: a read records nothing.
	KindNotRecorded Kind = "not_recorded"
	// KindUnknown: the write may have been recorded (or was) and may still
	// be delivered or run; a retry may do it twice. A client checks first
	// (the body's "ids", when given, can be read back) or accepts the
	// duplicate. Every 503 on a write that does not say otherwise is of
	// this kind: a timeout or a lost connection during a commit cannot
	// tell whether the commit happened.
	KindUnknown Kind = "unknown"
	// KindShed: refused by an admission limit before anything was
	// recorded (MAX_IN_FLIGHT and MAX_WAITERS before the handler runs,
	// the queue's MAX_BACKLOG in it); a retry after Retry-After is safe.
	KindShed Kind = "shed"
)

// KindHeader is the response header that repeats a 503's kind.
const KindHeader = "Error-Kind"

// KindOf returns the kind of the 503 that err maps to for request r, or ""
// if err does not map to 503: an *Error's own Kind, else ErrNotRecorded's
// or ErrDeliveryUnknown's, else "not_recorded" for a read (GET, HEAD) and
// "unknown" for a write.
func KindOf(r *http.Request, err error) Kind {
	if StatusOf(err) != http.StatusServiceUnavailable {
		return ""
	}
	var e *Error
	switch {
	case errors.As(err, &e) && e.Kind != "":
		return e.Kind
	case errors.Is(err, ErrNotRecorded):
		return KindNotRecorded
	case errors.Is(err, ErrDeliveryUnknown):
		return KindUnknown
	case r != nil && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		return KindNotRecorded
	default:
		return KindUnknown
	}
}

// Error is an error with an explicit HTTP status and message, plus optional
// extra fields for the JSON body (for example "actual_version" on a 409).
type Error struct {
	// Status is the HTTP status code.
	Status int
	// Message is shown to the client as "error".
	Message string
	// Fields are added to the JSON body beside "error".
	Fields map[string]any
	// Kind, for a 503, says what it means for the write (see KindOf); ""
	// lets KindOf decide from the chain and the method.
	Kind Kind
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
	case errors.Is(err, ErrNotImplemented):
		return http.StatusNotImplemented
	case errors.Is(err, ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable
	default:
		return http.StatusInternalServerError
	}
}

// WriteError writes err as a JSON error body with the status StatusOf
// gives (a 503 also carries "kind" and the Error-Kind header: KindOf), and
// logs server-side failures (5xx) with their cause.
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
	if kind := KindOf(r, err); kind != "" {
		body["kind"] = string(kind)
		w.Header().Set(KindHeader, string(kind))
	}
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
