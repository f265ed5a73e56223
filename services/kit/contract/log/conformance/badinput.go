// Area: bad input. Bad requests get a 4xx JSON error and append nothing;
// runBadInput also runs the hostile values (hostile.go).

package conformance

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	logc "github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/log"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// runBadInput checks that bad requests get a 4xx JSON error, and that
// hostile values are refused or kept exactly.
func runBadInput(t *testing.T, newTarget NewTarget) {
	runTests(t, newTarget, []test{
		{"BadInput", testBadInput},
		{"HostileValues", testHostileValues},
	})
}

func testBadInput(t *testing.T, tg Target) {
	base := tg.URL()
	checkBadRequests(t, base, badRequests())
	checkLookalikeEscapes(t, base)
	checkWaitTimesOut(t, tg)
}

// badRequest is one request testBadInput sends, and the answer it wants:
// status, with an error containing contains.
type badRequest struct {
	name, method, path, ctype, body string
	status                          int
	contains                        string
}

// badRequests are the requests of testBadInput, each refused with a 4xx.
func badRequests() []badRequest {
	return []badRequest{
		{"no type", "POST", "/events", "", `{"key": "k"}`, 400, "type is required"},
		{"no key", "POST", "/events", "", `{"type": "t"}`, 400, "key is required"},
		{"payload array", "POST", "/events", "", `{"type": "t", "key": "k", "payload": [1]}`, 400, "payload must be a JSON object"},
		{"payload string", "POST", "/events", "", `{"type": "t", "key": "k", "payload": "x"}`, 400, "payload must be a JSON object"},
		{"id from client", "POST", "/events", "", `{"type": "t", "key": "k", "id": "x"}`, 400, "unknown field"},
		{"type not string", "POST", "/events", "", `{"type": 5, "key": "k"}`, 400, "must be a string"},
		{"long key", "POST", "/events", "", `{"type": "t", "key": "` + strings.Repeat("k", 201) + `"}`, 400, "longer than 200"},
		{"malformed", "POST", "/events", "", `{"type": `, 400, "malformed JSON"},
		{"empty body", "POST", "/events", "", ``, 400, "empty"},
		{"content type", "POST", "/events", "text/plain", `{"type": "t", "key": "k"}`, 415, "Content-Type"},
		{"oversize", "POST", "/events", "", `{"type": "t", "key": "k", "payload": {"x": "` + strings.Repeat("x", 2<<20) + `"}}`, 413, "limit"},
		{"empty batch", "POST", "/events/batch", "", `{"events": []}`, 400, "1 to 1000"},
		{"no events", "POST", "/events/batch", "", `{}`, 400, "1 to 1000"},
		{"bad element", "POST", "/events/batch", "", `{"events": [{"type": "t", "key": "k"}, {"type": "t"}]}`, 400, "events[1].key is required"},
		{"malformed id", "GET", "/events/nope", "", ``, 404, "nope"},
		{"unknown id", "GET", "/events/01890000-0000-7000-8000-000000000000", "", ``, 404, "not found"},
		{"wait unknown id", "GET", "/events/01890000-0000-7000-8000-000000000000/wait?timeout=1s", "", ``, 404, "not found"},
		{"wait bad timeout", "GET", "/events/01890000-0000-7000-8000-000000000000/wait?timeout=abc", "", ``, 400, "timeout"},
		{"wait negative timeout", "GET", "/events/01890000-0000-7000-8000-000000000000/wait?timeout=-1s", "", ``, 400, "timeout"},
		{"wait long timeout is clamped", "GET", "/events/01890000-0000-7000-8000-000000000000/wait?timeout=2h", "", ``, 404, "not found"},
		{"wrong method", "DELETE", "/events", "", ``, 405, "not allowed"},
		// What Postgres text/jsonb cannot store is the client's 400, not a 5xx.
		{"NUL in type", "POST", "/events", "", `{"type": "a\u0000b", "key": "k"}`, 400, "type must not contain U+0000"},
		{"NUL in key", "POST", "/events", "", `{"type": "t", "key": "k\u0000"}`, 400, "key must not contain U+0000"},
		{"NUL in payload", "POST", "/events", "", `{"type": "t", "key": "k", "payload": {"x": "a\u0000"}}`, 400, "\\u0000"},
		{"NUL in payload key", "POST", "/events", "", `{"type": "t", "key": "k", "payload": {"\u0000": 1}}`, 400, "\\u0000"},
		{"lone high surrogate", "POST", "/events", "", `{"type": "t", "key": "k", "payload": {"x": "\ud800"}}`, 400, "unpaired UTF-16 surrogate"},
		{"high surrogate then letter", "POST", "/events", "", `{"type": "t", "key": "k", "payload": {"x": "\ud800\u0041"}}`, 400, "unpaired UTF-16 surrogate"},
		{"lone low surrogate", "POST", "/events", "", `{"type": "t", "key": "k", "payload": {"x": "a\uDC00"}}`, 400, "unpaired UTF-16 surrogate"},
		{"surrogate in batch", "POST", "/events/batch", "", `{"events": [{"type": "t", "key": "k"}, {"type": "t", "key": "k", "payload": {"\ud83d": 1}}]}`, 400, "events[1].payload has an unpaired"},
		{"batch too big", "POST", "/events/batch", "", tooBigBatch(), 400, "at most 1000"},
	}
}

