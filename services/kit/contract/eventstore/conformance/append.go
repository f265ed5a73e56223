// Area: appending. Append then read: versions, positions, metadata and
// empty streams; the folded tank state. runAppend, the area's one call,
// also runs the reading tests (read.go).

package conformance

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/eventstore"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// runAppend checks appending to and reading streams: versions,
// positions, the folded state and the records a read scanned.
func runAppend(t *testing.T, newSide func(testing.TB) side) {
	runTests(t, newSide, []test{
		{"AppendThenReadVersionsAndPositions", testAppendRead},
		{"StateFoldsTheTank", testState},
		{"RecordsScannedIsHonest", testRecordsScanned},
		{"ReadPagesAreBoundedInBytes", testReadPagesBounded},
	})
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
