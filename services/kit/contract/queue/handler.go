package queue

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/ids"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/stats"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/waiter"
)

// Limits of the contract.
const (
	// MaxBatch is the most tasks one POST /tasks/batch may hold.
	MaxBatch = 1000
	// MaxKind is the longest kind, in bytes.
	MaxKind = 100
	// MaxFailTimes caps fail_times.
	MaxFailTimes = 100
	// DefaultWait and MaxWait bound GET /tasks/{id}/wait?timeout=.
	DefaultWait = 30 * time.Second
	MaxWait     = 60 * time.Second
	// DefaultPayloadLimit is the default PAYLOAD_LIMIT.
	DefaultPayloadLimit = 64 << 10
)

// Options configures Mount.
type Options struct {
	// Stats receives the "send" latency and the "enqueued" counter.
	Stats *stats.Recorder
	// Hub wakes long polls; required.
	Hub *waiter.Hub
	// Stopping, when closed, makes long polls answer at once (the
	// service's Stopping channel).
	Stopping <-chan struct{}
	// PayloadLimit caps one task's payload in bytes (env PAYLOAD_LIMIT);
	// zero means DefaultPayloadLimit.
	PayloadLimit int
	// Faults allows the ?fault= switch of POST /payments (env FAULTS,
	// default false: a production service must not crash on request).
	Faults bool
	// Timeout bounds every backend call; zero means 10s.
	Timeout time.Duration
	// Admission, if not nil, sheds the enqueues (POST /tasks,
	// /tasks/batch, /payments) that would take the backlog past
	// MAX_BACKLOG, before anything of them is recorded.
	Admission *Admission
	// Fanout is the kinds with subscribers (env FANOUT): POST /tasks and
	// /tasks/batch enqueue one copy per subscriber of a task of such a
	// kind (Fanout.Expand). A payment's task is never fanned out.
	Fanout Fanout
	// LateRecords says the backend records a task only when a worker
	// takes it, not before its 202 (rabbitmq's PUBLISH_MODE=broker-only,
	// where the broker alone holds it until then): Get does not know an
	// accepted task for a while. GET /tasks/{id} answers 404 then; GET
	// /tasks/{id}/wait waits for the record to appear as for the task to
	// finish, and answers 404 only when the id is still unknown at its
	// timeout.
	LateRecords bool
}

type handler struct {
	backend Backend
	o       Options
	// shared is the one re-read of every wait, when the backend is a
	// FinishedReader; nil: each wait re-reads its own task.
	shared *waiter.Rereader
}

// Mount adds the contract's routes to r: POST /tasks, POST /tasks/batch,
// GET /tasks/{id}, GET /tasks/{id}/wait, POST /payments, GET /queue and
// GET /openapi.yaml.
func Mount(r chi.Router, b Backend, o Options) {
	if o.PayloadLimit <= 0 {
		o.PayloadLimit = DefaultPayloadLimit
	}
	o.Timeout = httpapi.CallTimeout(o.Timeout)
	if o.Hub == nil {
		o.Hub = new(waiter.Hub)
	}
	h := &handler{backend: b, o: o}
	if f, ok := b.(FinishedReader); ok {
		h.shared = waiter.NewRereader(o.Hub, waiter.DefaultReread, o.Timeout, f.Finished)
	}
	r.Method(http.MethodPost, "/tasks", httpapi.HandlerFunc(h.enqueue))
	r.Method(http.MethodPost, "/tasks/batch", httpapi.HandlerFunc(h.batch))
	r.Method(http.MethodGet, "/tasks/{id}", httpapi.HandlerFunc(h.get))
	r.Method(http.MethodGet, "/tasks/{id}/wait", httpapi.HandlerFunc(h.wait))
	r.Method(http.MethodPost, "/payments", httpapi.HandlerFunc(h.pay))
	r.Method(http.MethodGet, "/queue", httpapi.HandlerFunc(h.depth))
	r.Get("/openapi.yaml", httpapi.ServeYAML(OpenAPI))
}

func (h *handler) ctx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), h.o.Timeout)
}

// validate checks one task and builds its NewTask; where prefixes messages
// ("tasks[3]: ") in a batch.
func (h *handler) validate(in TaskRequest, where string, now time.Time) (NewTask, error) {
	kind, err := httpapi.Text(where, "kind", in.Kind, MaxKind)
	if err != nil {
		return NewTask{}, err
	}
	switch {
	case in.FailTimes < 0 || in.FailTimes > MaxFailTimes:
		return NewTask{}, httpapi.BadRequest("%sfail_times must be between 0 and %d, got %d", where, MaxFailTimes, in.FailTimes)
	}
	payload := bytes.TrimSpace(in.Payload)
	if len(payload) == 0 || bytes.Equal(payload, []byte("null")) {
		payload = []byte("{}")
	}
	if len(payload) > h.o.PayloadLimit {
		return NewTask{}, httpapi.Errorf(http.StatusRequestEntityTooLarge,
			"%spayload is %d bytes, over the limit of %d (PAYLOAD_LIMIT)", where, len(payload), h.o.PayloadLimit)
	}
	if payload[0] != '{' {
		return NewTask{}, httpapi.BadRequest("%spayload must be a JSON object", where)
	}
	return NewTask{ID: ids.New(), Kind: kind, Payload: payload, FailTimes: in.FailTimes, EnqueuedAt: now}, nil
}

