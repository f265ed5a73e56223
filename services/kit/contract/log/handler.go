package log

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/ids"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/stats"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/waiter"
)

// Options configures Mount. Fill Records, Hub and Stats.
type Options struct {
	// Records reads events and their deliveries: the services' *Records
	// on Postgres, or another EventReader (the memory package's).
	Records EventReader
	// Hub wakes wait requests; the consumer's Deliverer notifies it.
	Hub *waiter.Hub
	// Stats receives the write histogram and the written counter.
	Stats *stats.Recorder
	// Stopping, when closed, makes waits answer at once (503) instead of
	// holding the HTTP drain.
	Stopping <-chan struct{}
	// Timeout bounds each backend call (default 10s).
	Timeout time.Duration
}

// EventReader reads one event with its delivery, as GET /events/{id}
// and its wait answer it; an unknown id is an error wrapping
// httpapi.ErrNotFound. *Records is the one both services use.
type EventReader interface {
	Get(ctx context.Context, id string) (Event, error)
}

// DeliveredReader is what an EventReader may add so that the long polls
// of GET /events/{id}/wait share their re-reads: Delivered returns, in
// one call, those of ids the consumer has delivered. With it, a
// service's waiters make one query per interval between them
// (waiter.Rereader); without it, each re-reads its own event. *Records
// implements it.
type DeliveredReader interface {
	Delivered(ctx context.Context, ids []string) ([]string, error)
}

// handler serves the routes Mount adds.
type handler struct {
	backend Backend
	o       Options
	// shared is the one re-read of every wait, when Records is a
	// DeliveredReader; nil: each wait re-reads its own event.
	shared *waiter.Rereader
}

// MaxWait caps GET /events/{id}/wait's timeout.
const MaxWait = time.Minute

// Mount adds the contract's routes to r, served by b and o.Records. Both
// services call it, so their HTTP behaviour is the same by construction.
func Mount(r chi.Router, b Backend, o Options) {
	if o.Hub == nil {
		o.Hub = new(waiter.Hub)
	}
	h := &handler{backend: b, o: o}
	if d, ok := o.Records.(DeliveredReader); ok {
		h.shared = waiter.NewRereader(o.Hub, waiter.DefaultReread, h.timeout(), d.Delivered)
	}
	r.Method(http.MethodPost, "/events", httpapi.HandlerFunc(h.postEvent))
	r.Method(http.MethodPost, "/events/batch", httpapi.HandlerFunc(h.postBatch))
	r.Method(http.MethodGet, "/events/{id}", httpapi.HandlerFunc(h.getEvent))
	r.Method(http.MethodGet, "/events/{id}/wait", httpapi.HandlerFunc(h.waitEvent))
	r.Method(http.MethodGet, "/consumer", httpapi.HandlerFunc(h.consumer))
	h.mountGroups(r)
	r.Get("/openapi.yaml", httpapi.ServeYAML(OpenAPI))
}

func (h *handler) timeout() time.Duration {
	return httpapi.CallTimeout(h.o.Timeout)
}

const maxText = 200

// validate checks one event and fills in its id and default payload; the
// prefix names the element in a batch.
func validate(e *NewEvent, prefix string) error {
	var err error
	if e.Type, err = httpapi.Text(prefix, "type", e.Type, maxText); err != nil {
		return err
	}
	if e.Key, err = httpapi.Text(prefix, "key", e.Key, maxText); err != nil {
		return err
	}
	p := bytes.TrimSpace(e.Payload)
	if len(p) == 0 || bytes.Equal(p, []byte("null")) {
		p = []byte("{}")
	}
	if p[0] != '{' {
		return httpapi.BadRequest("%spayload must be a JSON object", prefix)
	}
	e.Payload = p
	e.ID = ids.New()
	return nil
}

func (h *handler) append(r *http.Request, events []NewEvent) ([]Created, error) {
	ctx, cancel := context.WithTimeout(r.Context(), h.timeout())
	defer cancel()
	created, err := h.backend.Append(ctx, events)
	if err != nil {
		return nil, err
	}
	h.o.Stats.Add(StatWritten, int64(len(created)))
	return created, nil
}

func (h *handler) postEvent(w http.ResponseWriter, r *http.Request) error {
	defer h.o.Stats.Since(StatWrite, time.Now())
	var e NewEvent
	if err := httpapi.DecodeJSON(r, &e); err != nil {
		return err
	}
	if err := validate(&e, ""); err != nil {
		return err
	}
	created, err := h.append(r, []NewEvent{e})
	if err != nil {
		return err
	}
	httpapi.WriteJSON(w, http.StatusCreated, created[0])
	return nil
}

