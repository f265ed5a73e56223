// Package queue is the queue pair's contract, written once for both
// services (rabbitmq on :8081, no-rabbitmq on :8082): the OpenAPI document
// they serve (OpenAPI), the request and response types they encode, the
// HTTP handlers they both mount (Mount) over a small Backend interface that
// each side implements, and the one conformance suite (Run) that both
// services' tests run against real Postgres and real RabbitMQ.
//
// Because the handlers are shared, validation, status codes, error bodies
// and the /stats names are identical on both sides by construction; the
// services differ only in how a task travels from POST /tasks to a worker.
package queue
