package kittest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Client is the HTTP client every helper here uses. Its timeout (2 min) is
// longer than any long poll a test makes, so a server that hangs fails the
// test instead of hanging it.
var Client = &http.Client{Timeout: 2 * time.Minute}

// NewRequest returns a request for method and url carrying body: nil sends
// no body, a string or a []byte is sent as is, anything else is marshalled
// to JSON. Content-Type is application/json whenever there is a body; set
// another on the request to send something else.
func NewRequest(t testing.TB, method, url string, body any) *http.Request {
	t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	case []byte:
		r = bytes.NewReader(b)
	default:
		buf, err := json.Marshal(b)
		if err != nil {
			t.Fatalf("%s %s: marshal body: %v", method, url, err)
		}
		r = bytes.NewReader(buf)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	if r != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req
}

// Send sends req with Client and reads the whole answer, failing the test
// if either fails. The response's Body is already read (into raw) and
// closed; use its status and headers. When ValidateOpenAPI holds for t,
// the exchange is checked against the document (OpenAPI.Check).
func Send(t testing.TB, req *http.Request) (resp *http.Response, raw []byte) {
	t.Helper()
	resp, err := Client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	raw, err = io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", req.Method, req.URL, err)
	}
	if o := validatorFor(t); o != nil {
		o.Check(t, req, resp, raw)
	}
	return resp, raw
}

// DoResponse is Do returning the whole response (its Body already read
// into raw and closed), for tests that check headers too.
func DoResponse(t testing.TB, method, url string, body, out any) (resp *http.Response, raw []byte) {
	t.Helper()
	resp, raw = Send(t, NewRequest(t, method, url, body))
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: %d %q is not the expected JSON: %v", method, url, resp.StatusCode, raw, err)
		}
	}
	return resp, raw
}

// Do sends method url with body (encoded as NewRequest does) and returns
// the status and the raw answer. When out is not nil and the answer is not
// empty, the answer is decoded into out, and an answer that is not that
// JSON fails the test.
func Do(t testing.TB, method, url string, body, out any) (status int, raw []byte) {
	t.Helper()
	resp, raw := DoResponse(t, method, url, body, out)
	return resp.StatusCode, raw
}
