// Area: bad input. Bad requests get a 4xx JSON error and change nothing;
// runBadInput also runs the hostile values (hostile.go).

package conformance

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// runBadInput checks that bad requests get a 4xx JSON error, and that
// hostile values are refused or kept exactly.
func runBadInput(t *testing.T, newSide func(testing.TB) side) {
	runTests(t, newSide, []test{
		{"BadInputIsA4xxJSON", testBadInput},
		{"HostileValuesRefusedOrKeptExactly", testHostileValues},
	})
}

func testBadInput(t *testing.T, tg side) {
	s := streamName(t, 1)
	good := `{"type":"OxygenAdded","data":{"liters":1}}`
	cases := []struct {
		name, method, path, ctype, body string
		status                          int
		contains                        string
	}{
		{"malformed", "POST", "/streams/" + s + "/events", "application/json", `{"events": [`, 400, "malformed"},
		{"expected word", "POST", "/streams/" + s + "/events", "application/json", `{"expected_version":"sometimes","events":[` + good + `]}`, 400, "expected_version"},
		{"expected negative", "POST", "/streams/" + s + "/events", "application/json", `{"expected_version":-1,"events":[` + good + `]}`, 400, "expected_version"},
		{"no events", "POST", "/streams/" + s + "/events", "application/json", `{"events":[]}`, 400, "at least one"},
		{"no type", "POST", "/streams/" + s + "/events", "application/json", `{"events":[{"data":{}}]}`, 400, "type"},
		{"null data", "POST", "/streams/" + s + "/events", "application/json", `{"events":[{"type":"OxygenAdded","data":null}]}`, 400, "data"},
		{"metadata not object", "POST", "/streams/" + s + "/events", "application/json", `{"events":[{"type":"A","data":1,"metadata":[1]}]}`, 400, "metadata"},
		{"unknown field", "POST", "/streams/" + s + "/events", "application/json", `{"events":[` + good + `],"colour":1}`, 400, "unknown field"},
		{"system stream", "POST", "/streams/%24all/events", "application/json", `{"events":[` + good + `]}`, 400, "stream"},
		{"content type", "POST", "/streams/" + s + "/events", "text/plain", `{"events":[` + good + `]}`, 415, "Content-Type"},
		{"limit zero", "GET", "/streams/" + s + "?limit=0", "", "", 400, "limit"},
		{"limit word", "GET", "/streams/" + s + "?limit=abc", "", "", 400, "limit"},
		{"from negative", "GET", "/streams/" + s + "?from=-1", "", "", 400, "from"},
		{"bad position", "GET", "/subscribe?from=not-a-position", "", "", 400, "position"},
		// Well-formed (the contract's pattern) but not this backend's:
		// 404, so that every value the document admits is answered as
		// the document says.
		{"foreign position", "GET", "/subscribe?from=99999999999999999999:99999999999999999999", "", "", 404, "position"},
		// What Postgres cannot store (U+0000, lone surrogates) is refused
		// by the shared validation on every backend, never a 5xx.
		{"NUL in type", "POST", "/streams/" + s + "/events", "application/json", `{"events":[{"type":"a\u0000b","data":{}}]}`, 400, "type"},
		{"NUL in data", "POST", "/streams/" + s + "/events", "application/json", `{"events":[{"type":"A","data":{"x":"a\u0000"}}]}`, 400, "U+0000"},
		{"NUL in a data key", "POST", "/streams/" + s + "/events", "application/json", `{"events":[{"type":"A","data":{"\u0000":1}}]}`, 400, "U+0000"},
		{"lone high surrogate in data", "POST", "/streams/" + s + "/events", "application/json", `{"events":[{"type":"A","data":{"x":"\ud800"}}]}`, 400, "surrogate"},
		{"lone low surrogate in data", "POST", "/streams/" + s + "/events", "application/json", `{"events":[{"type":"A","data":["\udc00x"]}]}`, 400, "surrogate"},
		{"NUL in metadata", "POST", "/streams/" + s + "/events", "application/json", `{"events":[{"type":"A","data":1,"metadata":{"m":"\u0000"}}]}`, 400, "metadata"},
		{"lone surrogate in metadata", "POST", "/streams/" + s + "/events", "application/json", `{"events":[{"type":"A","data":1,"metadata":{"m":"\ud800\u0041"}}]}`, 400, "surrogate"},
	}
	for _, c := range cases {
		var body any // no body at all when c.body is empty
		if c.body != "" {
			body = c.body
		}
		req := kittest.NewRequest(t, c.method, tg.URL()+c.path, body)
		if c.ctype != "" {
			req.Header.Set("Content-Type", c.ctype)
		}
		resp, b := kittest.Send(t, req)
		status := resp.StatusCode
		var e struct{ Error string }
		if err := json.Unmarshal(b, &e); err != nil || status != c.status || !strings.Contains(e.Error, c.contains) {
			t.Errorf("%s: %d %s; want %d with an error containing %q", c.name, status, b, c.status, c.contains)
		}
	}
	if r, _ := readStream(t, tg.URL(), s, ""); len(r.Events) != 0 {
		t.Errorf("a refused request appended %d events", len(r.Events))
	}
	// Look-alikes of the refused inputs are legal and stored as sent: an
	// escaped backslash before "u0000", and a surrogate pair.
	s2 := streamName(t, 2)
	legal := ev("Legal", `{"path":"C:\\u0000","smile":"\ud83d\ude00"}`)
	legal.Metadata = json.RawMessage(`{"note":"\\ud800"}`)
	mustAppend(t, tg.URL(), s2, "any", legal)
	r, _ := readStream(t, tg.URL(), s2, "")
	if len(r.Events) != 1 || !jsonEqual(r.Events[0].Data, legal.Data) || !jsonEqual(r.Events[0].Metadata, legal.Metadata) {
		t.Errorf("legal escapes: read %+v, want data %s metadata %s", r.Events, legal.Data, legal.Metadata)
	}
}
