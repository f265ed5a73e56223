package k6

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/dop251/goja"

	logc "github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/log"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue"
)

// request is one call a script made through the k6/http stand-in.
type request struct {
	Method, Path, Body, ContentType string
	Host                            string
}

// harness runs one script under goja with stand-ins for k6's modules.
type harness struct {
	t        *testing.T
	vm       *goja.Runtime
	exports  *goja.Object
	requests []request
	checks   map[string]int
	ids      int
	// stats is GET /stats' answer ("{}" unless a test sets it).
	stats string
}

var (
	importDefault = regexp.MustCompile(`(?m)^import (\w+) from '([^']+)';`)
	importNamed   = regexp.MustCompile(`(?m)^import \{([^}]+)\} from '([^']+)';`)
	exportFunc    = regexp.MustCompile(`(?m)^export function (\w+)`)
	exportConst   = regexp.MustCompile(`(?m)^export const (\w+) =`)
	exportDefault = regexp.MustCompile(`(?m)^export default function`)
)

// commonJS rewrites the script's ES module syntax to CommonJS, as k6's own
// loader did before it had native modules: imports become require calls,
// exports become properties of exports.
func commonJS(src string) string {
	var funcs []string
	src = importDefault.ReplaceAllString(src, "const $1 = require('$2').default;")
	src = importNamed.ReplaceAllString(src, "const {$1} = require('$2');")
	src = exportDefault.ReplaceAllString(src, "exports.default = function")
	for _, m := range exportFunc.FindAllStringSubmatch(src, -1) {
		funcs = append(funcs, m[1])
	}
	src = exportFunc.ReplaceAllString(src, "function $1")
	src = exportConst.ReplaceAllString(src, "const $1 = exports.$1 =")
	for _, f := range funcs {
		src += fmt.Sprintf("\nexports.%s = %s;", f, f)
	}
	return src
}

func newHarness(t *testing.T, script string, env map[string]string) *harness {
	t.Helper()
	h, err := loadScript(t, script, env)
	if err != nil {
		t.Fatalf("%s does not load: %v", script, err)
	}
	return h
}

// loadScript runs script's top level with env under the stand-ins and
// returns the error it threw, if any.
func loadScript(t *testing.T, script string, env map[string]string) (*harness, error) {
	t.Helper()
	src, err := Scripts.ReadFile(script)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(src, []byte("require(")) {
		t.Fatalf("%s uses require: k6 scripts use import", script)
	}
	h := &harness{t: t, vm: goja.New(), checks: map[string]int{}, stats: "{}"}
	vm := h.vm
	vm.SetFieldNameMapper(goja.TagFieldNameMapper("json", true))
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(vm.Set("__ENV", env))
	must(vm.Set("__ITER", 0))
	must(vm.Set("__VU", 1))
	console := vm.NewObject()
	must(console.Set("log", func(args ...any) {}))
	must(vm.Set("console", console))
	modules := map[string]*goja.Object{"k6/http": h.httpModule(), "k6": h.k6Module(), "k6/metrics": h.metricsModule()}
	must(vm.Set("require", func(name string) *goja.Object {
		m, ok := modules[name]
		if !ok {
			panic(vm.NewGoError(fmt.Errorf("module %q is not a k6 module the stand-in knows", name)))
		}
		return m
	}))
	h.exports = vm.NewObject()
	must(vm.Set("exports", h.exports))
	_, err = vm.RunScript(script, commonJS(string(src)))
	return h, err
}

