package conformance

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/eventstore"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// Features are the capability flags a side declares; they must equal
// what its GET /capabilities answers, and the suite skips the tests that
// need a capability the side lacks, naming the flag.
type Features = eventstore.Capabilities

// Target is one running service under test (see kittest.Target).
//
// Restart stops the service gracefully (open subscriptions end) and
// starts a new one on the same backend state (schema, topic, server).
// No side holds anything unconfirmed in the process (an append is
// answered once the engine has it), so a side's Crash may be a Restart;
// the suite checks that every answered append survives both and that a
// subscription resumes from a position taken before.
type Target interface {
	kittest.Target
	// Names are the service and backend names /stats must report.
	Names() (service, backend string)
}

// NewTarget starts a fresh service with backend state of its own (a
// schema, a topic) for one test, stopped when that test ends.
type NewTarget func(t testing.TB) Target

// side is what each test gets: a target, the side's Features and its
// Options.
type side struct {
	Target
	Features Features
	options
}

// Option declares, for one side, a promise of the suite the side does not
// keep; the tests that check it check what the side does promise instead,
// and log the reason.
type Option func(*options)

type options struct {
	noTotalOrder, scansAPartition string
}

// WithoutTotalOrder declares a side whose subscription delivers no total
// order across streams (a keyed Kafka topic: each partition in order, the
// partitions interleaved), for reason. The subscription tests then check
// each stream's order and that every event arrives, not the order between
// streams nor that global positions increase along the subscription.
func WithoutTotalOrder(reason string) Option {
	return func(o *options) { o.noTotalOrder = reason }
}

// ScansAPartition declares a side without server_side_stream_read whose
// read of a stream consumes one partition of the store, not all of it
// (a keyed Kafka topic), for reason. RecordsScannedIsHonest then checks
// that records_scanned lies between the events returned and every record
// the test wrote, instead of at least every record.
func ScansAPartition(reason string) Option {
	return func(o *options) { o.scansAPartition = reason }
}

// Timeout bounds each wait of the suite; generous because the machines
// running it are small and shared.
const suiteTimeout = 60 * time.Second

// Run is the one conformance suite every event store service runs, with
// its side's Features and NewTarget. Every subtest runs in parallel on its
// own target.
func Run(t *testing.T, f Features, newTarget NewTarget, opts ...Option) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	kittest.ValidateOpenAPI(t, kittest.NewOpenAPI(t, eventstore.OpenAPI))
	tests := []struct {
		Name string
		Fn   func(t *testing.T, tg side)
	}{
		{"SharedEndpointsOpenAPIAndCapabilities", testShared},
		{"AppendThenReadVersionsAndPositions", testAppendRead},
		{"StateFoldsTheTank", testState},
		{"BadInputIsA4xxJSON", testBadInput},
		{"HostileValuesRefusedOrKeptExactly", testHostileValues},
		{"WrongExpectedVersionIs409WithActualVersion", testExpectedVersion},
		{"ConcurrentConditionalAppendsExactlyOneWins", testConditionalRace},
		{"ConditionalAppendRefusedWith422", testConditionalRefused},
		{"ConcurrentAnyAppendsLoseNothing", testAnyRace},
		{"RecordsScannedIsHonest", testRecordsScanned},
		{"SubscribeCatchUpLiveAndResume", testSubscribe},
		{"RestartAndCrashLoseNothingAndSubscriptionResumes", testRestart},
	}
	kittest.RunParallel(t, tests, func(t *testing.T, fn func(*testing.T, side)) {
		fn(t, side{Target: newTarget(t), Features: f, options: o})
	})
}

// streamName returns a stream id unique to this run: tank-<hex>-<n>.
func streamName(t testing.TB, n int) string {
	t.Helper()
	return fmt.Sprintf("%s-%d", runPrefix(t), n)
}

var prefixes sync.Map

