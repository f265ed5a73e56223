package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/kurrent-io/KurrentDB-Client-Go/kurrentdb"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/eventstore"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
)

// store is the KurrentDB eventstore.Backend. It is safe for concurrent use
// (the client multiplexes gRPC calls); the service closes the client on
// stop.
type store struct {
	client *kurrentdb.Client
	cfg    Config
	logger *slog.Logger
}

// Capabilities implements eventstore.Backend.
func (s *store) Capabilities() eventstore.Capabilities {
	return eventstore.Capabilities{ConditionalAppend: true, ServerSideStreamRead: true, PushSubscription: true}
}

func (s *store) ping(ctx context.Context) error {
	rs, err := s.client.ReadAll(ctx, kurrentdb.ReadAllOptions{Direction: kurrentdb.Backwards, From: kurrentdb.End{}}, 1)
	if err != nil {
		return err
	}
	defer rs.Close()
	if _, err := rs.Recv(); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

func isCode(err error, code kurrentdb.ErrorCode) bool {
	var kerr *kurrentdb.Error
	return errors.As(err, &kerr) && kerr.IsErrorCode(code)
}

// unavailableMessage is the answer (503) to a request KurrentDB did not
// serve: it names the server and the variable that points to it, not the
// driver's error (hosts, ports), which is logged.
const unavailableMessage = "KurrentDB unavailable or too slow (check KURRENTDB_URL and that the server runs); retry later"

// unavailable is the error of a failed KurrentDB call op: a 503 naming
// KurrentDB and KURRENTDB_URL, whose text (logged) keeps the driver's
// error. A request the client cancelled stays context.Canceled.
func unavailable(op string, err error) error {
	if errors.Is(err, context.Canceled) {
		return fmt.Errorf("kurrentdb %s: %w (%w)", op, httpapi.ErrUnavailable, err)
	}
	return fmt.Errorf("kurrentdb %s: %w (%w: %w)", op, &httpapi.Error{Status: http.StatusServiceUnavailable, Message: unavailableMessage}, httpapi.ErrUnavailable, err)
}

// Append implements eventstore.Backend: the expected version travels to the
// server as the append's StreamState, which checks it atomically.
func (s *store) Append(ctx context.Context, stream string, expected eventstore.ExpectedVersion, events []eventstore.EventData) (eventstore.AppendResult, error) {
	var state kurrentdb.StreamState = kurrentdb.Any{}
	if v, ok := expected.Version(); ok {
		state = kurrentdb.StreamRevision{Value: uint64(v)}
	} else if expected.IsNoStream() {
		state = kurrentdb.NoStream{}
	}
	evs := make([]kurrentdb.EventData, len(events))
	for i, e := range events {
		evs[i] = kurrentdb.EventData{EventID: uuid.New(), EventType: e.Type, ContentType: kurrentdb.ContentTypeJson, Data: e.Data, Metadata: e.Metadata}
	}
	wr, err := s.client.AppendToStream(ctx, stream, kurrentdb.AppendToStreamOptions{StreamState: state}, evs...)
	if err != nil {
		if isCode(err, kurrentdb.ErrorCodeWrongExpectedVersion) {
			// The client's error carries the actual revision only as text:
			// read it back.
			actual, rerr := s.lastVersion(ctx, stream)
			if rerr != nil {
				return eventstore.AppendResult{}, rerr
			}
			return eventstore.AppendResult{}, &eventstore.WrongExpectedVersionError{Stream: stream, Expected: expected, Actual: actual}
		}
		return eventstore.AppendResult{}, unavailable("append", err)
	}
	last := int64(wr.NextExpectedVersion)
	first := last - int64(len(events)) + 1
	return eventstore.AppendResult{
		FirstVersion: &first, LastVersion: &last,
		Position:       position(kurrentdb.Position{Commit: wr.CommitPosition, Prepare: wr.PreparePosition}),
		GlobalPosition: int64(wr.CommitPosition),
	}, nil
}

// lastVersion reads the stream's last event backwards; -1 if none.
func (s *store) lastVersion(ctx context.Context, stream string) (int64, error) {
	rs, err := s.client.ReadStream(ctx, stream, kurrentdb.ReadStreamOptions{Direction: kurrentdb.Backwards, From: kurrentdb.End{}}, 1)
	if err != nil {
		if isCode(err, kurrentdb.ErrorCodeResourceNotFound) {
			return -1, nil
		}
		return 0, unavailable("read", err)
	}
	defer rs.Close()
	e, err := rs.Recv()
	switch {
	case errors.Is(err, io.EOF), isCode(err, kurrentdb.ErrorCodeResourceNotFound):
		return -1, nil
	case err != nil:
		return 0, unavailable("read", err)
	}
	return int64(e.OriginalEvent().EventNumber), nil
}

func position(p kurrentdb.Position) string {
	return strconv.FormatUint(p.Commit, 10) + ":" + strconv.FormatUint(p.Prepare, 10)
}

func parsePosition(s string) (kurrentdb.Position, error) {
	c, p, ok := strings.Cut(s, ":")
	commit, err1 := strconv.ParseUint(c, 10, 64)
	prepare, err2 := strconv.ParseUint(p, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		return kurrentdb.Position{}, fmt.Errorf("from %q is not a position of this service (want <commit>:<prepare>, as events and appends report it): %w", s, httpapi.ErrNotFound)
	}
	return kurrentdb.Position{Commit: commit, Prepare: prepare}, nil
}

func recorded(r *kurrentdb.RecordedEvent) eventstore.RecordedEvent {
	v := int64(r.EventNumber)
	meta := r.UserMetadata
	if len(meta) == 0 {
		meta = []byte("{}")
	}
	return eventstore.RecordedEvent{
		Stream: r.StreamID, Version: &v, Position: position(r.Position), GlobalPosition: int64(r.Position.Commit),
		Type: r.EventType, Data: r.Data, Metadata: meta, CreatedAt: r.CreatedDate.UTC(),
	}
}

// Read implements eventstore.Backend through the server's stream index.
// records_scanned is null: the server does not report what it read.
func (s *store) Read(ctx context.Context, stream string, from int64, limit int) (eventstore.ReadResult, error) {
	res := eventstore.ReadResult{Stream: stream, Events: []eventstore.RecordedEvent{}}
	last, err := s.lastVersion(ctx, stream)
	if err != nil {
		return res, err
	}
	if last < 0 {
		return res, nil
	}
	res.LastVersion = &last
	if from > last {
		return res, nil
	}
	rs, err := s.client.ReadStream(ctx, stream, kurrentdb.ReadStreamOptions{Direction: kurrentdb.Forwards, From: kurrentdb.Revision(uint64(from))}, uint64(limit))
	if err != nil {
		return res, unavailable("read", err)
	}
	defer rs.Close()
	page := eventstore.Page{Max: eventstore.MaxReadBytes}
	for {
		e, err := rs.Recv()
		if errors.Is(err, io.EOF) {
			return res, nil
		}
		if err != nil {
			return res, unavailable("read", err)
		}
		re := recorded(e.OriginalEvent())
		if !page.Fits(re) {
			return res, nil
		}
		res.Events = append(res.Events, re)
	}
}

func system(r *kurrentdb.RecordedEvent) bool {
	return strings.HasPrefix(r.EventType, "$") || strings.HasPrefix(r.StreamID, "$")
}

func after(a, b kurrentdb.Position) bool {
	return a.Commit > b.Commit || a.Commit == b.Commit && a.Prepare > b.Prepare
}

// Subscribe implements eventstore.Backend: read $all forwards in pages from
// the position (catch-up), report caught-up, then subscribe to $all from
// the last position read, system events filtered out.
func (s *store) Subscribe(ctx context.Context, from string, sub eventstore.Subscriber) error {
	var cur kurrentdb.Position
	started := from != ""
	if started {
		p, err := parsePosition(from)
		if err != nil {
			return err
		}
		cur = p
	}
	for {
		n, err := s.catchUpPage(ctx, &cur, &started, sub)
		if err != nil {
			return err
		}
		if n < s.cfg.PageSize {
			break
		}
	}
	if err := sub.CaughtUp(); err != nil {
		return err
	}
	var fromPos kurrentdb.AllPosition = kurrentdb.Start{}
	if started {
		fromPos = cur
	}
	live, err := s.client.SubscribeToAll(ctx, kurrentdb.SubscribeToAllOptions{From: fromPos, Filter: kurrentdb.ExcludeSystemEventsFilter()})
	if err != nil {
		return unavailable("subscribe", err)
	}
	defer live.Close()
	for {
		m := live.Recv()
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case m.SubscriptionDropped != nil:
			return unavailable("subscription dropped", m.SubscriptionDropped.Error)
		case m.EventAppeared != nil:
			r := m.EventAppeared.OriginalEvent()
			if system(r) || (started && !after(r.Position, cur)) {
				continue
			}
			cur, started = r.Position, true
			if err := sub.Event(recorded(r)); err != nil {
				return err
			}
		}
	}
}