// httpModule is the k6/http stand-in: it records each request and answers
// as the contract does.
func (h *harness) httpModule() *goja.Object {
	vm := h.vm
	do := func(method string) func(u string, body goja.Value, params goja.Value) *goja.Object {
		return func(u string, body goja.Value, params goja.Value) *goja.Object {
			pu, err := url.Parse(u)
			if err != nil {
				panic(vm.NewGoError(err))
			}
			r := request{Method: method, Path: pu.Path, Host: pu.Host}
			if body != nil && !goja.IsUndefined(body) && !goja.IsNull(body) {
				r.Body = body.String()
			}
			if params != nil && !goja.IsUndefined(params) && !goja.IsNull(params) {
				if hs := params.ToObject(vm).Get("headers"); hs != nil && !goja.IsUndefined(hs) {
					if ct := hs.ToObject(vm).Get("Content-Type"); ct != nil && !goja.IsUndefined(ct) {
						r.ContentType = ct.String()
					}
				}
			}
			h.requests = append(h.requests, r)
			status, respBody := 200, "{}"
			switch {
			case method == "POST" && pu.Path == "/tasks":
				status, respBody = 202, `{"id":"t1","status":"queued"}`
			case method == "POST" && pu.Path == "/events":
				status, respBody = 201, `{"id":"e1"}`
			case method == "POST" && pu.Path == "/tasks/batch":
				status, respBody = 202, `{"ids":["t1"],"status":"queued","enqueued_at":"2026-01-02T03:04:05Z"}`
			case method == "POST" && pu.Path == "/events/batch":
				status, respBody = 201, `{"events":[{"id":"e1"}]}`
			case method == "GET" && pu.Path == "/stats":
				respBody = h.stats
			case method == "POST" && pu.Path == "/users":
				h.ids++
				status, respBody = 201, fmt.Sprintf(`{"id":"u%d"}`, h.ids)
			case method == "POST" && pu.Path == "/stats/reset", method == "DELETE":
				status, respBody = 204, ""
			}
			res := vm.NewObject()
			_ = res.Set("status", status)
			_ = res.Set("body", respBody)
			timings := vm.NewObject()
			_ = timings.Set("duration", 1.5)
			_ = res.Set("timings", timings)
			_ = res.Set("json", func(path string) any {
				var m map[string]any
				_ = json.Unmarshal([]byte(respBody), &m)
				if path == "" {
					return m
				}
				return m[path]
			})
			return res
		}
	}
	get := do("GET")
	del := do("DELETE")
	m := vm.NewObject()
	_ = m.Set("post", do("POST"))
	_ = m.Set("put", do("PUT"))
	_ = m.Set("patch", do("PATCH"))
	_ = m.Set("get", func(u string, params goja.Value) *goja.Object { return get(u, nil, params) })
	_ = m.Set("del", func(u string, body, params goja.Value) *goja.Object { return del(u, body, params) })
	_ = m.Set("default", m)
	return m
}

// k6Module is the k6 stand-in: check runs every predicate and counts the
// failures by name.
func (h *harness) k6Module() *goja.Object {
	vm := h.vm
	m := vm.NewObject()
	_ = m.Set("check", func(val goja.Value, checks *goja.Object) bool {
		ok := true
		for _, k := range checks.Keys() {
			fn, isFn := goja.AssertFunction(checks.Get(k))
			if !isFn {
				panic(vm.NewTypeError("check %q is not a function", k))
			}
			res, err := fn(goja.Undefined(), val)
			if err != nil {
				panic(err)
			}
			if !res.ToBoolean() {
				h.checks[k]++
				ok = false
			}
		}
		return ok
	})
	_ = m.Set("sleep", func(float64) {})
	_ = m.Set("default", m)
	return m
}

// metricsModule is the k6/metrics stand-in: Counter, Trend, Rate and Gauge
// with add().
func (h *harness) metricsModule() *goja.Object {
	vm := h.vm
	m := vm.NewObject()
	for _, name := range []string{"Counter", "Trend", "Rate", "Gauge"} {
		_ = m.Set(name, func(call goja.ConstructorCall) *goja.Object {
			if len(call.Arguments) == 0 || call.Argument(0).String() == "" {
				panic(vm.NewTypeError("%s needs a name", name))
			}
			_ = call.This.Set("add", func(v float64, tags goja.Value) {})
			return nil
		})
	}
	return m
}

// call runs an exported function (setup, default, a scenario's exec,
// teardown) with __ITER set and returns its result.
func (h *harness) call(name string, iter int, args ...goja.Value) goja.Value {
	h.t.Helper()
	fn, ok := goja.AssertFunction(h.exports.Get(name))
	if !ok {
		h.t.Fatalf("the script exports no function %q", name)
	}
	_ = h.vm.Set("__ITER", iter)
	v, err := fn(goja.Undefined(), args...)
	if err != nil {
		h.t.Fatalf("%s(): %v", name, err)
	}
	return v
}

// scenarios checks options: every scenario uses constant-arrival-rate (an
// open model, as the Go driver's attacks) or constant-vus (a closed loop,
// as its throughput senders), and thresholds exist. It returns each
// scenario's exec function name.
func (h *harness) scenarios() []string {
	h.t.Helper()
	var opts struct {
		Scenarios map[string]struct {
			Executor string
			Exec     string
			Rate     float64
			TimeUnit string
			Duration string
			MaxVUs   float64
			VUs      float64
		}
		Thresholds map[string][]string
	}
	b, err := json.Marshal(h.exports.Get("options").Export())
	if err != nil {
		h.t.Fatal(err)
	}
	if err := json.Unmarshal(b, &opts); err != nil {
		h.t.Fatal(err)
	}
	if len(opts.Scenarios) == 0 || len(opts.Thresholds) == 0 {
		h.t.Fatalf("options need scenarios and thresholds: %s", b)
	}
	var execs []string
	for name, s := range opts.Scenarios {
		switch s.Executor {
		case "constant-arrival-rate":
			if s.Rate <= 0 || s.TimeUnit == "" || s.Duration == "" || s.MaxVUs <= 0 {
				h.t.Errorf("scenario %s: %+v", name, s)
			}
		case "constant-vus":
			if s.VUs <= 0 || s.Duration == "" {
				h.t.Errorf("scenario %s: %+v", name, s)
			}
		default:
			h.t.Errorf("scenario %s: executor %q", name, s.Executor)
		}
		if s.Exec == "" {
			s.Exec = "default"
		}
		execs = append(execs, s.Exec)
	}
	return execs
}

