package eventstore

import "context"

// Backend is what each service implements: its adapter to the engine.
// Its methods are safe for concurrent use; every call is bounded by its
// ctx (the handlers set a timeout on all but Subscribe). Close rules are
// the implementation's (the service closes its pools on stop).
type Backend interface {
	// Capabilities says what the engine can do.
	Capabilities() Capabilities
	// Append stores events at the end of stream atomically if expected
	// holds; otherwise it returns *WrongExpectedVersionError, or an error
	// wrapping httpapi.ErrUnsupported if the engine cannot check the
	// condition.
	Append(ctx context.Context, stream string, expected ExpectedVersion, events []EventData) (AppendResult, error)
	// Read returns up to limit events of stream with version >= from,
	// stopping before the event that would take them past MaxReadBytes
	// (fill a Page; the handler cuts what passes it, but the backend must
	// not hold more than that meanwhile).
	Read(ctx context.Context, stream string, from int64, limit int) (ReadResult, error)
	// Subscribe delivers every event after position from ("" = the
	// beginning) to sub, calls sub.CaughtUp once the backlog is delivered,
	// then delivers live events until ctx ends (returning ctx's error) or a
	// delivery fails. An invalid from must be reported (as a 400
	// *httpapi.Error) before anything is delivered.
	Subscribe(ctx context.Context, from string, sub Subscriber) error
}