func (h *handler) postBatch(w http.ResponseWriter, r *http.Request) error {
	defer h.o.Stats.Since(StatWrite, time.Now())
	var b Batch
	if err := httpapi.DecodeJSON(r, &b); err != nil {
		return err
	}
	switch {
	case len(b.Events) == 0:
		return httpapi.BadRequest("events must hold 1 to %d events", MaxBatch)
	case len(b.Events) > MaxBatch:
		return httpapi.BadRequest("events holds %d events; at most %d are accepted", len(b.Events), MaxBatch)
	}
	for i := range b.Events {
		if err := validate(&b.Events[i], fmt.Sprintf("events[%d].", i)); err != nil {
			return err
		}
	}
	created, err := h.append(r, b.Events)
	if err != nil {
		return err
	}
	httpapi.WriteJSON(w, http.StatusCreated, BatchCreated{Events: created})
	return nil
}

// eventID returns the path's id; a malformed one is unknown (404).
func eventID(r *http.Request) (string, error) {
	return httpapi.UUIDParam(r, "id", func(sent string) error {
		return fmt.Errorf("event %q (ids are UUIDs): %w", sent, httpapi.ErrNotFound)
	})
}

// get reads the event as group received it ("": the default group).
func (h *handler) get(r *http.Request, group, id string) (Event, error) {
	ctx, cancel := context.WithTimeout(r.Context(), h.timeout())
	defer cancel()
	if group == "" {
		return h.o.Records.Get(ctx, id)
	}
	g, ok := h.o.Records.(GroupEventReader)
	if !ok {
		return Event{}, fmt.Errorf("consumer groups: %w", httpapi.ErrUnsupported)
	}
	return g.GetIn(ctx, group, id)
}

func (h *handler) getEvent(w http.ResponseWriter, r *http.Request) error {
	id, err := eventID(r)
	if err != nil {
		return err
	}
	group, err := groupParam(r)
	if err != nil {
		return err
	}
	e, err := h.get(r, group, id)
	if err != nil {
		return err
	}
	httpapi.WriteJSON(w, http.StatusOK, e)
	return nil
}

func (h *handler) waitEvent(w http.ResponseWriter, r *http.Request) error {
	id, err := eventID(r)
	if err != nil {
		return err
	}
	timeout, err := httpapi.DurationParam(r, "timeout", httpapi.DurationSpec{Default: 5 * time.Second, Min: time.Millisecond, Max: MaxWait})
	if err != nil {
		return err
	}
	group, err := groupParam(r)
	if err != nil {
		return err
	}
	// Woken by this instance's consumer; the periodic re-read, one
	// batched query for every wait of the service on the default group
	// (each wait's own re-read on another group), sees a delivery
	// another instance's consumer recorded.
	shared := h.shared
	if group != "" {
		shared = nil
	}
	var e Event
	err = h.o.Hub.Poll(r.Context(), WaitKey(group, id), waiter.PollOptions{Timeout: timeout, Stop: h.o.Stopping, Shared: shared},
		func(context.Context) (bool, error) {
			var err error
			e, err = h.get(r, group, id)
			return err == nil && e.DeliveredAt != nil, err
		})
	switch {
	case errors.Is(err, waiter.ErrTimeout):
		return &httpapi.Error{Status: http.StatusRequestTimeout,
			Message: fmt.Sprintf("event %s was not delivered%s within %v", id, toGroup(group), timeout),
			Fields:  map[string]any{"id": id}}
	case errors.Is(err, waiter.ErrStopped):
		return fmt.Errorf("service is shutting down: %w", httpapi.ErrUnavailable)
	case err != nil:
		return err
	}
	httpapi.WriteJSON(w, http.StatusOK, e)
	return nil
}

func (h *handler) consumer(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := context.WithTimeout(r.Context(), h.timeout())
	defer cancel()
	st, err := h.backend.Consumer(ctx)
	if err != nil {
		return err
	}
	snap := h.o.Stats.Snapshot()
	st.Delivered = snap.Counters[StatDelivered]
	st.Duplicates = snap.Counters[StatDuplicates]
	st.Reconnects = snap.Counters[StatReconnects]
	httpapi.WriteJSON(w, http.StatusOK, st)
	return nil
}

// toGroup names a non-default group in a message.
func toGroup(group string) string {
	if group == "" {
		return ""
	}
	return " to group " + group
}