func runPrefix(t testing.TB) string {
	if p, ok := prefixes.Load(t.Name()); ok {
		return p.(string)
	}
	var b [5]byte
	_, _ = rand.Read(b[:])
	p, _ := prefixes.LoadOrStore(t.Name(), "tank-"+hex.EncodeToString(b[:]))
	return p.(string)
}

func decode(t testing.TB, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("body is not the expected JSON (%v): %s", err, b)
	}
}

// appendEvents posts events and returns the status and the raw body.
func appendEvents(t testing.TB, base, stream string, expected any, events ...eventstore.EventData) (int, []byte) {
	t.Helper()
	body := map[string]any{"events": events}
	if expected != nil {
		body["expected_version"] = expected
	}
	return kittest.Do(t, http.MethodPost, base+"/streams/"+stream+"/events", body, nil)
}

func mustAppend(t testing.TB, base, stream string, expected any, events ...eventstore.EventData) eventstore.AppendResult {
	t.Helper()
	status, b := appendEvents(t, base, stream, expected, events...)
	if status != http.StatusCreated {
		t.Fatalf("append to %s (expected %v): %d %s", stream, expected, status, b)
	}
	var r eventstore.AppendResult
	decode(t, b, &r)
	if r.Position == "" {
		t.Fatalf("append answered no position: %s", b)
	}
	return r
}

func readStream(t testing.TB, base, stream, query string) (eventstore.ReadResult, map[string]any) {
	t.Helper()
	status, b := kittest.Do(t, http.MethodGet, base+"/streams/"+stream+query, nil, nil)
	if status != http.StatusOK {
		t.Fatalf("read %s%s: %d %s", stream, query, status, b)
	}
	var r eventstore.ReadResult
	decode(t, b, &r)
	var raw map[string]any
	decode(t, b, &raw)
	return r, raw
}

func ev(typ string, data string) eventstore.EventData {
	return eventstore.EventData{Type: typ, Data: json.RawMessage(data)}
}

func registered() eventstore.EventData { return ev("TankRegistered", `{"capacity_liters":1000}`) }
func added(l float64) eventstore.EventData {
	return ev("OxygenAdded", fmt.Sprintf(`{"liters":%g}`, l))
}
func consumed(l float64) eventstore.EventData {
	return ev("OxygenConsumed", fmt.Sprintf(`{"liters":%g}`, l))
}

// firstExpected is the expected version for a new stream: "no_stream"
// where the engine checks it, "any" elsewhere.
func firstExpected(tg side) any {
	if tg.Features.ConditionalAppend {
		return "no_stream"
	}
	return "any"
}

func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

func testShared(t *testing.T, tg side) {
	service, backend := tg.Names()
	kittest.CheckShared(t, tg.URL(), service, "eventstore", backend)
	status, b := kittest.Do(t, http.MethodGet, tg.URL()+"/openapi.yaml", nil, nil)
	if status != 200 || !bytes.Equal(b, eventstore.OpenAPI) {
		t.Errorf("/openapi.yaml: %d, %d bytes; want the contract's %d bytes", status, len(b), len(eventstore.OpenAPI))
	}
	status, b = kittest.Do(t, http.MethodGet, tg.URL()+"/capabilities", nil, nil)
	var c eventstore.Capabilities
	decode(t, b, &c)
	if status != 200 || c != tg.Features {
		t.Errorf("/capabilities: %d %+v; the target declares %+v", status, c, tg.Features)
	}
	var raw map[string]any
	decode(t, b, &raw)
	for _, k := range []string{"conditional_append", "server_side_stream_read", "push_subscription"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("/capabilities lacks %q: %s", k, b)
		}
	}
}

