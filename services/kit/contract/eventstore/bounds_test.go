package eventstore_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/eventstore"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
)

// TestReadPageIsCutByBytes: a backend that returns more than
// MaxReadBytes of events (this fake ignores the bound) still gets an
// answer within the bound, with a next that resumes where it stopped;
// the state folds every event across such pages.
func TestReadPageIsCutByBytes(t *testing.T) {
	t.Parallel()
	big := `{"liters":1,"pad":"` + strings.Repeat("<", 1<<20) + `"}`
	var events storedEvents
	for range 10 {
		events = append(events, event("OxygenAdded", big))
	}
	r := httpapi.NewRouter(httpapi.RouterOptions{})
	eventstore.Mount(r, events, eventstore.Options{})
	var seen int64
	for from := int64(0); ; {
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/streams/tank-1?limit=100&from="+strconv.FormatInt(from, 10), nil))
		if rec.Code != http.StatusOK {
			t.Fatalf("read from %d: %d %s", from, rec.Code, rec.Body.String())
		}
		// "<" is written as itself, not as a 6-byte escape.
		if rec.Body.Len() > eventstore.MaxReadBytes {
			t.Fatalf("read from %d answered %d bytes, past MaxReadBytes %d", from, rec.Body.Len(), eventstore.MaxReadBytes)
		}
		var page eventstore.ReadResult
		if err := json.Unmarshal(rec.Body.Bytes(), &page); err != nil {
			t.Fatal(err)
		}
		if len(page.Events) == 0 || len(page.Events) >= 4 {
			t.Fatalf("read from %d holds %d events of 1 MiB, want 1 to 3", from, len(page.Events))
		}
		seen += int64(len(page.Events))
		if page.Next == nil {
			break
		}
		if *page.Next != seen {
			t.Fatalf("next is %d after %d events", *page.Next, seen)
		}
		from = *page.Next
	}
	if seen != int64(len(events)) {
		t.Fatalf("the pages held %d events, want %d", seen, len(events))
	}
	code, body := getState(t, events)
	if code != http.StatusOK || !strings.Contains(body, `"balance_liters":10`) {
		t.Fatalf("state across cut pages: %d %s", code, body)
	}
}

// TestPageAlwaysTakesItsFirstEvent: an event larger than the bound is a
// page of its own, never a reader stalled before it.
func TestPageAlwaysTakesItsFirstEvent(t *testing.T) {
	t.Parallel()
	p := eventstore.Page{Max: 10}
	e := eventstore.RecordedEvent{Data: json.RawMessage(`"` + strings.Repeat("x", 100) + `"`)}
	if !p.Fits(e) {
		t.Fatal("the first event did not fit")
	}
	if p.Fits(e) {
		t.Fatal("a second event past the bound fit")
	}
	if p.Bytes() != eventstore.EventSize(e) {
		t.Fatalf("Bytes = %d, want %d", p.Bytes(), eventstore.EventSize(e))
	}
}
