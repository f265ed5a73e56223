// Package memory is an in-memory reference implementation of the log
// pair: a Log (the messages, the deliveries and the consumer's confirmed
// position, which outlive a service instance) and a Backend per instance
// whose consumer goroutine reads the Log and hands batches to the
// contract's Deliverer. It exists so that the pair's conformance suite
// (and its OpenAPI validation) runs without servers, in `go test -short`.
//
// It is never a substitute for the real-server runs, which stay and
// decide: it shows what the contract asks of a side, not what Kafka or
// logical replication do. No service binary links it (the kit's
// deps_test.go checks).
package memory
