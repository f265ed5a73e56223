// Package memory is an in-memory reference implementation of the
// eventstore pair's Backend: one global log of events in a slice, each
// stream an index into it, subscriptions woken by a broadcast. It exists
// so that the pair's conformance suite (and its OpenAPI validation) runs
// without servers, in `go test -short`.
//
// It is never a substitute for the real-server runs, which stay and
// decide: it shows what the contract asks of a Backend, not what
// Postgres, Kafka or KurrentDB do. No service binary links it (the kit's
// deps_test.go checks).
package memory
