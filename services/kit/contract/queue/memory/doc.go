// Package memory is an in-memory reference implementation of the queue
// pair: a Store (the task and payment records, which outlive a service
// instance) and a Backend per instance whose workers claim tasks from the
// Store and run them with the contract's Work, Decide and Backoff. It
// exists so that the pair's conformance suite (and its OpenAPI
// validation) runs without servers, in `go test -short`.
//
// It is never a substitute for the real-server runs, which stay and
// decide: it shows what the contract asks of a side, not what RabbitMQ or
// Postgres do. No service binary links it (the kit's deps_test.go checks).
package memory
