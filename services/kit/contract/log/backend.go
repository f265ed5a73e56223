package log

import "context"

// Backend is what differs between the two services. Implementations are
// safe for concurrent use; ctx bounds each call (the handler gives it a
// timeout); neither method retains its arguments.
type Backend interface {
	// Append durably records the validated events (their IDs already set)
	// in one transaction and, on kafka, produces them to the topic; it
	// returns only when both are done, with each event's created_at in
	// order. A backend that cannot be reached yields an error wrapping
	// httpapi.ErrUnavailable (503).
	Append(ctx context.Context, events []NewEvent) ([]Created, error)
	// Consumer reports the consumer's position, lag and counters.
	Consumer(ctx context.Context) (ConsumerStatus, error)
}
