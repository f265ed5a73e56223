package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/eventstore"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// appendKind is the 503 kind a POST answering err would carry.
func appendKind(err error) httpapi.Kind {
	return httpapi.KindOf(httptest.NewRequest(http.MethodPost, "/streams/s/events", nil), err)
}

// TestFailedAppendsSayNothingWasRecorded: an append whose produce never
// left the service (the broker's port refuses connections; the request's
// time ran out before the produce) is a 503 of kind not_recorded, and
// the topic holds nothing; the errors a broker gives before it appends
// are not_recorded too, a timeout stays unknown.
func TestFailedAppendsSayNothingWasRecorded(t *testing.T) {
	t.Parallel()
	ctx := kittest.Context(t, time.Minute)
	cfg := testConfig(t)
	s, err := openStore(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.close)
	events := []eventstore.EventData{{Type: "OxygenAdded", Data: json.RawMessage(`{"liters":1}`), Metadata: json.RawMessage(`{}`)}}
	check := func(what string, err error) {
		t.Helper()
		if httpapi.StatusOf(err) != http.StatusServiceUnavailable {
			t.Fatalf("%s: %v (status %d), want a 503", what, err, httpapi.StatusOf(err))
		}
		if k := appendKind(err); k != httpapi.KindNotRecorded {
			t.Errorf("%s is of kind %q, want %q: %v", what, k, httpapi.KindNotRecorded, err)
		}
	}

	past, cancel := context.WithDeadline(ctx, time.Now().Add(-time.Second))
	defer cancel()
	_, err = s.Append(past, "kinds-1", eventstore.Any(), events)
	check("append with an expired context", err)

	// A client of a port where nothing listens: the dial is refused.
	live := s.client
	s.client = &kafka.Client{Addr: kafka.TCP(kittest.ClosedAddr(t)), Timeout: 5 * time.Second, Transport: &kafka.Transport{}}
	_, err = s.Append(ctx, "kinds-1", eventstore.Any(), events)
	check("append to a refused broker port", err)
	s.client = live

	res, err := s.Read(ctx, "kinds-1", 0, 10)
	if err != nil || len(res.Events) != 0 {
		t.Fatalf("the refused appends left %d events (err %v), want none", len(res.Events), err)
	}

	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"no broker known for the topic", fmt.Errorf("produce: %w", protocol.ErrNoTopic), true},
		{"not the leader", fmt.Errorf("produce: %w", kafka.NotLeaderForPartition), true},
		{"too few in-sync replicas", kafka.NotEnoughReplicas, true},
		{"too few in-sync replicas after the append", kafka.NotEnoughReplicasAfterAppend, false},
		{"request timed out", kafka.RequestTimedOut, false},
		{"deadline while waiting for the answer", context.DeadlineExceeded, false},
		{"connection lost", errors.New("read tcp: connection reset by peer"), false},
	} {
		if got := produceNotSent(c.err); got != c.want {
			t.Errorf("%s: produceNotSent = %v, want %v", c.name, got, c.want)
		}
	}
}
