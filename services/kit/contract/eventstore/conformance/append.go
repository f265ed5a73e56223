package conformance

import (
	"encoding/json"
	"net/http"
	"strconv"
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

// testReadPagesBounded appends 9 events of 576 KiB, 64 KiB of them "<" (each its own
// append, within BODY_LIMIT and Kafka's default max.message.bytes) and
// reads them with a limit they are under: every answer holds at most
// eventstore.MaxReadBytes of events (plus its envelope; "<" must not come
// back as six-byte escapes), the first page stops early with a next, and
// following next reads every event once, in order, as sent.
func testReadPagesBounded(t *testing.T, tg side) {
	s := streamName(t, 1)
	const n = 9
	// Sent as raw bytes: an encoder would escape the "<" itself. An
	// answer that escaped them would pass the bound.
	pad := strings.Repeat("x", 512<<10) + strings.Repeat("<", 64<<10)
	for i := range n {
		body := `{"events":[{"type":"OxygenAdded","data":{"liters":` + strconv.Itoa(i) + `,"pad":"` + pad + `"}}]}`
		if status, b := kittest.Do(t, http.MethodPost, tg.URL()+"/streams/"+s+"/events", body, nil); status != http.StatusCreated {
			t.Fatalf("append %d to %s: %d %.200s", i, s, status, b)
		}
	}
	if page, _ := readStream(t, tg.URL(), s, "?limit=1"); len(page.Events) != 1 || page.Next == nil || *page.Next != 1 {
		t.Errorf("read with limit=1: %d events, next %v; want 1 event and next 1", len(page.Events), page.Next)
	}
	if page, _ := readStream(t, tg.URL(), s, "?from="+strconv.Itoa(n-1)); len(page.Events) != 1 || page.Next != nil {
		t.Errorf("read of the last event: %d events, next %v; want 1 event and next null", len(page.Events), page.Next)
	}
	var got []eventstore.RecordedEvent
	pages := 0
	for from := int64(0); ; pages++ {
		if pages > n {
			t.Fatalf("%d pages for %d events: next does not move on", pages, n)
		}
		status, b := kittest.Do(t, http.MethodGet, tg.URL()+"/streams/"+s+"?limit=100&from="+strconv.FormatInt(from, 10), nil, nil)
		if status != http.StatusOK {
			t.Fatalf("read %s from %d: %d %.200s", s, from, status, b)
		}
		if len(b) > eventstore.MaxReadBytes+512 {
			t.Fatalf("read %s from %d answered %d bytes, past MaxReadBytes (%d) and its envelope", s, from, len(b), eventstore.MaxReadBytes)
		}
		var page eventstore.ReadResult
		decode(t, b, &page)
		if len(page.Events) == 0 {
			t.Fatalf("read %s from %d: no events, next %v", s, from, page.Next)
		}
		got = append(got, page.Events...)
		if page.Next == nil {
			break
		}
		if len(page.Events) >= n || *page.Next != from+int64(len(page.Events)) {
			t.Fatalf("read %s from %d: %d events, next %d", s, from, len(page.Events), *page.Next)
		}
		from = *page.Next
	}
	if pages == 0 {
		t.Fatalf("%d events of 512 KiB came back in one page: the page passed MaxReadBytes (%d)", n, eventstore.MaxReadBytes)
	}
	if len(got) != n {
		t.Fatalf("the pages held %d events, want %d", len(got), n)
	}
	for i, e := range got {
		want := json.RawMessage(`{"liters":` + strconv.Itoa(i) + `,"pad":"` + pad + `"}`)
		if !jsonEqual(e.Data, want) {
			t.Fatalf("event %d of the pages is not the one appended %d-th (%.80s...)", i, i, e.Data)
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