func testAppendRead(t *testing.T, tg side) {
	s := streamName(t, 1)
	meta := eventstore.EventData{Type: "OxygenAdded", Data: json.RawMessage(`{"liters":5}`), Metadata: json.RawMessage(`{"operator":"aldrin"}`)}
	res := mustAppend(t, tg.URL(), s, firstExpected(tg), registered(), added(300), meta)
	if res.FirstVersion != nil && (*res.FirstVersion != 0 || res.LastVersion == nil || *res.LastVersion != 2) {
		t.Errorf("append versions %v..%v, want 0..2", *res.FirstVersion, res.LastVersion)
	}
	if !tg.Features.ConditionalAppend && res.FirstVersion == nil {
		t.Log("append answered null versions: this engine assigns no stream versions")
	}
	r, raw := readStream(t, tg.URL(), s, "")
	if _, ok := raw["records_scanned"]; !ok {
		t.Errorf("read lacks records_scanned (null where not measurable): %v", raw)
	}
	if r.Stream != s || len(r.Events) != 3 {
		t.Fatalf("read %s: stream %q, %d events, want 3", s, r.Stream, len(r.Events))
	}
	want := []eventstore.EventData{registered(), added(300), meta}
	for i, e := range r.Events {
		if e.Version == nil || *e.Version != int64(i) {
			t.Errorf("event %d: version %v", i, e.Version)
		}
		if e.Stream != s || e.Type != want[i].Type || !jsonEqual(e.Data, want[i].Data) {
			t.Errorf("event %d = %+v, want %+v", i, e, want[i])
		}
		if e.Position == "" || e.CreatedAt.IsZero() {
			t.Errorf("event %d lacks position or created_at: %+v", i, e)
		}
		if i > 0 && e.GlobalPosition <= r.Events[i-1].GlobalPosition {
			t.Errorf("global positions do not increase within a stream: %d then %d", r.Events[i-1].GlobalPosition, e.GlobalPosition)
		}
	}
	if !jsonEqual(r.Events[0].Metadata, json.RawMessage(`{}`)) || !jsonEqual(r.Events[2].Metadata, meta.Metadata) {
		t.Errorf("metadata: %s and %s", r.Events[0].Metadata, r.Events[2].Metadata)
	}
	if r.LastVersion == nil || *r.LastVersion != 2 {
		t.Errorf("last_version %v, want 2", r.LastVersion)
	}
	if r.Events[2].Position != res.Position || r.Events[2].GlobalPosition != res.GlobalPosition {
		t.Errorf("append said position %s/%d, the read says %s/%d", res.Position, res.GlobalPosition, r.Events[2].Position, r.Events[2].GlobalPosition)
	}
	page, _ := readStream(t, tg.URL(), s, "?from=1&limit=1")
	if len(page.Events) != 1 || *page.Events[0].Version != 1 || page.LastVersion == nil || *page.LastVersion != 2 {
		t.Errorf("from=1&limit=1: %+v", page)
	}
	empty, raw := readStream(t, tg.URL(), streamName(t, 99), "")
	if len(empty.Events) != 0 || empty.LastVersion != nil {
		t.Errorf("a stream without events must read empty: %+v", empty)
	}
	if ev, ok := raw["events"].([]any); !ok || len(ev) != 0 {
		t.Errorf("events must be [] (not null) for an empty stream: %v", raw)
	}
}

