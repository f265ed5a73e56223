// Package log is the log pair's contract, written once and shared by
// services/kafka and services/no-kafka: the OpenAPI document both serve at
// GET /openapi.yaml, the request and response types, the Backend interface
// each side implements, the HTTP handlers both mount (Mount: their HTTP
// behaviour is identical by construction), the Postgres tables both use
// for the messages and deliveries (Records, also the groups registry and
// each consumer group's deliveries) and the consumer's delivery
// bookkeeping (Deliverer). Consumer groups (groups.go) are optional for a
// Backend (GroupBackend); both services implement them. The pair's conformance suite is in the
// sub-package conformance.
//
// A service supplies only its Backend: how an event is appended (an INSERT,
// or an INSERT and a Kafka produce) and where its consumer stands.
package log