// strict decodes body into v refusing unknown fields.
func strict(t *testing.T, body string, v any) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Errorf("body %s: %v", body, err)
	}
}

const base = "http://svc.test:9999"

func (h *harness) only(method, path string) []request {
	var out []request
	for _, r := range h.requests {
		if r.Method == method && r.Path == path {
			out = append(out, r)
		}
	}
	return out
}

func (h *harness) checkAllJSONAndHost() {
	h.t.Helper()
	for _, r := range h.requests {
		if r.Host != "svc.test:9999" {
			h.t.Errorf("%s %s went to %s, not BASE_URL", r.Method, r.Path, r.Host)
		}
		if r.Body != "" && r.ContentType != "application/json" {
			h.t.Errorf("%s %s sends a body without Content-Type: application/json", r.Method, r.Path)
		}
	}
	if len(h.checks) > 0 {
		h.t.Errorf("failed checks against contract answers: %v", h.checks)
	}
}

func TestQueueScript(t *testing.T) {
	h := newHarness(t, "queue.js", map[string]string{"BASE_URL": base, "RATE": "500"})
	if got := h.scenarios(); len(got) != 1 || got[0] != "default" {
		t.Errorf("execs %v", got)
	}
	h.call("setup", 0)
	for i := range 3 {
		h.call("default", i)
	}
	h.call("teardown", 0)
	if len(h.only("POST", "/stats/reset")) != 1 || len(h.only("GET", "/stats")) != 1 || len(h.only("GET", "/queue")) != 1 {
		t.Errorf("setup/teardown requests: %+v", h.requests)
	}
	tasks := h.only("POST", "/tasks")
	if len(tasks) != 3 {
		t.Fatalf("POST /tasks %d times", len(tasks))
	}
	for i, r := range tasks {
		var body struct {
			Kind      string         `json:"kind"`
			Payload   map[string]any `json:"payload"`
			FailTimes *int           `json:"fail_times"`
		}
		strict(t, r.Body, &body)
		if body.Kind == "" || body.Payload["n"] != float64(i) || body.FailTimes == nil || *body.FailTimes != 0 {
			t.Errorf("task %d: %s", i, r.Body)
		}
	}
	h.checkAllJSONAndHost()
}

func TestLogScript(t *testing.T) {
	h := newHarness(t, "log.js", map[string]string{"BASE_URL": base})
	h.scenarios()
	h.call("setup", 0)
	for i := range 3 {
		h.call("default", i)
	}
	h.call("teardown", 0)
	events := h.only("POST", "/events")
	if len(events) != 3 || len(h.only("GET", "/consumer")) != 1 || len(h.only("POST", "/stats/reset")) != 1 {
		t.Fatalf("requests %+v", h.requests)
	}
	for i, r := range events {
		var body struct {
			Type    string         `json:"type"`
			Key     string         `json:"key"`
			Payload map[string]any `json:"payload"`
		}
		strict(t, r.Body, &body)
		if body.Type == "" || body.Key != fmt.Sprintf("k%d", i) || body.Payload["n"] != float64(i) {
			t.Errorf("event %d: %s", i, r.Body)
		}
	}
	h.checkAllJSONAndHost()
}

