package eventstore_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/eventstore"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
)

// storedEvents is a Backend whose every stream holds the same events; only
// Read is used by GET /streams/{stream}/state.
type storedEvents []eventstore.EventData

func (s storedEvents) Capabilities() eventstore.Capabilities { return eventstore.Capabilities{} }

func (s storedEvents) Append(context.Context, string, eventstore.ExpectedVersion, []eventstore.EventData) (eventstore.AppendResult, error) {
	return eventstore.AppendResult{}, httpapi.ErrUnsupported
}

func (s storedEvents) Read(_ context.Context, stream string, from int64, limit int) (eventstore.ReadResult, error) {
	var res eventstore.ReadResult
	if len(s) > 0 {
		last := int64(len(s)) - 1
		res.LastVersion = &last
	}
	for i := from; i < int64(len(s)) && len(res.Events) < limit; i++ {
		v := i
		res.Events = append(res.Events, eventstore.RecordedEvent{Stream: stream, Version: &v, Type: s[i].Type, Data: s[i].Data})
	}
	return res, nil
}

func (s storedEvents) Subscribe(context.Context, string, eventstore.Subscriber) error {
	return httpapi.ErrUnsupported
}

func getState(t testing.TB, events storedEvents) (int, string) {
	t.Helper()
	r := httpapi.NewRouter(httpapi.RouterOptions{})
	eventstore.Mount(r, events, eventstore.Options{})
	rec := httptest.NewRecorder()
	r.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/streams/tank-1/state", nil))
	return rec.Code, rec.Body.String()
}

func event(typ, data string) eventstore.EventData {
	return eventstore.EventData{Type: typ, Data: json.RawMessage(data)}
}

// TestStateOverflowIsA422 folds events whose sum leaves float64's range
// (two OxygenAdded of 1e308, or one value JSON can hold but float64
// cannot): the state must be refused with a JSON 422 naming the overflow,
// never answered 200 with an empty body.
func TestStateOverflowIsA422(t *testing.T) {
	t.Parallel()
	for name, events := range map[string]storedEvents{
		"sum over +max":     {event("TankRegistered", `{"capacity_liters":1000}`), event("OxygenAdded", `{"liters":1e308}`), event("OxygenAdded", `{"liters":1e308}`)},
		"sum under -max":    {event("OxygenConsumed", `{"liters":1e308}`), event("OxygenConsumed", `{"liters":1.7e308}`)},
		"liters 1e309":      {event("OxygenAdded", `{"liters":1e309}`)},
		"capacity -1e400":   {event("TankRegistered", `{"capacity_liters":-1e400}`)},
		"added then capped": {event("OxygenAdded", `{"liters":1.7976931348623157e308}`), event("OxygenAdded", `{"liters":1e300}`), event("OxygenConsumed", `{"liters":1e308}`)},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			code, body := getState(t, events)
			var out map[string]any
			if err := json.Unmarshal([]byte(body), &out); err != nil {
				t.Fatalf("state answered %d with a body that is not JSON: %q", code, body)
			}
			msg, _ := out["error"].(string)
			if code != http.StatusUnprocessableEntity || !strings.Contains(msg, "overflow") {
				t.Fatalf("state answered %d %s, want 422 naming the overflow", code, body)
			}
		})
	}
}

// TestStateFoldsLargeFiniteValues checks that the overflow check refuses
// only what overflows: large sums that stay finite fold as before.
func TestStateFoldsLargeFiniteValues(t *testing.T) {
	t.Parallel()
	code, body := getState(t, storedEvents{event("OxygenAdded", `{"liters":1e308}`), event("OxygenConsumed", `{"liters":1e308}`), event("OxygenAdded", `{"liters":"ignored"}`), event("OxygenAdded", `{"liters":1.5}`)})
	var st eventstore.State
	if err := json.Unmarshal([]byte(body), &st); err != nil || code != http.StatusOK {
		t.Fatalf("state answered %d %q", code, body)
	}
	if st.BalanceLiters != 1.5 || st.Events != 4 {
		t.Errorf("state %+v, want balance 1.5 after 4 events", st)
	}
}

// TestStateCapIsExact: a stream of exactly MaxStateEvents events folds
// (its last page is full, so the fold reads one more, empty page), and
// one event more is a 422 naming the cap.
func TestStateCapIsExact(t *testing.T) {
	t.Parallel()
	for n, want := range map[int]int{eventstore.MaxStateEvents: http.StatusOK, eventstore.MaxStateEvents + 1: http.StatusUnprocessableEntity} {
		events := make(storedEvents, n)
		for i := range events {
			events[i] = event("OxygenAdded", `{"liters":1}`)
		}
		code, body := getState(t, events)
		if code != want {
			t.Errorf("%d events: state answered %d %.200s, want %d", n, code, body, want)
		}
	}
}