func (h *handler) enqueue(w http.ResponseWriter, r *http.Request) error {
	start := time.Now()
	var in TaskRequest
	if err := httpapi.DecodeJSON(r, &in); err != nil {
		return err
	}
	t, err := h.validate(in, "", time.Now().UTC())
	if err != nil {
		return err
	}
	tasks := h.o.Fanout.Expand(t)
	if !h.o.Admission.Admit(len(tasks)) {
		h.o.Admission.WriteShed(w, len(tasks))
		return nil
	}
	ctx, cancel := h.ctx(r)
	defer cancel()
	err = h.backend.Enqueue(ctx, tasks)
	h.o.Admission.Done(len(tasks), err == nil)
	if err != nil {
		return err
	}
	h.o.Stats.Add(CounterEnqueued, int64(len(tasks)))
	h.o.Stats.Since(LatencySend, start)
	e := Enqueued{ID: t.ID, Status: StatusQueued, EnqueuedAt: t.EnqueuedAt}
	if t := tasks[0]; t.Copy != nil {
		e.IDs = taskIDs(tasks)
	}
	httpapi.WriteJSON(w, http.StatusAccepted, e)
	return nil
}

func (h *handler) batch(w http.ResponseWriter, r *http.Request) error {
	var in BatchRequest
	if err := httpapi.DecodeJSON(r, &in); err != nil {
		return err
	}
	if len(in.Tasks) == 0 || len(in.Tasks) > MaxBatch {
		return httpapi.BadRequest("tasks must hold 1 to %d tasks, got %d", MaxBatch, len(in.Tasks))
	}
	now := time.Now().UTC()
	tasks := make([]NewTask, 0, len(in.Tasks))
	ids := make([]string, len(in.Tasks))
	var copies [][]string // made at the first task with subscribers
	for i, tr := range in.Tasks {
		t, err := h.validate(tr, fmt.Sprintf("tasks[%d]: ", i), now)
		if err != nil {
			return err
		}
		ts := h.o.Fanout.Expand(t)
		tasks = append(tasks, ts...)
		ids[i] = t.ID
		if copies == nil && ts[0].Copy != nil {
			copies = make([][]string, len(in.Tasks))
			for j := range i {
				copies[j] = ids[j : j+1]
			}
		}
		if copies != nil {
			copies[i] = taskIDs(ts)
		}
	}
	if !h.o.Admission.Admit(len(tasks)) {
		h.o.Admission.WriteShed(w, len(tasks))
		return nil
	}
	ctx, cancel := h.ctx(r)
	defer cancel()
	err := h.backend.Enqueue(ctx, tasks)
	h.o.Admission.Done(len(tasks), err == nil)
	if err != nil {
		return err
	}
	h.o.Stats.Add(CounterEnqueued, int64(len(tasks)))
	httpapi.WriteJSON(w, http.StatusAccepted, BatchEnqueued{IDs: ids, Copies: copies, Status: StatusQueued, EnqueuedAt: now})
	return nil
}

// taskIDs returns the tasks' ids.
func taskIDs(tasks []NewTask) []string {
	out := make([]string, len(tasks))
	for i, t := range tasks {
		out[i] = t.ID
	}
	return out
}

func taskID(r *http.Request) (string, error) {
	return httpapi.UUIDParam(r, "id", func(sent string) error {
		return fmt.Errorf("task %q: %w", sent, httpapi.ErrNotFound)
	})
}

func (h *handler) get(w http.ResponseWriter, r *http.Request) error {
	id, err := taskID(r)
	if err != nil {
		return err
	}
	ctx, cancel := h.ctx(r)
	defer cancel()
	t, err := h.backend.Get(ctx, id)
	if err != nil {
		return err
	}
	httpapi.WriteJSON(w, http.StatusOK, t)
	return nil
}

// WaitTimeout is the 408 body of GET /tasks/{id}/wait: the task as it is
// now, plus an error message.
type WaitTimeout struct {
	Task
	Error string `json:"error"`
}

