// Package eventstore is the event store trio's contract, written once for
// the three services (kurrentdb on :8089, no-kurrentdb on :8090,
// kafka-eventstore on :8091): the OpenAPI document they serve (OpenAPI),
// the request and response types they encode, the Backend interface each
// side implements, and the HTTP handlers they all mount (Mount) over it.
// The one conformance suite every service's tests run against its real
// backend is in the sub-package conformance.
//
// Two coordinates locate an event. Its stream version (0, 1, 2, ... within
// one stream) is what optimistic concurrency checks: an append says which
// version it expects the stream to be at. Its global position orders every
// event of every stream and is what a subscription resumes from. Positions
// are opaque strings on the wire because each engine needs something
// different to resume safely: Postgres a (xid, global_pos) pair, Kafka a
// partition offset, KurrentDB a (commit, prepare) pair.
//
// Because the handlers are shared, validation, status codes, error bodies,
// the SSE framing and the aggregate fold are identical on every side by
// construction; a backend declares what it cannot do through Capabilities
// and answers such requests with httpapi.ErrUnsupported (422).
package eventstore
