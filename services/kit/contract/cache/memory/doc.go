// Package memory is an in-memory reference implementation of the cache
// pair's Backend (a map with expiry times) and Origin (the seeded
// products, computed until changed). It exists so that the pair's
// conformance suite (and its OpenAPI validation) runs without servers, in
// `go test -short`.
//
// It is never a substitute for the real-server runs, which stay and
// decide: it shows what the contract asks of a Backend, not what Redis or
// Postgres do. No service binary links it (the kit's deps_test.go
// checks).
package memory
