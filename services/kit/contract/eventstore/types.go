package eventstore

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
	"strconv"
	"time"
)

// ExpectedVersion is the optimistic-concurrency condition of an append:
// "any" (no condition), "no_stream" (the stream must have no events) or a
// concrete version (the stream's last event must have that version). Its
// zero value is "any".
type ExpectedVersion struct {
	kind    expectedKind
	version int64
}

type expectedKind int

const (
	expectAny expectedKind = iota
	expectNoStream
	expectExact
)

// Any returns the "any" condition.
func Any() ExpectedVersion { return ExpectedVersion{} }

// NoStream returns the "no_stream" condition.
func NoStream() ExpectedVersion { return ExpectedVersion{kind: expectNoStream} }

// Exactly returns the condition "the stream's last version is v" (v >= 0).
func Exactly(v int64) ExpectedVersion { return ExpectedVersion{kind: expectExact, version: v} }

// IsAny reports whether e is "any".
func (e ExpectedVersion) IsAny() bool { return e.kind == expectAny }

// IsNoStream reports whether e is "no_stream".
func (e ExpectedVersion) IsNoStream() bool { return e.kind == expectNoStream }

// Version returns the concrete expected version and true, or false for
// "any" and "no_stream".
func (e ExpectedVersion) Version() (int64, bool) { return e.version, e.kind == expectExact }

// Check reports whether a stream whose last version is actual (-1: no
// events) satisfies e.
func (e ExpectedVersion) Check(actual int64) bool {
	switch e.kind {
	case expectNoStream:
		return actual < 0
	case expectExact:
		return actual == e.version
	default:
		return true
	}
}

// String returns the JSON spelling without quotes.
func (e ExpectedVersion) String() string {
	switch e.kind {
	case expectNoStream:
		return "no_stream"
	case expectExact:
		return strconv.FormatInt(e.version, 10)
	default:
		return "any"
	}
}

// MarshalJSON encodes a number, "any" or "no_stream".
func (e ExpectedVersion) MarshalJSON() ([]byte, error) {
	if e.kind == expectExact {
		return []byte(strconv.FormatInt(e.version, 10)), nil
	}
	return json.Marshal(e.String())
}

// UnmarshalJSON accepts a non-negative integer, "any" or "no_stream".
func (e *ExpectedVersion) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		switch s {
		case "any":
			*e = Any()
		case "no_stream":
			*e = NoStream()
		default:
			return fmt.Errorf(`expected_version must be a non-negative integer, "any" or "no_stream", got %q`, s)
		}
		return nil
	}
	// 3.0 is the integer 3 to the document's "type: integer".
	v, ok := httpapi.IntegralNumber(string(b))
	if !ok || v < 0 {
		return fmt.Errorf(`expected_version must be a non-negative integer, "any" or "no_stream", got %s`, b)
	}
	*e = Exactly(v)
	return nil
}

// EventData is one event to append.
type EventData struct {
	// Type names the event (TankRegistered, OxygenAdded, ...); required.
	Type string `json:"type"`
	// Data is the event's JSON body; required.
	Data json.RawMessage `json:"data"`
	// Metadata is optional JSON (correlation ids and the like); "{}" when
	// absent.
	Metadata json.RawMessage `json:"metadata,omitempty"`
}

// AppendRequest is the body of POST /streams/{stream}/events.
type AppendRequest struct {
	// ExpectedVersion is the condition; "any" when absent.
	ExpectedVersion ExpectedVersion `json:"expected_version"`
	// Events are appended atomically, in order (1 to MaxEventsPerAppend).
	Events []EventData `json:"events"`
}

// AppendResult is the 201 body of an append.
type AppendResult struct {
	// FirstVersion and LastVersion are the stream versions the events got;
	// null where the engine assigns none (Kafka: versions exist only as the
	// count a reader derives while scanning the partition).
	FirstVersion *int64 `json:"first_version"`
	LastVersion  *int64 `json:"last_version"`
	// Position is the last event's global position, an opaque token that
	// GET /subscribe?from= accepts.
	Position string `json:"position"`
	// GlobalPosition is the last event's global order number (Postgres
	// global_pos, Kafka offset, KurrentDB commit position).
	GlobalPosition int64 `json:"global_position"`
}

