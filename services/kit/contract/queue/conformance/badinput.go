// Area: bad input. Bad requests get a 4xx JSON error and record
// nothing; runBadInput also runs the hostile values (hostile.go).

package conformance

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue"
)

// runBadInput checks that bad requests get a 4xx JSON error and record
// nothing, and that hostile values are refused or kept exactly.
func runBadInput(t *testing.T, f Features, newTarget NewTarget) {
	runTests(t, f, newTarget, []test{
		{"BadRequests", testBadRequests},
		{"HostileValues", testHostileValues},
	})
}

func testBadRequests(t *testing.T, _ Features, newTarget NewTarget) {
	tg := newTarget(t, Settings{})
	base := tg.URL()
	big := `{"kind":"big","payload":{"x":"` + strings.Repeat("x", queue.DefaultPayloadLimit) + `"}}`
	many := `{"tasks":[` + strings.TrimSuffix(strings.Repeat(`{"kind":"a"},`, queue.MaxBatch+1), ",") + `]}`
	cases := []struct {
		name, method, path, body string
		status                   int
	}{
		{"malformed", "POST", "/tasks", `{"kind":`, 400},
		{"missing kind", "POST", "/tasks", `{"payload":{}}`, 400},
		{"blank kind", "POST", "/tasks", `{"kind":"  "}`, 400},
		{"unknown field", "POST", "/tasks", `{"kind":"a","colour":"red"}`, 400},
		{"payload not object", "POST", "/tasks", `{"kind":"a","payload":[1]}`, 400},
		{"payload over limit", "POST", "/tasks", big, 413},
		// Valid JSON that Postgres text/jsonb cannot store (SQLSTATE 22P05):
		// the client's input, so 400, never a 5xx.
		{"NUL in kind", "POST", "/tasks", `{"kind":"a\u0000b"}`, 400},
		{"NUL in payload", "POST", "/tasks", `{"kind":"a","payload":{"x":"\u0000"}}`, 400},
		{"NUL in payload key", "POST", "/tasks", `{"kind":"a","payload":{"\u0000":1}}`, 400},
		{"lone surrogate in payload", "POST", "/tasks", `{"kind":"a","payload":{"x":"\ud800"}}`, 400},
		{"NUL in batch payload", "POST", "/tasks/batch", `{"tasks":[{"kind":"a"},{"kind":"b","payload":{"x":"\u0000"}}]}`, 400},
		{"lone surrogate in batch", "POST", "/tasks/batch", `{"tasks":[{"kind":"a","payload":{"x":"\udc00"}}]}`, 400},
		{"negative fail_times", "POST", "/tasks", `{"kind":"a","fail_times":-1}`, 400},
		{"fail_times wrong type", "POST", "/tasks", `{"kind":"a","fail_times":"2"}`, 400},
		{"empty batch", "POST", "/tasks/batch", `{"tasks":[]}`, 400},
		{"batch over 1000", "POST", "/tasks/batch", many, 400},
		{"batch not array", "POST", "/tasks/batch", `{"tasks":{}}`, 400},
		{"bad wait timeout", "GET", "/tasks/0190a6e4-7f43-7b6e-9a3c-2f4c8d1e0b5a/wait?timeout=soon", "", 400},
		{"wait negative timeout", "GET", "/tasks/0190a6e4-7f43-7b6e-9a3c-2f4c8d1e0b5a/wait?timeout=-1s", "", 400},
		{"wait long timeout is clamped", "GET", "/tasks/0190a6e4-7f43-7b6e-9a3c-2f4c8d1e0b5a/wait?timeout=10m", "", 404},
		{"amount zero", "POST", "/payments", `{"amount":0,"currency":"EUR"}`, 400},
		{"amount negative", "POST", "/payments", `{"amount":-5,"currency":"EUR"}`, 400},
		{"amount fraction", "POST", "/payments", `{"amount":12.5,"currency":"EUR"}`, 400},
		{"currency lower", "POST", "/payments", `{"amount":100,"currency":"eur"}`, 400},
		{"currency long", "POST", "/payments", `{"amount":100,"currency":"EURO"}`, 400},
		{"currency missing", "POST", "/payments", `{"amount":100}`, 400},
		{"fault switch off", "POST", "/payments?fault=between", `{"amount":100,"currency":"EUR"}`, 403},
		{"empty fault", "POST", "/payments?fault=", `{"amount":100,"currency":"EUR"}`, 400},
		{"unknown fault", "POST", "/payments?fault=meteor", `{"amount":100,"currency":"EUR"}`, 400},
		{"wrong method", "DELETE", "/tasks", "", 405},
	}
	for _, c := range cases {
		var body any
		if c.body != "" {
			body = c.body
		}
		var out map[string]any
		s, raw := call(t, c.method, base+c.path, body, &out)
		if s != c.status || out["error"] == nil || out["error"] == "" {
			t.Errorf("%s: %s %s: %d %.200s, want %d with a JSON error", c.name, c.method, c.path, s, raw, c.status)
		}
	}
	if n := countTasks(t, tg, all) + countPayments(t, tg, all); n != 0 {
		t.Errorf("rejected requests recorded %d rows", n)
	}
	// Look-alikes that are legal: an escaped backslash before "u0000", a
	// surrogate pair.
	e := enqueue(t, base, queue.TaskRequest{Kind: "legal", Payload: json.RawMessage(`{"x":"\\u0000","y":"\ud83d\ude00"}`)})
	if task := waitTask(t, base, e.ID); task.Status != queue.StatusDone {
		t.Errorf("task with a legal look-alike payload: %+v", task)
	}
}
