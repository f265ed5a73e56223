package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
)

type task struct {
	Kind      string         `json:"kind"`
	Payload   map[string]any `json:"payload"`
	FailTimes int            `json:"fail_times"`
}

func newRouter(t testing.TB) http.Handler {
	t.Helper()
	r := httpapi.NewRouter(httpapi.RouterOptions{BodyLimit: 1024})
	r.Method(http.MethodPost, "/tasks", httpapi.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		var in task
		if err := httpapi.DecodeJSON(r, &in); err != nil {
			return err
		}
		httpapi.WriteJSON(w, http.StatusAccepted, in)
		return nil
	}))
	r.Method(http.MethodGet, "/tasks/{id}", httpapi.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		switch id := r.PathValue("id"); id {
		case "conflict":
			return fmt.Errorf("stream s: %w", httpapi.ErrConflict)
		case "down":
			return fmt.Errorf("rabbitmq: %w: dial tcp 127.0.0.1:5672: connection refused", httpapi.ErrUnavailable)
		case "kafka":
			return fmt.Errorf("conditional append: %w", httpapi.ErrUnsupported)
		case "version":
			return &httpapi.Error{Status: 409, Message: "wrong expected version", Fields: map[string]any{"actual_version": 7}}
		case "bug":
			return errors.New("pq: secret detail")
		case "panic":
			panic("boom")
		default:
			return fmt.Errorf("task %s: %w", id, httpapi.ErrNotFound)
		}
	}))
	return r
}

func do(t testing.TB, h http.Handler, method, path, ctype, body string) (int, map[string]any) {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("%s %s: Content-Type %q, want application/json", method, path, ct)
	}
	var out map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatalf("%s %s: body is not JSON: %q", method, path, rec.Body.String())
	}
	return rec.Code, out
}

func TestBadRequestsGetJSON4xx(t *testing.T) {
	t.Parallel()
	h := newRouter(t)
	cases := []struct {
		name, ctype, body string
		status            int
		contains          string
	}{
		{"malformed", "application/json", `{"kind": `, 400, "malformed JSON"},
		{"syntax", "application/json", `{"kind" "x"}`, 400, "malformed JSON at byte"},
		{"wrong type", "application/json", `{"kind": 5}`, 400, `field "kind" must be a string`},
		{"wrong type int", "application/json", `{"kind": "a", "fail_times": "2"}`, 400, `field "fail_times" must be an integer`},
		{"not object", "application/json", `[1,2]`, 400, "must be an object"},
		{"unknown field", "application/json", `{"kind": "a", "colour": 1}`, 400, `unknown field "colour"`},
		{"empty", "application/json", ``, 400, "empty"},
		{"trailing", "application/json", `{"kind": "a"} {"kind": "b"}`, 400, "single JSON value"},
		{"oversize", "application/json", `{"kind": "` + strings.Repeat("x", 2000) + `"}`, 413, "limit of 1024 bytes"},
		{"content type", "text/plain", `{"kind": "a"}`, 415, "Content-Type"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			status, body := do(t, h, http.MethodPost, "/tasks", c.ctype, c.body)
			if status != c.status {
				t.Errorf("status %d, want %d (%v)", status, c.status, body)
			}
			if msg, _ := body["error"].(string); !strings.Contains(msg, c.contains) {
				t.Errorf("error %q does not contain %q", msg, c.contains)
			}
		})
	}
}

func TestGoodRequestDecodes(t *testing.T) {
	t.Parallel()
	status, body := do(t, newRouter(t), http.MethodPost, "/tasks", "application/json; charset=utf-8", `{"kind":"email","payload":{"to":"a"},"fail_times":2}`)
	if status != 202 || body["kind"] != "email" || body["fail_times"] != float64(2) {
		t.Fatalf("got %d %v", status, body)
	}
}

func TestErrorsMapToStatusInOnePlace(t *testing.T) {
	t.Parallel()
	h := newRouter(t)
	for path, want := range map[string]int{
		"/tasks/abc": 404, "/tasks/conflict": 409, "/tasks/down": 503, "/tasks/kafka": 422,
		"/tasks/version": 409, "/tasks/bug": 500, "/tasks/panic": 500, "/nowhere": 404,
	} {
		status, body := do(t, h, http.MethodGet, path, "", "")
		if status != want {
			t.Errorf("GET %s: status %d, want %d", path, status, want)
		}
		if body["error"] == nil || body["error"] == "" {
			t.Errorf("GET %s: no error message: %v", path, body)
		}
	}
	if _, body := do(t, h, http.MethodGet, "/tasks/version", "", ""); body["actual_version"] != float64(7) {
		t.Errorf("extra fields lost: %v", body)
	}
	if _, body := do(t, h, http.MethodGet, "/tasks/bug", "", ""); body["error"] != "internal error" {
		t.Errorf("an unmapped error leaked its detail: %v", body)
	}
	if _, body := do(t, h, http.MethodGet, "/tasks/down", "", ""); strings.Contains(fmt.Sprint(body["error"]), "5672") {
		t.Errorf("a 503 leaked the driver's error: %v", body)
	}
	if status, _ := do(t, h, http.MethodDelete, "/tasks", "", ""); status != 405 {
		t.Errorf("DELETE /tasks: %d, want 405", status)
	}
}