// tooBigBatch is a batch of one event more than logc.MaxBatch.
func tooBigBatch() string {
	var big strings.Builder
	big.WriteString(`{"events": [`)
	for i := range logc.MaxBatch + 1 {
		if i > 0 {
			big.WriteString(",")
		}
		big.WriteString(`{"type": "t", "key": "k"}`)
	}
	big.WriteString(`]}`)
	return big.String()
}

// checkBadRequests sends each of cases to base and checks its answer: the
// status wanted, with a JSON error containing what it names.
func checkBadRequests(t testing.TB, base string, cases []badRequest) {
	t.Helper()
	for _, c := range cases {
		var send any // no body at all when c.body is empty
		if c.body != "" {
			send = c.body
		}
		req := kittest.NewRequest(t, c.method, base+c.path, send)
		if c.ctype != "" {
			req.Header.Set("Content-Type", c.ctype)
		}
		resp, raw := kittest.Send(t, req)
		var body map[string]any
		err := json.Unmarshal(raw, &body)
		msg, _ := body["error"].(string)
		if err != nil || resp.StatusCode != c.status || !strings.Contains(msg, c.contains) {
			t.Errorf("%s: %d %v (decode err %v), want %d with an error containing %q", c.name, resp.StatusCode, body, err, c.status, c.contains)
		}
	}
}

// checkLookalikeEscapes checks that escapes that only look like the
// refused ones are accepted and kept: an escaped backslash before "u0000"
// is the six characters \u0000, and a surrogate pair is one character.
func checkLookalikeEscapes(t testing.TB, base string) {
	t.Helper()
	odd := Post(t, base, logc.NewEvent{Type: "t", Key: "k", Payload: json.RawMessage(`{"x": "\\u0000", "y": "\\\\\ud83d\ude00"}`)})
	var got struct{ X, Y string }
	if err := json.Unmarshal(Get(t, base, odd.ID).Payload, &got); err != nil || got.X != `\u0000` || got.Y != "\\\\\U0001F600" {
		t.Errorf("escaped backslash / surrogate pair payload came back as %+v (%v)", got, err)
	}
}

// checkWaitTimesOut checks the 408: an event that exists but is not
// delivered when the wait gives up. The target holds the consumer's
// delivery record, so the event cannot be delivered until it is
// released: the answer does not race the consumer, however loaded the
// machine. Released, the consumer records it: nothing was lost while
// held.
func checkWaitTimesOut(t testing.TB, tg Target) {
	t.Helper()
	base := tg.URL()
	release := tg.HoldDeliveries(t)
	held := Post(t, base, logc.NewEvent{Type: "t", Key: "held"})
	var timedOut map[string]any
	if s, _ := kittest.Do(t, http.MethodGet, base+"/events/"+held.ID+"/wait?timeout=1ms", nil, &timedOut); s != http.StatusRequestTimeout {
		t.Errorf("wait?timeout=1ms for an event whose delivery is held: %d %v, want 408", s, timedOut)
	} else if msg, _ := timedOut["error"].(string); !strings.Contains(msg, "not delivered within 1ms") {
		t.Errorf("408 body: %v, want the 1ms asked for named", timedOut)
	}
	release()
	WaitDelivered(t, base, held.ID)
}
