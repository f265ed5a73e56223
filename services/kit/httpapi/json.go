package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"math/big"
	"mime"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/jsonbtext"
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
	b, err := MarshalJSON(v)
	if err != nil {
		slog.Default().Error("response could not be encoded as JSON", "status", status, "type", fmt.Sprintf("%T", v), "err", err)
		b = []byte(`{"error":"internal error: the response could not be encoded as JSON"}`)
		status = http.StatusInternalServerError
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// MarshalJSON encodes v as WriteJSON does, without the final newline:
// compact, and without HTML escapes. encoding/json's default writes each
// <, > and & of a string or a json.RawMessage as a 6-byte \u escape, so
// a stored value of 1 MiB of "<" would be answered as 6 MiB: an answer
// is never longer than the compact form of what was stored.
func MarshalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
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
// can act on: 400 for malformed JSON, wrong types, unknown fields, an
// empty body or a value CheckJSONValues refuses; 413 when the body exceeds the limit set by the BodyLimit
// middleware; 415 for a Content-Type other than JSON.
func DecodeJSON(r *http.Request, v any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			return Errorf(http.StatusUnsupportedMediaType, "Content-Type must be application/json, got %q", ct)
		}
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return decodeError(err)
	}
	if !utf8.Valid(body) {
		// encoding/json would silently replace the bad bytes with U+FFFD
		// and store text the client never sent.
		return BadRequest("request body is not valid UTF-8")
	}
	err = decodeStrict(body, v)
	var typ *json.UnmarshalTypeError
	if errors.As(err, &typ) && strings.HasPrefix(typ.Value, "number") && isIntKind(typ.Type.Kind()) {
		// JSON has one number type: 84.0 and 8.4e1 are the integer 84 to
		// a JSON Schema validator (and to the OpenAPI document's
		// "type: integer"), but encoding/json refuses them for an int
		// field. Integral numbers are rewritten, at the integer fields
		// of v only, and the body is decoded again.
		if fixed, ok := integralNumbers(body, reflect.TypeOf(v)); ok {
			err = decodeStrict(fixed, v)
		}
	}
	if err != nil {
		// A value the rule refuses can also fail the decoding (1e400 in
		// an any field overflows a float64): name the rule's limit.
		if json.Valid(body) {
			if verr := CheckJSONValues(body); verr != nil {
				return verr
			}
		}
		return decodeError(err)
	}
	if bytes.Contains(body, []byte("null")) {
		// encoding/json takes null for a string, number or boolean field
		// as "leave the zero value", which would accept what the
		// documents' "type: string" refuses.
		if field := nullField(body, reflect.TypeOf(v)); field != "" {
			return BadRequest("field %q must not be null", field)
		}
	}
	return CheckJSONValues(body)
}

// CheckJSONValues applies the project's one rule for the values inside a
// JSON body, which must be syntactically valid JSON: a 400 naming the
// limit for a lone UTF-16 surrogate escape ("\ud800", which Go's decoder
// would silently turn into U+FFFD), the escape \u0000, and a number
// that breaks the number rule of package jsonbtext (too many digits, too
// large an exponent, outside the 64-bit float range, or numbers that
// Postgres would write back much longer than sent). DecodeJSON calls it
// on every body; a handler that reads a JSON body itself calls it too,
// so that both sides of every pair refuse the same values.
func CheckJSONValues(body []byte) error {
	err := jsonbtext.Check(body)
	var e *jsonbtext.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &e) && e.Path != "":
		return &Error{Status: http.StatusBadRequest, Message: err.Error(), Cause: err}
	default:
		return &Error{Status: http.StatusBadRequest, Message: "request body " + err.Error(), Cause: err}
	}
}

// nullField returns the path of the first null in body at a field of t
// that the documents do not let be null (any but a slice, map, interface
// or json.RawMessage: a pointer marks an optional field, which may be
// absent but not null), "(the body)" for a body that is null, or "".
func nullField(body []byte, t reflect.Type) string {
	var doc any
	if err := json.Unmarshal(body, &doc); err != nil {
		return ""
	}
	return findNull(doc, t, "")
}