func TestClientGoneIsNot5xx(t *testing.T) {
	t.Parallel()
	if got := httpapi.StatusOf(fmt.Errorf("wait: %w", context.Canceled)); got != httpapi.StatusClientClosedRequest {
		t.Fatalf("StatusOf(canceled) = %d, want 499", got)
	}
}

// TestUnencodableResponseIs500 writes a value JSON cannot encode (+Inf):
// the answer must be a 500 with a JSON error body and an error log line,
// never the intended status with an empty body.
func TestUnencodableResponseIs500(t *testing.T) {
	t.Parallel()
	var logs strings.Builder
	r := httpapi.NewRouter(httpapi.RouterOptions{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	r.Get("/inf", func(w http.ResponseWriter, _ *http.Request) {
		httpapi.WriteJSON(w, http.StatusOK, map[string]float64{"balance": math.Inf(1)})
	})
	code, body := do(t, r, http.MethodGet, "/inf", "", "")
	if code != http.StatusInternalServerError || body["error"] == nil {
		t.Fatalf("got %d %v, want 500 with a JSON error", code, body)
	}
	if !strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("no error logged: %s", logs.String())
	}
}

func TestServeYAMLAnswersTheDocument(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	httpapi.ServeYAML([]byte("openapi: 3.0.3\n"))(rec, httptest.NewRequest(http.MethodGet, "/openapi.yaml", nil))
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/yaml" || rec.Body.String() != "openapi: 3.0.3\n" {
		t.Errorf("ServeYAML: %d %q %q", rec.Code, rec.Header().Get("Content-Type"), rec.Body.String())
	}
}

// JSON Schema's "type: integer" admits 2.0 and 2e0; so must the services.
func TestIntegralNumbersDecodeIntoIntegers(t *testing.T) {
	t.Parallel()
	h := newRouter(t)
	for _, n := range []string{"2.0", "2e0", "0.2e1", "2.000"} {
		status, body := do(t, h, http.MethodPost, "/tasks", "application/json", `{"kind":"a","payload":{"x":1.50,"y":3.0},"fail_times":`+n+`}`)
		if status != 202 || body["fail_times"] != float64(2) {
			t.Errorf("fail_times %s: got %d %v, want 202 and 2", n, status, body)
		}
	}
	for _, n := range []string{"2.5", "1e400", `"2"`} {
		if status, body := do(t, h, http.MethodPost, "/tasks", "application/json", `{"kind":"a","fail_times":`+n+`}`); status != 400 {
			t.Errorf("fail_times %s: got %d %v, want 400", n, status, body)
		}
	}
}

// RFC 9110: a 405 names the methods the resource has.
func TestMethodNotAllowedHasAllow(t *testing.T) {
	t.Parallel()
	h := newRouter(t)
	for _, m := range []string{"TRACE", "DELETE", "FOO", strings.Repeat("X", 5000)} {
		req := httptest.NewRequest(m, "/tasks", nil)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 405 || rec.Header().Get("Allow") != "POST" {
			t.Errorf("%.20s /tasks: %d, Allow %q; want 405 and POST", m, rec.Code, rec.Header().Get("Allow"))
		}
		if len(rec.Body.String()) > 200 {
			t.Errorf("%.20s /tasks: the error text echoes the method: %d bytes", m, rec.Body.Len())
		}
	}
}

// encoding/json leaves a field at its zero value on null; the documents'
// types do not admit null.
func TestNullIsRefusedForNonNullableFields(t *testing.T) {
	t.Parallel()
	h := newRouter(t)
	for _, body := range []string{`{"kind":null}`, `{"kind":"a","fail_times":null}`} {
		if status, out := do(t, h, http.MethodPost, "/tasks", "application/json", body); status != 400 {
			t.Errorf("%s: got %d %v, want 400", body, status, out)
		}
	}
	if status, out := do(t, h, http.MethodPost, "/tasks", "application/json", `{"kind":"a","payload":null}`); status != 202 {
		t.Errorf("payload null: got %d %v, want 202 (a map may be null)", status, out)
	}
}