func testState(t *testing.T, tg side) {
	s := streamName(t, 1)
	mustAppend(t, tg.URL(), s, firstExpected(tg), registered(), added(300))
	mustAppend(t, tg.URL(), s, "any", consumed(120.5), added(50))
	status, b := kittest.Do(t, http.MethodGet, tg.URL()+"/streams/"+s+"/state", nil, nil)
	var st eventstore.State
	decode(t, b, &st)
	if status != 200 || !st.Registered || st.CapacityLiters != 1000 || st.BalanceLiters != 229.5 || st.Events != 4 || st.Version == nil || *st.Version != 3 {
		t.Errorf("state: %d %s; want registered, capacity 1000, balance 229.5, 4 events, version 3", status, b)
	}
	status, b = kittest.Do(t, http.MethodGet, tg.URL()+"/streams/"+streamName(t, 2)+"/state", nil, nil)
	decode(t, b, &st)
	if status != 200 || st.Events != 0 || st.Version != nil || st.Registered {
		t.Errorf("state of an empty stream: %d %s", status, b)
	}
	// A balance past float64's range has no state to report: a JSON 422
	// naming the overflow (docs/eventstore.md), not 200 with no body.
	s = streamName(t, 3)
	mustAppend(t, tg.URL(), s, "any", added(1e308), added(1e308))
	status, b = kittest.Do(t, http.MethodGet, tg.URL()+"/streams/"+s+"/state", nil, nil)
	var e struct{ Error string }
	decode(t, b, &e)
	if status != http.StatusUnprocessableEntity || !strings.Contains(e.Error, "overflow") {
		t.Errorf("state of a stream whose balance overflows: %d %s; want 422 naming the overflow", status, b)
	}
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

func conflictBody(t testing.TB, status int, b []byte) (int64, bool) {
	t.Helper()
	if status != http.StatusConflict {
		return 0, false
	}
	var e struct {
		Error         string `json:"error"`
		ActualVersion *int64 `json:"actual_version"`
	}
	decode(t, b, &e)
	if e.Error == "" || e.ActualVersion == nil {
		t.Errorf("409 without error or actual_version: %s", b)
		return 0, false
	}
	return *e.ActualVersion, true
}

func testExpectedVersion(t *testing.T, tg side) {
	if !tg.Features.ConditionalAppend {
		t.Skip("capability conditional_append is false: this engine cannot refuse an append on a wrong expected version (see ConditionalAppendRefusedWith422)")
	}
	s := streamName(t, 1)
	if status, b := appendEvents(t, tg.URL(), s, 0, added(1)); status != 409 {
		t.Errorf("expected 0 on a stream without events: %d %s, want 409", status, b)
	} else if a, _ := conflictBody(t, status, b); a != -1 {
		t.Errorf("actual_version %d for a stream without events, want -1", a)
	}
	r := mustAppend(t, tg.URL(), s, "no_stream", registered())
	if r.FirstVersion == nil || *r.FirstVersion != 0 || *r.LastVersion != 0 {
		t.Errorf("first append: versions %v..%v, want 0..0", r.FirstVersion, r.LastVersion)
	}
	for _, exp := range []any{"no_stream", 5} {
		status, b := appendEvents(t, tg.URL(), s, exp, added(1))
		if a, ok := conflictBody(t, status, b); !ok || a != 0 {
			t.Errorf("expected %v on a stream at version 0: %d %s, want 409 actual_version 0", exp, status, b)
		}
	}
	r = mustAppend(t, tg.URL(), s, 0, added(10), consumed(2))
	if *r.FirstVersion != 1 || *r.LastVersion != 2 {
		t.Errorf("append at 0: versions %d..%d, want 1..2", *r.FirstVersion, *r.LastVersion)
	}
	r = mustAppend(t, tg.URL(), s, "any", added(1))
	if *r.FirstVersion != 3 {
		t.Errorf("append any: first version %d, want 3", *r.FirstVersion)
	}
	got, _ := readStream(t, tg.URL(), s, "")
	if len(got.Events) != 4 {
		t.Errorf("stream holds %d events, want 4 (refused appends must write nothing)", len(got.Events))
	}
}

func testConditionalRace(t *testing.T, tg side) {
	if !tg.Features.ConditionalAppend {
		t.Skip("capability conditional_append is false: concurrent writers cannot be serialized by expected version on this engine")
	}
	s := streamName(t, 1)
	mustAppend(t, tg.URL(), s, "no_stream", registered(), added(100))
	const writers = 8
	statuses := make([]int, writers)
	actual := make([]int64, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			status, b := appendEvents(t, tg.URL(), s, 1, consumed(float64(i+1)))
			statuses[i] = status
			if a, ok := conflictBody(t, status, b); ok {
				actual[i] = a
			}
		})
	}
	wg.Wait()
	wins := 0
	for i, st := range statuses {
		switch st {
		case http.StatusCreated:
			wins++
		case http.StatusConflict:
			if actual[i] != 2 {
				t.Errorf("loser %d: actual_version %d, want 2", i, actual[i])
			}
		default:
			t.Errorf("writer %d: status %d", i, st)
		}
	}
	if wins != 1 {
		t.Errorf("%d writers with expected_version 1 succeeded, want exactly 1", wins)
	}
	if r, _ := readStream(t, tg.URL(), s, ""); len(r.Events) != 3 {
		t.Errorf("stream holds %d events, want 3", len(r.Events))
	}
}