func TestDocumentsScript(t *testing.T) {
	h := newHarness(t, "documents.js", map[string]string{"BASE_URL": base, "USERS": "3"})
	execs := h.scenarios()
	data := h.call("setup", 0)
	for _, e := range execs {
		for i := range 2 {
			h.call(e, i, data)
		}
	}
	h.call("teardown", 0, data)

	users := h.only("POST", "/users")
	if len(users) != 3 {
		t.Fatalf("POST /users %d times", len(users))
	}
	emails := map[string]bool{}
	for _, r := range users {
		var body struct {
			Email   string         `json:"email"`
			Name    string         `json:"name"`
			Plan    string         `json:"plan"`
			Profile map[string]any `json:"profile"`
		}
		strict(t, r.Body, &body)
		if body.Email == "" || emails[body.Email] || body.Name == "" || body.Plan == "" || len(body.Profile) == 0 {
			t.Errorf("user: %s", r.Body)
		}
		emails[body.Email] = true
	}
	searches := h.only("POST", "/users/search")
	if len(searches) != 2 {
		t.Errorf("searches %d", len(searches))
	}
	for _, r := range searches {
		var body struct {
			Profile map[string]any `json:"profile"`
			Limit   int            `json:"limit"`
		}
		strict(t, r.Body, &body)
		if len(body.Profile) == 0 || body.Limit <= 0 {
			t.Errorf("search: %s", r.Body)
		}
	}
	var patches, rewrites, deletes int
	for _, r := range h.requests {
		switch {
		case r.Method == "PATCH" && regexp.MustCompile(`^/users/u\d+$`).MatchString(r.Path):
			var body struct {
				Name string `json:"name"`
			}
			strict(t, r.Body, &body)
			patches++
		case r.Method == "PUT" && regexp.MustCompile(`^/users/u\d+/profile$`).MatchString(r.Path):
			var profile map[string]any
			if err := json.Unmarshal([]byte(r.Body), &profile); err != nil || len(r.Body) < 500<<10 {
				t.Errorf("rewrite body: %d bytes, %v", len(r.Body), err)
			}
			rewrites++
		case r.Method == "DELETE" && strings.HasPrefix(r.Path, "/users/u"):
			deletes++
		}
	}
	if patches != 2 || rewrites != 2 || deletes != 3 {
		t.Errorf("patches %d rewrites %d deletes %d", patches, rewrites, deletes)
	}
	h.checkAllJSONAndHost()
}

// TestBatchScript runs batch.js for both pairs: a closed loop of SENDERS
// VUs posting BATCH items to the pair's batch endpoint, bodies the
// contract's batch request types take, accepted items counted, and a
// teardown that reads /stats until the backlog drains.
func TestBatchScript(t *testing.T) {
	for _, tc := range []struct {
		pair, path, progress string
		decode               func(t *testing.T, body string) int
	}{
		{"queue", "/tasks/batch", "/queue", func(t *testing.T, body string) int {
			var b queue.BatchRequest
			strict(t, body, &b)
			for i, task := range b.Tasks {
				if task.Kind != "load" || string(task.Payload) != fmt.Sprintf(`{"n":%d}`, i) {
					t.Errorf("task %d: %+v", i, task)
				}
			}
			return len(b.Tasks)
		}},
		{"log", "/events/batch", "/consumer", func(t *testing.T, body string) int {
			var b logc.Batch
			strict(t, body, &b)
			for i, e := range b.Events {
				if e.Type != "load.tick" || e.Key != fmt.Sprintf("k%d", i%64) {
					t.Errorf("event %d: %+v", i, e)
				}
			}
			return len(b.Events)
		}},
	} {
		t.Run(tc.pair, func(t *testing.T) {
			h := newHarness(t, "batch.js", map[string]string{"BASE_URL": base, "PAIR": tc.pair, "BATCH": "70", "SENDERS": "3", "DRAIN": "1"})
			if got := h.scenarios(); len(got) != 1 || got[0] != "default" {
				t.Errorf("execs %v", got)
			}
			opts := h.exports.Get("options").Export().(map[string]any)
			if vus := opts["scenarios"].(map[string]any)["batches"].(map[string]any)["vus"]; fmt.Sprint(vus) != "3" {
				t.Errorf("SENDERS=3 gave %v VUs", vus)
			}
			h.call("setup", 0)
			for i := range 2 {
				h.call("default", i)
			}
			// A backlog that never drains: teardown gives up after DRAIN.
			h.stats = `{"counters":{"enqueued":5,"written":5},"since_reset_s":2}`
			h.call("teardown", 0)
			posts := h.only("POST", tc.path)
			if len(posts) != 2 {
				t.Fatalf("POST %s %d times: %+v", tc.path, len(posts), h.requests)
			}
			for _, r := range posts {
				if n := tc.decode(t, r.Body); n != 70 {
					t.Errorf("batch of %d items, want 70", n)
				}
			}
			if n := len(h.only("GET", "/stats")); n != 11 {
				t.Errorf("teardown read /stats %d times, want 11 (10 per second of DRAIN, then give up)", n)
			}
			if len(h.only("POST", "/stats/reset")) != 1 || len(h.only("GET", tc.progress)) != 1 {
				t.Errorf("setup/teardown requests: %+v", h.requests)
			}
			h.checkAllJSONAndHost()
		})
	}
	for msg, env := range map[string]map[string]string{"want queue or log": {"PAIR": "cache"}, "want 1 to 1000": {"BATCH": "1001"}} {
		if _, err := loadScript(t, "batch.js", env); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("batch.js with %v: %v, want an error saying %q", env, err, msg)
		}
	}
}
