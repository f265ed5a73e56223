// Area: reading streams. A read page is bounded in bytes and says where
// the rest begins; records_scanned is honest about what a read cost.

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
