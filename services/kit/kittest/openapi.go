package kittest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
)

// SharedRoutes are the routes every service serves besides its pair's
// contract (GET /, the kit's probes, /stats and /metrics), which no pair's
// OpenAPI document describes, and the unknown route CheckShared probes.
// OpenAPI never validates them.
var SharedRoutes = []string{
	"GET /",
	"GET /healthz",
	"GET /readyz",
	"GET /metrics",
	"GET /stats",
	"POST /stats/reset",
	"GET /no/such/route",
}

// OpenAPI checks HTTP exchanges against one OpenAPI document: the
// response (status, headers, body) always, the request too when the
// server accepted it. Build it with NewOpenAPI; it is safe for concurrent
// use.
type OpenAPI struct {
	title       string
	router      routers.Router
	unvalidated []string
}

// NewOpenAPI parses doc (an OpenAPI 3.x document, such as a contract's
// OpenAPI) and fails the test if it is not a valid one. unvalidated lists
// the exchanges, as "METHOD /path" (the path without its query), that
// Check must skip on top of SharedRoutes: a probe of a method or a route
// the document deliberately lacks. Anything else missing from the
// document is an error, never skipped silently.
func NewOpenAPI(t testing.TB, doc []byte, unvalidated ...string) *OpenAPI {
	t.Helper()
	registerDecoders()
	spec, err := openapi3.NewLoader().LoadFromData(doc)
	if err != nil {
		t.Fatalf("OpenAPI document: %v", err)
	}
	// The document's servers are the stack's ports; a test's server
	// listens elsewhere, so routes match on the path alone.
	spec.Servers = nil
	title := ""
	if spec.Info != nil {
		title = spec.Info.Title
	}
	r, err := legacy.NewRouter(spec)
	if err != nil {
		t.Fatalf("OpenAPI document %q: %v", title, err)
	}
	return &OpenAPI{title: title, router: r, unvalidated: slices.Concat(SharedRoutes, unvalidated)}
}

// Check validates one exchange: req as sent (its body is read again
// through GetBody), the response resp and its body raw. A response that
// does not match the document, a status the document does not list for
// the operation, a route the document lacks, or a request the document
// refuses that the server answered below 400 fails the test (Errorf),
// naming the operation, the status and the validation error.
func (o *OpenAPI) Check(t testing.TB, req *http.Request, resp *http.Response, raw []byte) {
	t.Helper()
	key := req.Method + " " + req.URL.Path
	if slices.Contains(o.unvalidated, key) {
		return
	}
	if err := o.check(req, resp, raw); err != nil {
		t.Errorf("OpenAPI %q: %v", o.title, err)
	}
}

// check returns the mismatch Check reports, or nil.
func (o *OpenAPI) check(req *http.Request, resp *http.Response, raw []byte) error {
	sent := req.Clone(context.Background())
	sent.Body = http.NoBody
	if req.GetBody != nil {
		b, err := req.GetBody()
		if err != nil {
			return fmt.Errorf("%s %s: re-read the request body: %w", req.Method, req.URL.Path, err)
		}
		sent.Body = b
	}
	route, params, err := o.router.FindRoute(sent)
	if err != nil {
		return fmt.Errorf("%s %s answered %d: no operation in the document (%v); if the route is deliberately not in it, list it as unvalidated",
			req.Method, req.URL.Path, resp.StatusCode, err)
	}
	op := route.Method + " " + route.Path
	in := &openapi3filter.RequestValidationInput{
		Request:    sent,
		PathParams: params,
		Route:      route,
		Options: &openapi3filter.Options{
			AuthenticationFunc:    openapi3filter.NoopAuthenticationFunc,
			IncludeResponseStatus: true,
			MultiError:            true,
		},
	}
	// The suites send invalid requests on purpose; a refusal (4xx) of
	// one the document refuses too is consistent. Accepting one is not.
	if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil && resp.StatusCode < 400 {
		return fmt.Errorf("%s answered %d to a request the document refuses: %v", op, resp.StatusCode, oneLine(err))
	}
	respOpts := *in.Options
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		// An SSE schema describes one event (id, event, data), as
		// Schemathesis reads it; kin-openapi would see the whole stream
		// as one string. Its status and Content-Type are still checked.
		respOpts.ExcludeResponseBody = true
	}
	err = openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 resp.StatusCode,
		Header:                 resp.Header,
		Body:                   io.NopCloser(bytes.NewReader(raw)),
		Options:                &respOpts,
	})
	if err != nil {
		return fmt.Errorf("%s answered %d %.300q, which the document refuses: %v", op, resp.StatusCode, raw, oneLine(err))
	}
	return nil
}

// oneLine flattens kin-openapi's multi-line errors (they quote the
// schema) into their first lines, one per error.
func oneLine(err error) string {
	var parts []string
	for _, l := range strings.Split(err.Error(), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "Schema:") || strings.HasPrefix(l, "Value:") || strings.HasPrefix(l, "{") ||
			strings.HasPrefix(l, "}") || strings.HasPrefix(l, "\"") || strings.HasPrefix(l, "]") || strings.HasPrefix(l, "[") {
			continue
		}
		parts = append(parts, l)
	}
	return strings.Join(parts, " | ")
}

// registerDecoders teaches kin-openapi the media types of the contracts
// it does not know: an SSE stream is text, as CheckStream validates it.
var registerDecoders = sync.OnceFunc(func() {
	openapi3filter.RegisterBodyDecoder("text/event-stream", openapi3filter.PlainBodyDecoder)
})

// CheckStream checks the head of a streamed answer (its status and
// Content-Type; the body, read as it arrives, is validated as empty)
// when ValidateOpenAPI holds for t. A suite calls it for the requests it
// cannot make through Send, such as an SSE subscription.
func CheckStream(t testing.TB, req *http.Request, resp *http.Response) {
	t.Helper()
	if o := validatorFor(t); o != nil {
		o.Check(t, req, resp, nil)
	}
}

// validating maps a test's name to the OpenAPI its exchanges (and those
// of its subtests) are checked against.
var validating sync.Map // string → *OpenAPI

// ValidateOpenAPI makes every exchange Send (and so Do, DoResponse,
// GetJSON, CheckShared) makes on behalf of t or of any of its subtests be
// checked with o.Check, until t ends. A conformance suite calls it first
// thing in Run, so that both the real-server and the in-memory runs
// validate every answer.
func ValidateOpenAPI(t testing.TB, o *OpenAPI) {
	t.Helper()
	name := t.Name()
	if _, dup := validating.LoadOrStore(name, o); dup {
		t.Fatalf("ValidateOpenAPI called twice for %s", name)
	}
	t.Cleanup(func() { validating.Delete(name) })
}

// validatorFor returns the OpenAPI registered for t or its closest
// parent test, or nil.
func validatorFor(t testing.TB) *OpenAPI {
	name := t.Name()
	for {
		if o, ok := validating.Load(name); ok {
			return o.(*OpenAPI)
		}
		i := strings.LastIndexByte(name, '/')
		if i < 0 {
			return nil
		}
		name = name[:i]
	}
}
