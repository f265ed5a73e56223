package queue

import (
	"encoding/json"
	"time"
)

// Task statuses, as stored in the tasks table and shown by GET /tasks/{id}.
const (
	StatusQueued  = "queued"
	StatusRunning = "running"
	StatusDone    = "done"
	StatusDead    = "dead"
)

// TaskRequest is the body of POST /tasks and one element of a batch.
type TaskRequest struct {
	// Kind names the task type ("email"); required, at most 100 bytes.
	Kind string `json:"kind"`
	// Payload is any JSON object, at most PayloadLimit bytes; omitted means {}.
	Payload json.RawMessage `json:"payload,omitempty"`
	// FailTimes makes the worker fail that many attempts before it
	// succeeds, to exercise retries and the dead state.
	FailTimes int `json:"fail_times"`
}

// BatchRequest is the body of POST /tasks/batch.
type BatchRequest struct {
	// Tasks holds 1 to MaxBatch tasks.
	Tasks []TaskRequest `json:"tasks"`
}

// Enqueued is the 202 answer to POST /tasks.
type Enqueued struct {
	// ID is the task's id; for a kind with subscribers (FANOUT), its
	// first copy's, so that a client unaware of fan-out still gets a task
	// it can read and wait for.
	ID string `json:"id"`
	// IDs, for a kind with subscribers only, are the copies' ids in
	// FANOUT's subscriber order (IDs[0] is ID).
	IDs        []string  `json:"ids,omitempty"`
	Status     string    `json:"status"`
	EnqueuedAt time.Time `json:"enqueued_at"`
}

// BatchEnqueued is the 202 answer to POST /tasks/batch: the ids in the
// order of the request's tasks.
type BatchEnqueued struct {
	// IDs holds one id per task of the request: for a kind with
	// subscribers, its first copy's.
	IDs []string `json:"ids"`
	// Copies, present when a task of the batch has a kind with
	// subscribers, holds per task of the request the ids it became: its
	// copies' in FANOUT's order, or its one id.
	Copies     [][]string `json:"copies,omitempty"`
	Status     string     `json:"status"`
	EnqueuedAt time.Time  `json:"enqueued_at"`
}

// Task is the answer to GET /tasks/{id} (and the body of a /wait answer).
type Task struct {
	ID          string     `json:"id"`
	Kind        string     `json:"kind"`
	Status      string     `json:"status"`
	Attempts    int        `json:"attempts"`
	EnqueuedAt  time.Time  `json:"enqueued_at"`
	DeliveredAt *time.Time `json:"delivered_at"`
	ProcessedAt *time.Time `json:"processed_at"`
	LastError   *string    `json:"last_error"`
}

// Terminal reports whether the task will not change any more.
func (t Task) Terminal() bool { return t.Status == StatusDone || t.Status == StatusDead }

// PaymentRequest is the body of POST /payments.
type PaymentRequest struct {
	// Amount is a positive integer in minor units (cents).
	Amount int64 `json:"amount"`
	// Currency is an ISO 4217-style code: three upper-case letters.
	Currency string `json:"currency"`
}

// Payment is the 201 answer to POST /payments.
type Payment struct {
	ID        string    `json:"id"`
	Amount    int64     `json:"amount"`
	Currency  string    `json:"currency"`
	TaskID    string    `json:"task_id"`
	CreatedAt time.Time `json:"created_at"`
}

// Depth is the answer to GET /queue.
type Depth struct {
	// Queued counts tasks waiting for a worker (retries included).
	Queued int64 `json:"queued"`
	// Running counts tasks a worker holds.
	Running int64 `json:"running"`
	// Dead counts dead-lettered tasks (MAX_ATTEMPTS failures).
	Dead int64 `json:"dead"`
	// OldestQueuedAgeSeconds is the age of the oldest queued task, 0 when
	// none is queued.
	OldestQueuedAgeSeconds float64 `json:"oldest_queued_age_s"`
}

// NewTask is a validated task as the handlers pass it to a Backend: the id
// and the enqueue time are assigned by the handler, once, for both sides.
type NewTask struct {
	ID         string
	Kind       string
	Payload    json.RawMessage
	FailTimes  int
	EnqueuedAt time.Time
	// Copy, for one subscriber's copy of a task posted with a kind that
	// has subscribers (FANOUT, Fanout.Expand), says whose copy it is; nil
	// for an ordinary task.
	Copy *Copy
}

// NewPayment is a validated payment and the task that processes it.
type NewPayment struct {
	ID       string
	Amount   int64
	Currency string
	Task     NewTask
}

// Latency and counter names shown by /stats, the same on both sides.
const (
	// LatencySend is the HTTP handler time of POST /tasks.
	LatencySend = "send"
	// LatencyDelivery is enqueued → a worker received the task.
	LatencyDelivery = "delivery"
	// LatencyProcessing is enqueued → processed (recorded done).
	LatencyProcessing = "processing"

	CounterEnqueued   = "enqueued"
	CounterDelivered  = "delivered"
	CounterProcessed  = "processed"
	CounterRetried    = "retried"
	CounterDead       = "dead"
	CounterReconnects = "reconnects"
)

// Latencies and Counters list the /stats names, for service.New.
var (
	Latencies = []string{LatencySend, LatencyDelivery, LatencyProcessing}
	Counters  = []string{CounterEnqueued, CounterDelivered, CounterProcessed, CounterRetried, CounterDead, CounterReconnects}
)