func testConditionalRefused(t *testing.T, tg side) {
	if tg.Features.ConditionalAppend {
		t.Skip("capability conditional_append is true: the engine checks expected versions (see WrongExpectedVersionIs409WithActualVersion)")
	}
	s := streamName(t, 1)
	for _, exp := range []any{0, 7, "no_stream"} {
		status, b := appendEvents(t, tg.URL(), s, exp, added(1))
		var e struct{ Error string }
		decode(t, b, &e)
		if status != http.StatusUnprocessableEntity || !strings.Contains(e.Error, "conditional_append") {
			t.Errorf("expected_version %v: %d %s; want 422 naming conditional_append", exp, status, b)
		}
	}
	if r, _ := readStream(t, tg.URL(), s, ""); len(r.Events) != 0 {
		t.Errorf("a refused conditional append wrote %d events", len(r.Events))
	}
	r := mustAppend(t, tg.URL(), s, "any", registered())
	if r.FirstVersion != nil && *r.FirstVersion != 0 {
		t.Errorf("first version %d", *r.FirstVersion)
	}
	if r := mustAppend(t, tg.URL(), s, nil, added(1)); r.Position == "" {
		t.Error("an append without expected_version (default any) failed")
	}
}

func testAnyRace(t *testing.T, tg side) {
	s := streamName(t, 1)
	const writers, each = 8, 5
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				status, b := appendEvents(t, tg.URL(), s, "any", ev("OxygenAdded", fmt.Sprintf(`{"liters":1,"writer":%d,"i":%d}`, w, i)))
				if status != http.StatusCreated {
					t.Errorf("writer %d append %d: %d %s", w, i, status, b)
				}
			}
		})
	}
	wg.Wait()
	r, _ := readStream(t, tg.URL(), s, "")
	if len(r.Events) != writers*each {
		t.Fatalf("stream holds %d events, want %d", len(r.Events), writers*each)
	}
	seen := map[string]bool{}
	for i, e := range r.Events {
		if e.Version == nil || *e.Version != int64(i) {
			t.Errorf("event %d has version %v: versions must be contiguous", i, e.Version)
		}
		seen[string(e.Data)] = true
	}
	if len(seen) != writers*each {
		t.Errorf("%d distinct events, want %d", len(seen), writers*each)
	}
}

func testRecordsScanned(t *testing.T, tg side) {
	target := streamName(t, 0)
	total := 0
	mustAppend(t, tg.URL(), target, firstExpected(tg), registered())
	total++
	for n := 1; n <= 4; n++ {
		mustAppend(t, tg.URL(), streamName(t, n), firstExpected(tg), registered(), added(1), added(2))
		total += 3
		mustAppend(t, tg.URL(), target, "any", added(float64(n)))
		total++
	}
	r, raw := readStream(t, tg.URL(), target, "")
	if len(r.Events) != 5 {
		t.Fatalf("read %d events, want 5", len(r.Events))
	}
	if _, ok := raw["records_scanned"]; !ok {
		t.Fatalf("records_scanned is missing; it must be a number or null: %v", raw)
	}
	if !tg.Features.ServerSideStreamRead && tg.scansAPartition != "" {
		t.Logf("records_scanned checked against one partition, not the store: %s", tg.scansAPartition)
		if r.RecordsScanned == nil || *r.RecordsScanned < int64(len(r.Events)) || *r.RecordsScanned > int64(total) {
			t.Errorf("records_scanned %v: a read that consumes the stream's partition counts at least the stream's %d events and at most the %d records written", r.RecordsScanned, len(r.Events), total)
		}
		return
	}
	if !tg.Features.ServerSideStreamRead {
		if r.RecordsScanned == nil || *r.RecordsScanned < int64(total) {
			t.Errorf("records_scanned %v: an engine that filters by key after consuming the partition must count all %d records it consumed", r.RecordsScanned, total)
		}
		return
	}
	if r.RecordsScanned != nil && *r.RecordsScanned < int64(len(r.Events)) {
		t.Errorf("records_scanned %d is below the %d events returned", *r.RecordsScanned, len(r.Events))
	}
}

