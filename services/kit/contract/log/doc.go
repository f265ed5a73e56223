// Package log is the log pair's contract, written once and shared by
// services/kafka and services/no-kafka: the OpenAPI document both serve at
// GET /openapi.yaml, the request and response types, the HTTP handlers
// (Handler: both services mount the same code, so their HTTP behaviour is
// identical by construction), the Postgres store both use for the messages
// and deliveries tables (Store), the consumer's delivery bookkeeping
// (Deliverer) and the one conformance suite (Run) both services' tests call.
//
// A service supplies only its Backend: how an event is appended (an INSERT,
// or an INSERT and a Kafka produce) and where its consumer stands.
package log