func (h *handler) wait(w http.ResponseWriter, r *http.Request) error {
	id, err := taskID(r)
	if err != nil {
		return err
	}
	timeout, err := httpapi.DurationParam(r, "timeout", httpapi.DurationSpec{Default: DefaultWait, Min: time.Millisecond, Max: MaxWait, Seconds: true})
	if err != nil {
		return err
	}
	// Woken by this instance's workers; the periodic re-read, one
	// batched query for every wait of the service when the backend
	// allows it, catches tasks finished by another instance.
	var t Task
	unknown := false // with LateRecords: Get did not know the id at the last read
	err = h.o.Hub.Poll(r.Context(), id, waiter.PollOptions{Timeout: timeout, Stop: h.o.Stopping, Shared: h.shared},
		func(context.Context) (bool, error) {
			ctx, cancel := h.ctx(r)
			defer cancel()
			var err error
			t, err = h.backend.Get(ctx, id)
			if unknown = h.o.LateRecords && errors.Is(err, httpapi.ErrNotFound); unknown {
				return false, nil // not recorded yet, or unknown: the timeout tells
			}
			return err == nil && t.Terminal(), err
		})
	switch {
	case err == nil:
		httpapi.WriteJSON(w, http.StatusOK, t)
		return nil
	case errors.Is(err, waiter.ErrTimeout) && unknown:
		return fmt.Errorf("task %s: unknown, or not yet taken by a worker within %v (this service records a task only then): %w", id, timeout, httpapi.ErrNotFound)
	case errors.Is(err, waiter.ErrTimeout):
		httpapi.WriteJSON(w, http.StatusRequestTimeout, WaitTimeout{Task: t,
			Error: fmt.Sprintf("task not done or dead within %v", timeout)})
		return nil
	case errors.Is(err, waiter.ErrStopped):
		return fmt.Errorf("service is shutting down; retry the wait: %w", httpapi.ErrUnavailable)
	case r.Context().Err() != nil: // the client went away
		return nil
	}
	return err
}

var currencyRE = regexp.MustCompile(`^[A-Z]{3}$`)

func (h *handler) pay(w http.ResponseWriter, r *http.Request) error {
	fault := false
	// Present means present: ?fault= (empty) or a repeated parameter is
	// not the enum's one value, and is refused like any other.
	if fs, ok := r.URL.Query()["fault"]; ok {
		if len(fs) != 1 || fs[0] != "between" {
			return httpapi.BadRequest("unknown fault %q (the only one is \"between\": crash between the payment insert and the enqueue)", httpapi.Truncate(strings.Join(fs, "&"), 64))
		}
		if !h.o.Faults {
			// A valid request the service is configured to refuse: 403,
			// not 400 (nothing is wrong with the request).
			return httpapi.Errorf(http.StatusForbidden, "fault injection is off; start the service with FAULTS=true to use ?fault=between")
		}
		fault = true
	}
	var in PaymentRequest
	if err := httpapi.DecodeJSON(r, &in); err != nil {
		return err
	}
	if in.Amount <= 0 {
		return httpapi.BadRequest("amount must be a positive integer in minor units (1200 = 12.00), got %d", in.Amount)
	}
	if !currencyRE.MatchString(in.Currency) {
		return httpapi.BadRequest("currency must be three upper-case letters (EUR), got %q", in.Currency)
	}
	now := time.Now().UTC()
	p := NewPayment{ID: ids.New(), Amount: in.Amount, Currency: in.Currency, Task: NewTask{
		ID: ids.New(), Kind: "payment", FailTimes: 0, EnqueuedAt: now,
		Payload: fmt.Appendf(nil, `{"amount":%d,"currency":%q}`, in.Amount, in.Currency),
	}}
	if !h.o.Admission.Admit(1) {
		h.o.Admission.WriteShed(w, 1)
		return nil
	}
	ctx, cancel := h.ctx(r)
	defer cancel()
	err := h.backend.Pay(ctx, p, fault)
	h.o.Admission.Done(1, err == nil)
	if err != nil {
		if errors.Is(err, ErrFaultInjected) {
			return &httpapi.Error{Status: http.StatusInternalServerError, Message: err.Error(),
				Fields: map[string]any{"payment_id": p.ID, "task_id": p.Task.ID}}
		}
		return err
	}
	h.o.Stats.Inc(CounterEnqueued)
	httpapi.WriteJSON(w, http.StatusCreated, Payment{ID: p.ID, Amount: p.Amount, Currency: p.Currency, TaskID: p.Task.ID, CreatedAt: now})
	return nil
}

func (h *handler) depth(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := h.ctx(r)
	defer cancel()
	d, err := h.backend.Depth(ctx)
	if err != nil {
		return err
	}
	httpapi.WriteJSON(w, http.StatusOK, d)
	return nil
}
