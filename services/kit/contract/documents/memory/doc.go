// Package memory is an in-memory reference implementation of the
// documents pair's Backend: users in a map, searched with the contract's
// own Contains. It exists so that the pair's conformance suite (and its
// OpenAPI validation) runs without servers, in `go test -short`.
//
// It is never a substitute for the real-server runs, which stay and
// decide: it shows what the contract asks of a Backend, not what
// Postgres or MongoDB do. No service binary links it (the kit's
// deps_test.go checks).
package memory