// RecordedEvent is one stored event as reads and subscriptions return it.
type RecordedEvent struct {
	// Stream is the stream id.
	Stream string `json:"stream"`
	// Version is the event's version in its stream; null in a Kafka
	// subscription (a resumed reader cannot know how many earlier records
	// of the stream precede it without scanning from the start).
	Version *int64 `json:"version"`
	// Position is the opaque resume token (see AppendResult.Position).
	Position string `json:"position"`
	// GlobalPosition is the global order number.
	GlobalPosition int64 `json:"global_position"`
	// Type, Data and Metadata are as appended.
	Type     string          `json:"type"`
	Data     json.RawMessage `json:"data"`
	Metadata json.RawMessage `json:"metadata"`
	// CreatedAt is when the engine stored the event.
	CreatedAt time.Time `json:"created_at"`
}

// ReadResult is the body of GET /streams/{stream}.
type ReadResult struct {
	// Stream is the stream id.
	Stream string `json:"stream"`
	// Events are the stream's events with version >= from, at most limit
	// and at most MaxReadBytes of them (Page), in version order. A stream
	// without events reads as empty.
	Events []RecordedEvent `json:"events"`
	// LastVersion is the stream's last version, or null if it has none.
	LastVersion *int64 `json:"last_version"`
	// Next is the from of the following page: the version after the last
	// event of Events when the stream holds more (the page reached limit,
	// or MaxReadBytes cut it), null when Events reach the stream's last
	// event (or are empty). Set by the handler.
	Next *int64 `json:"next"`
	// RecordsScanned is how many records the engine read to answer: Kafka
	// counts every record it consumed before filtering by key; null where
	// the engine cannot measure it per request (Postgres, KurrentDB).
	RecordsScanned *int64 `json:"records_scanned"`
}

// State is the body of GET /streams/{stream}/state: an oxygen tank folded
// from its events.
type State struct {
	// Stream is the stream id.
	Stream string `json:"stream"`
	// Version is the last version folded, null for an empty stream.
	Version *int64 `json:"version"`
	// Events is how many events were folded.
	Events int `json:"events"`
	// Registered is true once a TankRegistered event was seen.
	Registered bool `json:"registered"`
	// CapacityLiters comes from TankRegistered.
	CapacityLiters float64 `json:"capacity_liters"`
	// BalanceLiters is the sum of OxygenAdded minus OxygenConsumed.
	BalanceLiters float64 `json:"balance_liters"`
	// RecordsScanned sums the reads' records_scanned; null if any was null.
	RecordsScanned *int64 `json:"records_scanned"`
}

// Capabilities is the body of GET /capabilities.
type Capabilities struct {
	// ConditionalAppend: the engine refuses an append whose expected
	// version does not match, atomically (Kafka: false).
	ConditionalAppend bool `json:"conditional_append"`
	// ServerSideStreamRead: the engine reads one stream without the client
	// consuming other streams' records (Kafka: false, it filters by key
	// after consuming the partition).
	ServerSideStreamRead bool `json:"server_side_stream_read"`
	// PushSubscription: the engine tells the service about new events
	// (KurrentDB's subscription, Postgres NOTIFY) instead of the service
	// polling for them (Kafka's long-poll fetch).
	PushSubscription bool `json:"push_subscription"`
}

// WrongExpectedVersionError is the error a Backend returns when an append's
// condition fails; the handler answers 409 with actual_version.
type WrongExpectedVersionError struct {
	// Stream is the stream id.
	Stream string
	// Expected is the condition that failed.
	Expected ExpectedVersion
	// Actual is the stream's last version (-1: the stream has no events).
	Actual int64
}

// Error implements error.
func (e *WrongExpectedVersionError) Error() string {
	return fmt.Sprintf("wrong expected version for stream %q: expected %s, actual %d", e.Stream, e.Expected, e.Actual)
}

// Subscriber receives a subscription's messages; both funcs are called
// from the Subscribe goroutine, never concurrently. An error returned by
// either ends the subscription with that error.
type Subscriber struct {
	// Event receives each event after the start position, in global order.
	Event func(RecordedEvent) error
	// CaughtUp is called once, when the catch-up read has delivered every
	// event that existed when the subscription started; live events
	// follow.
	CaughtUp func() error
}

// DefaultPageSize is SUBSCRIBE_PAGE_SIZE's default in the services that
// read it (events per catch-up read); MaxPageSize its largest accepted
// value.
const DefaultPageSize, MaxPageSize = 500, 10000