// catchUpPage reads one page of $all after *cur and delivers its
// non-system events; it returns how many records the page held.
func (s *store) catchUpPage(ctx context.Context, cur *kurrentdb.Position, started *bool, sub eventstore.Subscriber) (int, error) {
	rctx, cancel := context.WithTimeout(ctx, s.cfg.BackendTimeout)
	defer cancel()
	var fromPos kurrentdb.AllPosition = kurrentdb.Start{}
	if *started {
		fromPos = *cur
	}
	rs, err := s.client.ReadAll(rctx, kurrentdb.ReadAllOptions{Direction: kurrentdb.Forwards, From: fromPos}, uint64(s.cfg.PageSize))
	if err != nil {
		return 0, unavailable("read $all", err)
	}
	defer rs.Close()
	n := 0
	var batch []eventstore.RecordedEvent
	for {
		e, err := rs.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, unavailable("read $all", err)
		}
		n++
		r := e.OriginalEvent()
		// Reading from a position includes the event at it: skip it.
		if *started && !after(r.Position, *cur) {
			continue
		}
		*cur, *started = r.Position, true
		if !system(r) {
			batch = append(batch, recorded(r))
		}
	}
	cancel()
	for _, e := range batch {
		if err := sub.Event(e); err != nil {
			return 0, err
		}
	}
	return n, nil
}

var _ eventstore.Backend = (*store)(nil)
