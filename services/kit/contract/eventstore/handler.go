package eventstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/sse"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/stats"
)

// Limits of the contract.
const (
	// MaxEventsPerAppend caps one append.
	MaxEventsPerAppend = 1000
	// DefaultReadLimit is limit's default on GET /streams/{stream}.
	DefaultReadLimit = 1000
	// MaxReadLimit caps limit.
	MaxReadLimit = 10000
	// MaxStateEvents caps the events GET /streams/{stream}/state folds.
	MaxStateEvents = 100000
)

// Stats names recorded by the shared handlers; services pass them to
// service.New so that /stats lists them from the start.
var (
	LatencyNames = []string{"append", "read", "state"}
	CounterNames = []string{"events_appended", "conflicts", "unsupported", "events_streamed",
		"subscriptions", "subscriptions_ended", "subscribers_dropped"}
)

// DefaultSendTimeout bounds each write to a subscriber when neither
// Options.SendTimeout nor the serving http.Server's WriteTimeout is set.
const DefaultSendTimeout = sse.DefaultSendTimeout

// streamRE: stream ids are plain names; "$" is KurrentDB's system prefix.
var streamRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]{0,199}$`)

// Options configures Mount.
type Options struct {
	// Stats records latencies and counters; nil records nothing.
	Stats *stats.Recorder
	// Stopping ends open subscriptions when shutdown begins (pass
	// service.Stopping()), so that they do not hold the HTTP drain.
	Stopping <-chan struct{}
	// Timeout bounds each backend call of append, read and state; zero
	// means 10 s.
	Timeout time.Duration
	// Heartbeat is the interval of SSE comment lines that keep idle
	// subscriptions open through proxies; zero means 15 s.
	Heartbeat time.Duration
	// SendTimeout bounds each write of a subscription (an event, the
	// caught-up message, a heartbeat): a client that does not take one
	// within it is dropped (counted as subscribers_dropped) and resumes
	// with Last-Event-ID. Zero means the serving http.Server's
	// WriteTimeout (WRITE_TIMEOUT), which a subscription thus applies to
	// each write instead of to its whole response, or DefaultSendTimeout
	// if the server has none.
	SendTimeout time.Duration
}

// Mount registers the contract's routes on r, served by b.
func Mount(r chi.Router, b Backend, o Options) {
	o.Stats, o.Timeout = stats.OrNew(o.Stats), httpapi.CallTimeout(o.Timeout)
	if o.Heartbeat <= 0 {
		o.Heartbeat = 15 * time.Second
	}
	h := &handler{backend: b, o: o}
	r.Get("/openapi.yaml", httpapi.ServeYAML(OpenAPI))
	r.Get("/capabilities", func(w http.ResponseWriter, _ *http.Request) {
		httpapi.WriteJSON(w, http.StatusOK, b.Capabilities())
	})
	r.Method(http.MethodPost, "/streams/{stream}/events", httpapi.HandlerFunc(h.append))
	r.Method(http.MethodGet, "/streams/{stream}", httpapi.HandlerFunc(h.read))
	r.Method(http.MethodGet, "/streams/{stream}/state", httpapi.HandlerFunc(h.state))
	r.Method(http.MethodGet, "/subscribe", httpapi.HandlerFunc(h.subscribe))
}

type handler struct {
	backend Backend
	o       Options
}

func streamParam(r *http.Request) (string, error) {
	s := httpapi.PathParam(r, "stream")
	if !streamRE.MatchString(s) {
		return "", httpapi.BadRequest("stream %q is not a valid stream id: 1-200 characters of A-Z a-z 0-9 _ . : -, starting with a letter or digit", httpapi.Truncate(s, 64))
	}
	return s, nil
}

// ValidateEvents checks an append's events as the handler does; stores
// may rely on it having run.
func ValidateEvents(events []EventData) error {
	if len(events) == 0 {
		return httpapi.BadRequest("events must hold at least one event")
	}
	if len(events) > MaxEventsPerAppend {
		return httpapi.BadRequest("events holds %d events; the limit is %d per append", len(events), MaxEventsPerAppend)
	}
	for i, e := range events {
		if e.Type == "" || utf8.RuneCountInString(e.Type) > 200 {
			return httpapi.BadRequest("events[%d].type is required (1-200 characters)", i)
		}
		if e.Type[0] == '$' {
			return httpapi.BadRequest("events[%d].type must not start with $ (reserved for system events)", i)
		}
		if strings.ContainsRune(e.Type, 0) {
			return httpapi.BadRequest("events[%d].type must not contain U+0000", i)
		}
		if len(e.Data) == 0 || string(e.Data) == "null" {
			return httpapi.BadRequest("events[%d].data is required (any JSON value but null)", i)
		}
		if len(e.Metadata) > 0 && string(e.Metadata) != "null" {
			var m map[string]any
			if err := json.Unmarshal(e.Metadata, &m); err != nil {
				return httpapi.BadRequest("events[%d].metadata must be a JSON object", i)
			}
		}
	}
	return nil
}

func (h *handler) append(w http.ResponseWriter, r *http.Request) error {
	stream, err := streamParam(r)
	if err != nil {
		return err
	}
	var req AppendRequest
	if err := httpapi.DecodeJSON(r, &req); err != nil {
		return err
	}
	if err := ValidateEvents(req.Events); err != nil {
		return err
	}
	for i := range req.Events {
		if len(req.Events[i].Metadata) == 0 || string(req.Events[i].Metadata) == "null" {
			req.Events[i].Metadata = json.RawMessage("{}")
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.o.Timeout)
	defer cancel()
	start := time.Now()
	res, err := h.backend.Append(ctx, stream, req.ExpectedVersion, req.Events)
	if err != nil {
		var wrong *WrongExpectedVersionError
		switch {
		case errors.As(err, &wrong):
			h.o.Stats.Inc("conflicts")
			return &httpapi.Error{Status: http.StatusConflict, Message: wrong.Error(), Cause: err,
				Fields: map[string]any{"actual_version": wrong.Actual, "expected_version": wrong.Expected}}
		case errors.Is(err, httpapi.ErrUnsupported):
			h.o.Stats.Inc("unsupported")
		}
		return err
	}
	h.o.Stats.Since("append", start)
	h.o.Stats.Add("events_appended", int64(len(req.Events)))
	httpapi.WriteJSON(w, http.StatusCreated, res)
	return nil
}

// PositionPattern is the shape of a position every backend reports: an
// offset ("42"), two numbers ("1222459:17"), or a keyed Kafka topic's
// subscription cursor ("8:12:0:7:…", its partition count then one offset
// per partition), each number at most 20 digits, MaxPositionLen bytes in
// all.
const PositionPattern = `^[0-9]{1,20}(:[0-9]{1,20})*$`

// MaxPositionLen bounds a position's length: a cursor of 256 partitions.
const MaxPositionLen = 257*21 - 1

var positionRE = regexp.MustCompile(PositionPattern)

func intParam(r *http.Request, name string, def, lo, hi int64) (int64, error) {
	vs, ok := r.URL.Query()[name]
	if !ok {
		return def, nil
	}
	v := strings.Join(vs, ",") // empty or repeated: not an integer
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, httpapi.BadRequest("query parameter %s must be an integer between %d and %d, got %q", name, lo, hi, httpapi.Truncate(v, 64))
	}
	return n, nil
}

func (h *handler) read(w http.ResponseWriter, r *http.Request) error {
	stream, err := streamParam(r)
	if err != nil {
		return err
	}
	from, err := intParam(r, "from", 0, 0, 1<<62)
	if err != nil {
		return err
	}
	limit, err := intParam(r, "limit", DefaultReadLimit, 1, MaxReadLimit)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.o.Timeout)
	defer cancel()
	start := time.Now()
	res, err := h.backend.Read(ctx, stream, from, int(limit))
	if err != nil {
		return err
	}
	h.o.Stats.Since("read", start)
	if res.Events == nil {
		res.Events = []RecordedEvent{}
	}
	res.Events = cut(res.Events)
	res.Next = nextFrom(res)
	res.Stream = stream
	httpapi.WriteJSON(w, http.StatusOK, res)
	return nil
}

func (h *handler) state(w http.ResponseWriter, r *http.Request) error {
	stream, err := streamParam(r)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.o.Timeout)
	defer cancel()
	start := time.Now()
	st := State{Stream: stream}
	var scanned int64
	measured := true
	for from := int64(0); ; {
		res, err := h.backend.Read(ctx, stream, from, MaxReadLimit)
		if err != nil {
			return err
		}
		if res.RecordsScanned == nil {
			measured = false
		} else {
			scanned += *res.RecordsScanned
		}
		// Refused only once an event past the cap is seen: a stream of
		// exactly MaxStateEvents events folds (its last page is full, so
		// one more, empty read says it ends there).
		if st.Events+len(res.Events) > MaxStateEvents {
			return httpapi.Errorf(http.StatusUnprocessableEntity, "stream %q holds more than %d events; fold it with a snapshot instead", stream, MaxStateEvents)
		}
		for _, e := range res.Events {
			if err := Fold(&st, e); err != nil {
				return err
			}
		}
		next := nextFrom(res)
		if len(res.Events) == 0 || next == nil {
			break
		}
		from = *next
	}
	if measured {
		st.RecordsScanned = &scanned
	}
	h.o.Stats.Since("state", start)
	httpapi.WriteJSON(w, http.StatusOK, st)
	return nil
}

// Fold applies one event to a tank's state: TankRegistered sets the
// capacity, OxygenAdded and OxygenConsumed move the balance by their
// "liters"; other types, and amounts that are not numbers, only advance
// the version. An amount or a sum that leaves float64's range (two
// OxygenAdded of 1e308, or a "liters" of 1e309, which JSON and the
// engines hold but a float64 cannot) is an *httpapi.Error with status
// 422 naming the event: the state has no value to report, and answering
// +Inf would be a lie JSON cannot even carry. st is left as it was
// before the event.
func Fold(st *State, e RecordedEvent) error {
	var body struct {
		Liters         float64 `json:"liters"`
		CapacityLiters float64 `json:"capacity_liters"`
	}
	err := json.Unmarshal(e.Data, &body)
	var typ *json.UnmarshalTypeError
	overflow := errors.As(err, &typ) && strings.HasPrefix(typ.Value, "number") &&
		(typ.Field == "liters" || typ.Field == "capacity_liters")
	next := *st
	next.Events++
	if e.Version != nil {
		v := *e.Version
		next.Version = &v
	}
	switch e.Type {
	case "TankRegistered":
		next.Registered = true
		next.CapacityLiters = body.CapacityLiters
		overflow = overflow && typ.Field == "capacity_liters"
	case "OxygenAdded":
		next.BalanceLiters += body.Liters
		overflow = overflow && typ.Field == "liters"
	case "OxygenConsumed":
		next.BalanceLiters -= body.Liters
		overflow = overflow && typ.Field == "liters"
	default:
		overflow = false
	}
	if overflow || math.IsInf(next.BalanceLiters, 0) || math.IsNaN(next.BalanceLiters) {
		at := fmt.Sprintf("event %d", next.Events-1)
		if e.Version != nil {
			at = fmt.Sprintf("version %d", *e.Version)
		}
		return &httpapi.Error{Status: http.StatusUnprocessableEntity,
			Message: fmt.Sprintf("stream %q has no state to report: its %s event at %s would overflow the state (a float64 reaches at most %g liters); the events are stored, but this stream cannot be folded", e.Stream, e.Type, at, math.MaxFloat64),
			Fields:  map[string]any{"events_folded": st.Events}}
	}
	*st = next
	return nil
}

// subscribeFrom is the position a subscription starts after:
// Last-Event-ID wins over ?from=, since an EventSource reconnects to the
// same URL (its original ?from=) with the last id it received. The shape
// is the contract's (PositionPattern, 400), checked for both even when
// one wins; whether a well-formed position is one of this backend's is
// the store's answer (404: kafka-eventstore's offsets are not
// no-kurrentdb's <xid>:<global_pos>).
func subscribeFrom(r *http.Request) (string, error) {
	query, header := r.URL.Query().Get("from"), r.Header.Get("Last-Event-ID")
	for name, v := range map[string]string{"from": query, "Last-Event-ID": header} {
		if v != "" && (len(v) > MaxPositionLen || !positionRE.MatchString(v)) {
			return "", httpapi.BadRequest("%s %q is not a position: want digits, or digits:digits (or more numbers joined by colons), as events and appends report it", name, httpapi.Truncate(v, 64))
		}
	}
	if header != "" {
		return header, nil
	}
	return query, nil
}

func (h *handler) subscribe(w http.ResponseWriter, r *http.Request) error {
	from, err := subscribeFrom(r)
	if err != nil {
		return err
	}
	ctx, sw, end := sse.Open(w, r, h.o.Stopping, h.o.SendTimeout, h.o.Heartbeat)
	h.o.Stats.Inc("subscriptions")
	// Counted once the heartbeat has stopped and Subscribe has returned:
	// subscriptions - subscriptions_ended is what is still held.
	defer func() { end(); h.o.Stats.Inc("subscriptions_ended") }()
	last := from
	err = h.backend.Subscribe(ctx, from, Subscriber{
		Event: func(e RecordedEvent) error {
			last = e.Position
			h.o.Stats.Inc("events_streamed")
			return sw.Send("event", e.Position, e)
		},
		CaughtUp: func() error {
			return sw.Send("caught-up", "", map[string]string{"position": last})
		},
	})
	dropped, err := sw.Finish(ctx, r, err, sse.Ending{What: "subscription", Last: last,
		ErrorData: map[string]string{"error": "subscription failed; resume from the last event id"}})
	if dropped {
		h.o.Stats.Inc("subscribers_dropped")
	}
	return err
}