// subscription is an open GET /subscribe read by a goroutine.
type subscription struct {
	msgs   chan eventstore.SSEMessage
	done   chan error
	cancel context.CancelFunc
}

func openSubscription(t testing.TB, base, from string) *subscription {
	t.Helper()
	return openSubscriptionAfter(t, base, from, "")
}

// openSubscriptionAfter is openSubscription that also sends lastEventID,
// when not empty, as the Last-Event-ID header.
func openSubscriptionAfter(t testing.TB, base, from, lastEventID string) *subscription {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	u := base + "/subscribe"
	if from != "" {
		u += "?from=" + url.QueryEscape(from)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("GET %s: %v", u, err)
	}
	kittest.CheckStream(t, req, resp)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		t.Fatalf("GET %s: %d %s %s", u, resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	s := &subscription{msgs: make(chan eventstore.SSEMessage, 1024), done: make(chan error, 1), cancel: cancel}
	go func() {
		defer resp.Body.Close()
		r := eventstore.NewSSEReader(resp.Body)
		for {
			m, err := r.Next()
			if err != nil {
				s.done <- err
				close(s.msgs)
				return
			}
			s.msgs <- m
		}
	}()
	t.Cleanup(cancel)
	return s
}

// next returns the next message or fails after the suite timeout.
func (s *subscription) next(t testing.TB) (eventstore.SSEMessage, bool) {
	t.Helper()
	select {
	case m, ok := <-s.msgs:
		return m, ok
	case <-time.After(suiteTimeout):
		t.Fatalf("no subscription message within %v", suiteTimeout)
		return eventstore.SSEMessage{}, false
	}
}

// collect reads until caught-up (n < 0) or until n events of ours arrived,
// returning our events (streams with this test's prefix).
func (s *subscription) collect(t testing.TB, prefix string, n int) []eventstore.RecordedEvent {
	t.Helper()
	var out []eventstore.RecordedEvent
	for n < 0 || len(out) < n {
		m, ok := s.next(t)
		if !ok {
			t.Fatalf("subscription ended after %d of our events", len(out))
		}
		switch m.Event {
		case "caught-up":
			if n < 0 {
				return out
			}
		case "event":
			var e eventstore.RecordedEvent
			decode(t, []byte(m.Data), &e)
			if m.ID != e.Position {
				t.Errorf("SSE id %q differs from the event's position %q", m.ID, e.Position)
			}
			if strings.HasPrefix(e.Stream, prefix) {
				out = append(out, e)
			}
		case "error":
			t.Fatalf("subscription error: %s", m.Data)
		}
	}
	return out
}

func wantEvents(t testing.TB, what string, got []eventstore.RecordedEvent, want []string) {
	t.Helper()
	var g []string
	for _, e := range got {
		g = append(g, string(e.Data))
	}
	var norm []string
	for _, w := range want {
		var v any
		_ = json.Unmarshal([]byte(w), &v)
		b, _ := json.Marshal(v)
		norm = append(norm, string(b))
	}
	for i := range g {
		var v any
		_ = json.Unmarshal([]byte(g[i]), &v)
		b, _ := json.Marshal(v)
		g[i] = string(b)
	}
	if !reflect.DeepEqual(g, norm) {
		t.Errorf("%s: got %v, want %v", what, g, norm)
	}
}

func testSubscribe(t *testing.T, tg side) {
	prefix := runPrefix(t)
	a, b := streamName(t, 1), streamName(t, 2)
	mustAppend(t, tg.URL(), a, firstExpected(tg), ev("OxygenAdded", `{"liters":1}`), ev("OxygenAdded", `{"liters":2}`))
	mustAppend(t, tg.URL(), b, firstExpected(tg), ev("OxygenAdded", `{"liters":3}`))
	sub := openSubscription(t, tg.URL(), "")
	backlog := sub.collect(t, prefix, -1)
	// want checks got against want: in order, or, on a side without a
	// total order, each stream's events in order.
	want := func(what string, got []eventstore.RecordedEvent, want map[string][]string, order []string) {
		t.Helper()
		if tg.noTotalOrder == "" {
			wantEvents(t, what, got, order)
			return
		}
		t.Logf("%s: checked per stream, not across streams: %s", what, tg.noTotalOrder)
		for _, s := range []string{a, b} {
			var mine []eventstore.RecordedEvent
			for _, e := range got {
				if e.Stream == s {
					mine = append(mine, e)
				}
			}
			wantEvents(t, what+" of "+s, mine, want[s])
		}
		if len(got) != len(order) {
			t.Errorf("%s: %d events, want %d", what, len(got), len(order))
		}
	}
	want("catch-up", backlog, map[string][]string{a: {`{"liters":1}`, `{"liters":2}`}, b: {`{"liters":3}`}},
		[]string{`{"liters":1}`, `{"liters":2}`, `{"liters":3}`})
	for i := 1; i < len(backlog) && tg.noTotalOrder == ""; i++ {
		if backlog[i].GlobalPosition <= backlog[i-1].GlobalPosition {
			t.Errorf("catch-up out of global order: %d then %d", backlog[i-1].GlobalPosition, backlog[i].GlobalPosition)
		}
	}
	// Live: the subscriber is already listening when these are written.
	mustAppend(t, tg.URL(), a, "any", ev("OxygenConsumed", `{"liters":4}`))
	mustAppend(t, tg.URL(), b, "any", ev("OxygenConsumed", `{"liters":5}`))
	live := sub.collect(t, prefix, 2)
	liveWant := map[string][]string{a: {`{"liters":4}`}, b: {`{"liters":5}`}}
	want("live", live, liveWant, []string{`{"liters":4}`, `{"liters":5}`})
	sub.cancel()

	// Resume from the third event's position: exactly the two after it.
	if len(backlog) == 3 {
		resumed := openSubscription(t, tg.URL(), backlog[2].Position)
		want("resumed", resumed.collect(t, prefix, -1), liveWant, []string{`{"liters":4}`, `{"liters":5}`})
	}
}

func testRestart(t *testing.T, tg side) {
	prefix := runPrefix(t)
	s := streamName(t, 1)
	mustAppend(t, tg.URL(), s, firstExpected(tg), registered(), added(10))
	sub := openSubscription(t, tg.URL(), "")
	seen := sub.collect(t, prefix, -1)
	if len(seen) != 2 {
		t.Fatalf("catch-up delivered %d events, want 2", len(seen))
	}
	last := seen[1].Position
	tg.Restart(t)
	base := tg.URL()
	// The old service's subscription ended with the shutdown.
	for {
		if _, ok := sub.next(t); !ok {
			break
		}
	}
	if err := <-sub.done; err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Logf("old subscription ended with %v", err)
	}
	mustAppend(t, base, s, "any", consumed(3))
	r, _ := readStream(t, base, s, "")
	if len(r.Events) != 3 {
		t.Fatalf("after restart the stream holds %d events, want 3", len(r.Events))
	}
	resumed := openSubscription(t, base, last)
	wantEvents(t, "resumed after restart", resumed.collect(t, prefix, -1), []string{`{"liters":3}`})

	tg.Crash(t)
	base = tg.URL()
	mustAppend(t, base, s, "any", added(7))
	if r, _ := readStream(t, base, s, ""); len(r.Events) != 4 {
		t.Fatalf("after a crash the stream holds %d events, want 4", len(r.Events))
	}
	resumed = openSubscription(t, base, last)
	wantEvents(t, "resumed after a crash", resumed.collect(t, prefix, -1), []string{`{"liters":3}`, `{"liters":7}`})
}
