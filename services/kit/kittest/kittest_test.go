package kittest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"
)

// fatalRecorder is a testing.TB whose Fatalf records the failure and ends
// the goroutine, as t.Fatalf does; run the code under test in a goroutine
// of its own (see fails).
type fatalRecorder struct {
	testing.TB
	failed bool
	msg    string
}

func (r *fatalRecorder) Helper() {}

func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.failed, r.msg = true, fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// Fatal is Fatalf without a format.
func (r *fatalRecorder) Fatal(args ...any) {
	r.failed, r.msg = true, fmt.Sprint(args...)
	runtime.Goexit()
}

// Skip records the message and ends the goroutine, as t.Skip does.
func (r *fatalRecorder) Skip(args ...any) {
	r.msg = fmt.Sprint(args...)
	runtime.Goexit()
}

// fails reports whether fn failed the test it was given with Fatalf.
func fails(t *testing.T, fn func(tb testing.TB)) (bool, string) {
	t.Helper()
	rec := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(rec)
	}()
	<-done
	return rec.failed, rec.msg
}

func TestUniqueName(t *testing.T) {
	t.Parallel()
	ident := regexp.MustCompile(`^[a-z0-9_]+$`)
	a, b := UniqueName(t, "q"), UniqueName(t, "q")
	if a == b {
		t.Errorf("two calls gave the same name %q", a)
	}
	for _, n := range []string{a, b} {
		if !ident.MatchString(n) || !strings.HasPrefix(n, "q_testuniquename_") || len(n) > 63 {
			t.Errorf("name %q: want q_<test>_<hex>, [a-z0-9_] only, at most 63 bytes", n)
		}
	}
	t.Run(strings.Repeat("Very Long Sub-Test Name ", 5), func(t *testing.T) {
		if n := UniqueName(t, "prefix"); len(n) > 63 || !ident.MatchString(n) || !strings.HasPrefix(n, "prefix_") {
			t.Errorf("long test name gave %q (%d bytes)", n, len(n))
		}
	})
}

func TestHostPort(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"localhost:9092":                          "localhost:9092",
		"a:1,b:2":                                 "a:1",
		"postgres://u:p@db:5433/x":                "db:5433",
		"postgres://u:p@db/x":                     "db:5432",
		"amqp://guest:guest@mq/":                  "mq:5672",
		"mongodb://h1:27018,h2:27019/?replicaSet": "h1:27018",
		"redis://cache":                           "cache:6379",
	}
	for in, want := range cases {
		if got, err := hostPort(in); err != nil || got != want {
			t.Errorf("hostPort(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"nohost", "http://example.com/x"} {
		if got, err := hostPort(bad); err == nil {
			t.Errorf("hostPort(%q) = %q, want an error", bad, got)
		}
	}
	if got := redact("postgres://u:secret@db/x"); strings.Contains(got, "secret") {
		t.Errorf("redact kept the password: %q", got)
	}
}

func TestNewRequestBodies(t *testing.T) {
	t.Parallel()
	cases := []struct {
		body     any
		want, ct string
	}{
		{nil, "", ""},
		{`{"raw":1}`, `{"raw":1}`, "application/json"},
		{[]byte(`[1]`), `[1]`, "application/json"},
		{map[string]int{"n": 2}, `{"n":2}`, "application/json"},
	}
	for _, c := range cases {
		req := NewRequest(t, http.MethodPost, "http://example.invalid/x", c.body)
		var got []byte
		if req.Body != nil {
			got, _ = io.ReadAll(req.Body)
		}
		if string(got) != c.want || req.Header.Get("Content-Type") != c.ct {
			t.Errorf("body %#v: sent %q with Content-Type %q, want %q and %q", c.body, got, req.Header.Get("Content-Type"), c.want, c.ct)
		}
		if c.body != nil && req.GetBody == nil {
			t.Errorf("body %#v: no GetBody, so OpenAPI.Check cannot read the request again", c.body)
		}
	}
}

func TestDoDecodesOrFails(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/bad" {
			_, _ = w.Write([]byte("not json"))
			return
		}
		var in map[string]any
		_ = json.NewDecoder(r.Body).Decode(&in)
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{"echo": in["n"], "method": r.Method})
	}))
	t.Cleanup(srv.Close)
	var out struct {
		Echo   float64 `json:"echo"`
		Method string  `json:"method"`
	}
	if s, _ := Do(t, http.MethodPut, srv.URL+"/ok", map[string]int{"n": 7}, &out); s != http.StatusCreated || out.Echo != 7 || out.Method != "PUT" {
		t.Errorf("Do: %d %+v", s, out)
	}
	if failed, _ := fails(t, func(tb testing.TB) { Do(tb, http.MethodGet, srv.URL+"/bad", nil, &out) }); !failed {
		t.Error("Do accepted an answer that is not the expected JSON")
	}
	if failed, _ := fails(t, func(tb testing.TB) { Do(tb, http.MethodGet, "http://127.0.0.1:1/", nil, nil) }); !failed {
		t.Error("Do did not fail on a refused connection")
	}
}

func TestEventually(t *testing.T) {
	t.Parallel()
	n := 0
	Eventually(t, 5*time.Second, "three polls", func() bool { n++; return n >= 3 })
	if n != 3 {
		t.Errorf("cond called %d times, want 3", n)
	}
	failed, msg := fails(t, func(tb testing.TB) { Eventually(tb, 100*time.Millisecond, "never", func() bool { return false }) })
	if !failed || !strings.Contains(msg, "timed out") {
		t.Errorf("Eventually on a condition that never holds: failed=%v %q", failed, msg)
	}
}

func TestServerNamesTheVariable(t *testing.T) {
	t.Parallel()
	failed, msg := fails(t, func(tb testing.TB) { Server(tb, "KITTEST_UNSET_VARIABLE", "127.0.0.1:1") })
	if testing.Short() {
		if failed || !strings.Contains(msg, "KITTEST_UNSET_VARIABLE") || !strings.Contains(msg, "skipped in -short") {
			t.Errorf("-short run: failed=%v %q, want a skip naming the variable", failed, msg)
		}
		return
	}
	if !failed || !strings.Contains(msg, "KITTEST_UNSET_VARIABLE") {
		t.Errorf("Server with nothing listening: failed=%v %q", failed, msg)
	}
}