// A static route is its own resource: GET /events/batch is not
// GET /events/{id}, and the Allow of /events/batch names its methods only,
// not those of a pattern that also matches.
func TestStaticRouteWinsOverPattern(t *testing.T) {
	t.Parallel()
	r := httpapi.NewRouter(httpapi.RouterOptions{})
	ok := func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(200) }
	r.Post("/events/batch", ok)
	r.Get("/events/{id}", ok)
	for _, c := range []struct {
		method, path string
		code         int
		allow        string
	}{
		{http.MethodOptions, "/events/batch", 405, "POST"},
		{http.MethodGet, "/events/batch", 405, "POST"},
		{http.MethodGet, "/events/x", 200, ""},
	} {
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, httptest.NewRequest(c.method, c.path, nil))
		if rec.Code != c.code || rec.Header().Get("Allow") != c.allow {
			t.Errorf("%s %s: %d Allow %q, want %d and %q", c.method, c.path, rec.Code, rec.Header().Get("Allow"), c.code, c.allow)
		}
	}
}

// UUIDParam answers a UUID in lower case, and hands anything else, as
// sent but shortened, to the contract's own error.
func TestUUIDParam(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 100)
	for _, c := range []struct{ path, id, sent string }{
		{"/users/0190A0B2-7C3D-7E4F-8A9B-0C1D2E3F4A5B", "0190a0b2-7c3d-7e4f-8a9b-0c1d2e3f4a5b", ""},
		{"/users/nope", "", "nope"},
		{"/users/" + long, "", long[:64] + "..."},
	} {
		r := httpapi.NewRouter(httpapi.RouterOptions{})
		var id, sent string
		var err error
		r.Get("/users/{id}", func(w http.ResponseWriter, req *http.Request) {
			id, err = httpapi.UUIDParam(req, "id", func(s string) error { sent = s; return httpapi.ErrNotFound })
		})
		r.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, c.path, nil))
		if id != c.id || sent != c.sent || (err == nil) != (c.sent == "") {
			t.Errorf("%s: id %q, sent %q, err %v; want id %q, sent %q", c.path, id, sent, err, c.id, c.sent)
		}
	}
}

// chi matches on the escaped path: a route parameter sent with an
// escaped character must reach the handler decoded.
func TestPathParamIsDecoded(t *testing.T) {
	t.Parallel()
	r := httpapi.NewRouter(httpapi.RouterOptions{})
	var got string
	r.Get("/streams/{stream}", func(w http.ResponseWriter, req *http.Request) { got = httpapi.PathParam(req, "stream") })
	r.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/streams/H%3AA", nil))
	if got != "H:A" {
		t.Errorf("PathParam: %q, want H:A", got)
	}
}

// A null body is not an object.
func TestNullBodyIsRefused(t *testing.T) {
	t.Parallel()
	if status, out := do(t, newRouter(t), http.MethodPost, "/tasks", "application/json", `null`); status != 400 {
		t.Errorf("null body: got %d %v, want 400", status, out)
	}
}

func TestDurationParam(t *testing.T) {
	t.Parallel()
	for q, want := range map[string]string{"": "5s", "?t=2h": "1m0s", "?t=0s": "1ms", "?t=250ms": "250ms", "?t=99999999h99999999h": "1m0s", "?t=1.5": "1.5s"} {
		d, err := httpapi.DurationParam(httptest.NewRequest("GET", "/"+q, nil), "t", httpapi.DurationSpec{Default: 5 * time.Second, Min: time.Millisecond, Max: time.Minute, Seconds: true})
		if err != nil || d.String() != want {
			t.Errorf("%q: %v %v, want %s", q, d, err, want)
		}
	}
	for _, q := range []string{"?t=", "?t=-1s", "?t=1µs", "?t=soon", "?t=1s&t=2s"} {
		if _, err := httpapi.DurationParam(httptest.NewRequest("GET", "/"+q, nil), "t", httpapi.DurationSpec{Default: 5 * time.Second, Min: time.Millisecond, Max: time.Minute, Seconds: true}); httpapi.StatusOf(err) != 400 {
			t.Errorf("%q: %v, want a 400", q, err)
		}
	}
}

// Invalid UTF-8 is refused, not silently replaced with U+FFFD.
func TestInvalidUTF8IsRefused(t *testing.T) {
	t.Parallel()
	status, out := do(t, newRouter(t), http.MethodPost, "/tasks", "application/json", "{\"kind\":\"a\xffb\"}")
	if status != 400 || !strings.Contains(fmt.Sprint(out["error"]), "UTF-8") {
		t.Errorf("got %d %v, want 400 naming UTF-8", status, out)
	}
}

// An error text quotes at most a bounded part of what the client sent.
func TestNotFoundDoesNotEchoAMegabyte(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	newRouter(t).ServeHTTP(rec, httptest.NewRequest(strings.Repeat("M", 1000), "/"+strings.Repeat("p", 100_000), nil))
	if rec.Body.Len() > 400 {
		t.Errorf("404/405 body is %d bytes: it echoes the request", rec.Body.Len())
	}
}