func findNull(v any, t reflect.Type, path string) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if v == nil && path == "" {
		return "(the body)"
	}
	if v == nil {
		switch t.Kind() {
		case reflect.Slice, reflect.Map, reflect.Interface:
			return ""
		}
		return strings.TrimPrefix(path, ".")
	}
	switch t.Kind() {
	case reflect.Struct:
		m, _ := v.(map[string]any)
		return nullFields(m, t, path)
	case reflect.Slice, reflect.Array:
		if t == rawMessageType {
			return ""
		}
		a, _ := v.([]any)
		for i, e := range a {
			if f := findNull(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); f != "" {
				return f
			}
		}
	}
	return ""
}

func nullFields(m map[string]any, t reflect.Type, path string) string {
	for k, ft := range memberFields(m, t) {
		if p := findNull(m[k], ft, path+"."+k); p != "" {
			return p
		}
	}
	return ""
}

// memberFields yields the members of m that are fields of the struct type
// t, with each field's type, found by their JSON names as encoding/json
// finds them: embedded structs flattened, names matched without regard to
// case, "-" and unexported fields left out.
func memberFields(m map[string]any, t reflect.Type) iter.Seq2[string, reflect.Type] {
	return func(yield func(string, reflect.Type) bool) { walkFields(m, t, yield) }
}

// walkFields is memberFields' loop; it returns false once yield has.
func walkFields(m map[string]any, t reflect.Type, yield func(string, reflect.Type) bool) bool {
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		if f.Anonymous && name == "" {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				if !walkFields(m, ft, yield) {
					return false
				}
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		for k := range m {
			if strings.EqualFold(k, name) && !yield(k, f.Type) {
				return false
			}
		}
	}
	return true
}

// decodeStrict decodes body into v: one JSON value, no unknown fields.
// Its errors are encoding/json's, but for trailing data.
func decodeStrict(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return BadRequest("request body must hold a single JSON value")
	}
	return nil
}

func isIntKind(k reflect.Kind) bool {
	switch k {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}

// integralNumbers re-encodes body with every integral number written with
// a fraction or an exponent (1.0, 1e2) at an integer field of t spelled as
// an integer (1, 100). Values at other fields (payloads: any, maps,
// json.RawMessage) are left as they are, though their key order and
// spacing may change. ok is false when body is not JSON.
func integralNumbers(body []byte, t reflect.Type) ([]byte, bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, false
	}
	out, err := json.Marshal(fixIntegers(doc, t))
	return out, err == nil
}

var rawMessageType = reflect.TypeOf(json.RawMessage(nil))

func fixIntegers(v any, t reflect.Type) any {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == rawMessageType {
		return v
	}
	switch {
	case isIntKind(t.Kind()):
		n, ok := v.(json.Number)
		if !ok || !strings.ContainsAny(string(n), ".eE") {
			return v
		}
		f, _, err := big.ParseFloat(string(n), 10, 1024, big.ToNearestEven)
		if err != nil || !f.IsInt() {
			return v
		}
		i, _ := f.Int(nil)
		return json.Number(i.String())
	case t.Kind() == reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return v
		}
		fixFields(m, t)
		return m
	case t.Kind() == reflect.Slice || t.Kind() == reflect.Array:
		a, ok := v.([]any)
		if !ok {
			return v
		}
		for i := range a {
			a[i] = fixIntegers(a[i], t.Elem())
		}
		return a
	case t.Kind() == reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			return v
		}
		for k := range m {
			m[k] = fixIntegers(m[k], t.Elem())
		}
		return m
	}
	return v
}

// fixFields applies fixIntegers to the members of m that are fields of the
// struct type t (memberFields).
func fixFields(m map[string]any, t reflect.Type) {
	for k, ft := range memberFields(m, t) {
		m[k] = fixIntegers(m[k], ft)
	}
}

func decodeError(err error) error {
	var (
		syntax *json.SyntaxError
		typ    *json.UnmarshalTypeError
		mbe    *http.MaxBytesError
		own    *Error
	)
	switch {
	case errors.As(err, &own):
		return own
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

// IntegralNumber parses a JSON number that is an integer in the sense of
// JSON Schema ("type: integer"): 42, 42.0 and 4.2e1 are 42. ok is false
// for a fraction, a non-number or a value outside int64.
func IntegralNumber(s string) (n int64, ok bool) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, true
	}
	f, _, err := big.ParseFloat(s, 10, 1024, big.ToNearestEven)
	if err != nil || !f.IsInt() {
		return 0, false
	}
	i, _ := f.Int(nil)
	if !i.IsInt64() {
		return 0, false
	}
	return i.Int64(), true
}
