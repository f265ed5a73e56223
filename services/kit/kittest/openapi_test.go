package kittest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// doc is a small OpenAPI 3.1 document: one operation with a path
// parameter, a JSON request body and two documented answers.
const doc = `openapi: 3.1.0
info: {title: kittest, version: "1"}
servers:
  - url: http://localhost:9999
paths:
  /stream:
    get:
      responses:
        "200":
          description: events
          content:
            text/event-stream:
              schema: {type: string}
  /things/{id}:
    put:
      parameters:
        - {name: id, in: path, required: true, schema: {type: string}}
      requestBody:
        required: true
        content:
          application/json:
            schema:
              type: object
              required: [name]
              additionalProperties: false
              properties: {name: {type: string}}
      responses:
        "200":
          description: ok
          content:
            application/json:
              schema:
                type: object
                required: [id, size]
                properties:
                  id: {type: string}
                  size: {type: [integer, "null"]}
        "400":
          description: bad
          content:
            application/json:
              schema: {type: object, required: [error], properties: {error: {type: string}}}
`

// recorder is a testing.TB that records Errorf instead of failing, so a
// test can assert that a check would have failed its caller.
type recorder struct {
	testing.TB
	mu     sync.Mutex
	errors []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

// server answers PUT /things/{id} with the status and body the test sets.
func server(t *testing.T, status int, body string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestOpenAPICheck(t *testing.T) {
	t.Parallel()
	o := NewOpenAPI(t, []byte(doc), "DELETE /things/1")
	cases := []struct {
		name, method, path, reqBody string
		status                      int
		respBody                    string
		want                        string // "" means valid
	}{
		{"valid", "PUT", "/things/1", `{"name":"a"}`, 200, `{"id":"1","size":null}`, ""},
		{"valid error", "PUT", "/things/1", `{"name":"a"}`, 400, `{"error":"no"}`, ""},
		{"refused bad request", "PUT", "/things/1", `{"colour":"red"}`, 400, `{"error":"no"}`, ""},
		{"wrong status", "PUT", "/things/1", `{"name":"a"}`, 201, `{"id":"1","size":1}`, "PUT /things/{id} answered 201"},
		{"wrong shape", "PUT", "/things/1", `{"name":"a"}`, 200, `{"id":1,"size":1}`, "PUT /things/{id} answered 200"},
		{"missing field", "PUT", "/things/1", `{"name":"a"}`, 200, `{"id":"1"}`, "size"},
		{"error without message", "PUT", "/things/1", `{"name":"a"}`, 400, `{}`, "error"},
		{"accepted bad request", "PUT", "/things/1", `{"colour":"red"}`, 200, `{"id":"1","size":2}`, "a request the document refuses"},
		{"undocumented route", "GET", "/elsewhere", "", 200, `{}`, "no operation in the document"},
		{"listed as unvalidated", "DELETE", "/things/1", "", 405, `oops`, ""},
		{"shared route", "GET", "/healthz", "", 200, `{"status":"ok"}`, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			base := server(t, c.status, c.respBody)
			var body any
			if c.reqBody != "" {
				body = c.reqBody
			}
			rec := &recorder{TB: t}
			req := NewRequest(t, c.method, base+c.path, body)
			resp, raw := Send(t, req) // not validated: ValidateOpenAPI does not hold here
			o.Check(rec, req, resp, raw)
			switch {
			case c.want == "" && len(rec.errors) > 0:
				t.Errorf("valid exchange reported: %v", rec.errors)
			case c.want != "" && len(rec.errors) != 1:
				t.Errorf("got %d reports %v, want one containing %q", len(rec.errors), rec.errors, c.want)
			case c.want != "" && !strings.Contains(rec.errors[0], c.want):
				t.Errorf("report %q lacks %q", rec.errors[0], c.want)
			}
		})
	}
}

func TestValidateOpenAPIAppliesToSubtests(t *testing.T) {
	t.Parallel()
	o := NewOpenAPI(t, []byte(doc))
	base := server(t, 200, `{"id":"1","size":"big"}`) // wrong: size is a string
	t.Run("registered", func(t *testing.T) {
		ValidateOpenAPI(t, o)
		t.Run("child", func(t *testing.T) {
			if got := validatorFor(t); got != o {
				t.Fatalf("a subtest of the registering test is not validated")
			}
			rec := &recorder{TB: t}
			// Send on behalf of rec: rec.Name() is the child's name.
			Send(rec, NewRequest(t, "PUT", base+"/things/1", `{"name":"a"}`))
			if len(rec.errors) != 1 || !strings.Contains(rec.errors[0], "size") {
				t.Errorf("Send under ValidateOpenAPI reported %v, want the size mismatch", rec.errors)
			}
		})
	})
	t.Run("sibling", func(t *testing.T) {
		if got := validatorFor(t); got != nil {
			t.Errorf("a test that did not register is validated")
		}
	})
	if got := validatorFor(t); got != nil {
		t.Errorf("the registration outlived its test")
	}
}

func TestNewOpenAPIRefusesABadDocument(t *testing.T) {
	t.Parallel()
	rec := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		NewOpenAPI(rec, []byte("openapi: 3.1.0\npaths: [not, a, map]\n"))
	}()
	<-done
	if !rec.failed {
		t.Error("a malformed document was accepted")
	}
}

func TestCheckStreamChecksTheHead(t *testing.T) {
	t.Parallel()
	o := NewOpenAPI(t, []byte(doc))
	for ct, wantReport := range map[string]bool{"text/event-stream": false, "application/json": true} {
		t.Run(ct, func(t *testing.T) {
			t.Parallel()
			ValidateOpenAPI(t, o)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", ct)
				_, _ = w.Write([]byte("data: 1\n\n"))
			}))
			t.Cleanup(srv.Close)
			req := NewRequest(t, http.MethodGet, srv.URL+"/stream", nil)
			resp, err := Client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			rec := &recorder{TB: t}
			CheckStream(rec, req, resp)
			if got := len(rec.errors) > 0; got != wantReport {
				t.Errorf("Content-Type %s: reports %v, want a report: %v", ct, rec.errors, wantReport)
			}
		})
	}
}
