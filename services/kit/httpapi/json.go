package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strings"
)

// HandlerFunc is an http.HandlerFunc that returns its error instead of
// writing it; ServeHTTP writes a non-nil error with WriteError.
type HandlerFunc func(w http.ResponseWriter, r *http.Request) error

// ServeHTTP implements http.Handler.
func (f HandlerFunc) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := f(w, r); err != nil {
		WriteError(w, r, err)
	}
}

// WriteJSON writes v as a JSON body with the status. It encodes v before
// writing anything, so that a value JSON cannot hold (+Inf, NaN, a
// channel) never goes out as the intended status with an empty body: it
// is answered 500 with a JSON error instead, logged by slog.Default with
// the encoder's error (and at ERROR by the router's request log).
// Handlers should refuse such values before they get here.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(v); err != nil {
		slog.Default().Error("response could not be encoded as JSON", "status", status, "type", fmt.Sprintf("%T", v), "err", err)
		buf.Reset()
		buf.WriteString(`{"error":"internal error: the response could not be encoded as JSON"}` + "\n")
		status = http.StatusInternalServerError
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// ServeYAML returns a handler that answers 200 with doc as
// application/yaml: a contract's GET /openapi.yaml.
func ServeYAML(doc []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/yaml")
		_, _ = w.Write(doc)
	}
}

// DecodeJSON decodes the request body into v strictly: the body must be one
// JSON value of the right shape, with no unknown fields and nothing after
// it. Every failure is an *Error with a 4xx status and a message a client
// can act on: 400 for malformed JSON, wrong types, unknown fields or an
// empty body; 413 when the body exceeds the limit set by the BodyLimit
// middleware; 415 for a Content-Type other than JSON.
func DecodeJSON(r *http.Request, v any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			return Errorf(http.StatusUnsupportedMediaType, "Content-Type must be application/json, got %q", ct)
		}
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return decodeError(err)
		}
		return BadRequest("request body must hold a single JSON value")
	}
	return nil
}

func decodeError(err error) error {
	var (
		syntax *json.SyntaxError
		typ    *json.UnmarshalTypeError
		mbe    *http.MaxBytesError
	)
	switch {
	case errors.As(err, &mbe):
		return &Error{Status: http.StatusRequestEntityTooLarge,
			Message: fmt.Sprintf("request body exceeds the limit of %d bytes", mbe.Limit), Cause: err}
	case errors.Is(err, io.EOF):
		return BadRequest("request body is empty; a JSON object is required")
	case errors.As(err, &syntax):
		return BadRequest("malformed JSON at byte %d: %v", syntax.Offset, syntax)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return BadRequest("malformed JSON: the body ends early")
	case errors.As(err, &typ):
		if typ.Field != "" {
			return BadRequest("field %q must be %s, got JSON %s", typ.Field, jsonKind(typ.Type.Kind().String()), typ.Value)
		}
		return BadRequest("request body must be %s, got JSON %s", jsonKind(typ.Type.Kind().String()), typ.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return BadRequest("unknown field %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
	default:
		return BadRequest("invalid JSON: %v", err)
	}
}

// jsonKind names a Go kind the way a JSON client thinks of it.
func jsonKind(kind string) string {
	switch kind {
	case "struct", "map":
		return "an object"
	case "slice", "array":
		return "an array"
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		return "an integer"
	case "float32", "float64":
		return "a number"
	default:
		return "a " + kind
	}
}
