// Package queue is the queue pair's contract, written once for both
// services (rabbitmq on :8081, no-rabbitmq on :8082): the OpenAPI document
// they serve (OpenAPI), the request and response types they encode, the
// Backend interface each side implements, and the HTTP handlers they both
// mount (Mount) over it. The pair's conformance suite, which both
// services' tests run against real Postgres and real RabbitMQ, is in the
// sub-package conformance, so that no service binary links the testing
// package.
//
// Because the handlers are shared, validation, status codes, error bodies
// and the /stats names are identical on both sides by construction; the
// services differ only in how a task travels from POST /tasks to a worker.
//
// Fan-out (FANOUT, ParseFanout) is also the handlers': a task of a kind
// with subscribers reaches a Backend as one ordinary NewTask per
// subscriber (Fanout.Expand), marked with its Copy, which the rabbitmq
// side uses to publish them as one message.
//
// Admission, the backlog bound both sides share (MAX_BACKLOG,
// BACKLOG_INTERVAL), is applied by the same handlers; each side only
// counts its own backlog.
package queue
