package queue

import (
	"context"
	"errors"
)

// ErrFaultInjected is what Backend.Pay returns when asked to crash between
// its two steps; the handler answers 500 and names the payment.
var ErrFaultInjected = errors.New("fault injected between writing the payment and enqueueing its task")

// Backend is what each service implements: the transport of tasks. Every
// method is called concurrently by many requests; ctx bounds the call (the
// handler sets a timeout). Errors that mean "a backend could not be
// reached" wrap httpapi.ErrUnavailable; an unknown task id wraps
// httpapi.ErrNotFound. A Backend is closed by its service, never by the
// handlers.
type Backend interface {
	// Enqueue records the tasks (status queued) and hands them to the
	// transport. no-rabbitmq does both in one transaction; rabbitmq commits
	// the records, then publishes with confirms (or, with
	// PUBLISH_MODE=outbox, commits them with outbox rows that its relay
	// publishes; with PUBLISH_MODE=broker-only it only publishes, and the
	// consumer records each task when it takes it: Options.LateRecords).
	// It returns once the tasks are durable (committed, or confirmed by
	// the broker).
	Enqueue(ctx context.Context, tasks []NewTask) error
	// Pay writes the payment row and enqueues p.Task. With fault set it
	// stops between the two steps as a crash would (whatever that leaves
	// committed stays committed) and returns ErrFaultInjected.
	Pay(ctx context.Context, p NewPayment, fault bool) error
	// Get returns the task's record.
	Get(ctx context.Context, id string) (Task, error)
	// Depth returns the queue's depth by status.
	Depth(ctx context.Context) (Depth, error)
}

// FinishedReader is what a Backend may add so that the long polls of GET
// /tasks/{id}/wait share their re-reads: Finished returns, in one call,
// those of ids that are done or dead. With it, a service's waiters make
// one backend query per interval between them (waiter.Rereader); without
// it, each re-reads its own task. records.Store implements it.
type FinishedReader interface {
	Finished(ctx context.Context, ids []string) ([]string, error)
}
