package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/eventstore"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// appendKind is the 503 kind a POST answering err would carry.
func appendKind(err error) httpapi.Kind {
	return httpapi.KindOf(httptest.NewRequest(http.MethodPost, "/streams/s/events", nil), err)
}

// TestFailedAppendsSayNothingWasRecorded: an append that fails before
// its INSERT is sent (its context already past its deadline, so no
// connection is taken) is a 503 of kind not_recorded, and nothing is in
// the stream; the classification of the other failures is checked on
// the errors themselves.
func TestFailedAppendsSayNothingWasRecorded(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Postgres")
	}
	url := kittest.PostgresURL(t)
	r := start(t, kittest.Schema(t, url), time.Second)
	s := r.App()
	events := []eventstore.EventData{{Type: "OxygenAdded", Data: json.RawMessage(`{"liters":1}`), Metadata: json.RawMessage(`{}`)}}

	past, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	_, err := s.Append(past, "kinds-1", eventstore.Any(), events)
	if httpapi.StatusOf(err) != http.StatusServiceUnavailable {
		t.Fatalf("append with an expired context: %v (status %d), want a 503", err, httpapi.StatusOf(err))
	}
	if k := appendKind(err); k != httpapi.KindNotRecorded {
		t.Errorf("append with an expired context is of kind %q, want %q: %v", k, httpapi.KindNotRecorded, err)
	}
	res, err := s.Read(context.Background(), "kinds-1", 0, 10)
	if err != nil || len(res.Events) != 0 {
		t.Fatalf("the refused append left %d events (err %v), want none", len(res.Events), err)
	}

	// A condition that fails is a conflict (409), never a 503 of any kind.
	var wrong *eventstore.WrongExpectedVersionError
	if _, err := s.Append(context.Background(), "kinds-1", eventstore.Exactly(3), events); !errors.As(err, &wrong) {
		t.Errorf("append expecting version 3 of an empty stream: %v, want a wrong expected version", err)
	}

	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"no connection", errNoConnection{context.DeadlineExceeded}, true},
		{"Postgres refused the statement", &pgconn.PgError{Severity: "ERROR", SeverityUnlocalized: "ERROR", Code: "40001"}, true},
		{"the server ended the session", &pgconn.PgError{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: "57P01"}, false},
		{"connection lost mid-statement", errors.New("unexpected EOF"), false},
		{"deadline while the statement ran", context.DeadlineExceeded, false},
	} {
		if got := appendNotSent(c.err); got != c.want {
			t.Errorf("%s: appendNotSent = %v, want %v", c.name, got, c.want)
		}
	}
	// A 503 whose outcome is unknown stays "unknown".
	if k := appendKind(notRecorded(errors.New("not a 503"))); k != "" {
		t.Errorf("notRecorded turned a non-503 into kind %q", k)
	}
}
