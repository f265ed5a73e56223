// Command rabbitmq is the queue pair's specialist side: the same task queue
// on RabbitMQ, with each task's business record in Postgres.
//
// It serves the queue pair's REST contract (package
// services/kit/contract/queue, also at GET /openapi.yaml) on :8081, beside
// no-rabbitmq, which serves the same contract on Postgres alone. POST
// /tasks commits the task's record, then publishes a persistent message
// with publisher confirms (the dual write: a crash between the two leaves a
// recorded task that was never published, until the reconciler publishes
// it again after RECONCILE_AFTER). With DELIVERY_MODE=transient the
// messages are transient: the record is the one durable copy, and the
// reconciler publishes again what a broker restart lost. With
// PUBLISH_MODE=outbox the record and an outbox row commit in one
// transaction instead, and a relay publishes the rows with confirms
// (outbox.go). With PUBLISH_MODE=broker-only the task itself is the
// message (persistent, confirmed) and nothing is recorded before the 202:
// the consumer records the task when it first takes it, so GET
// /tasks/{id} answers 404 until then (brokeronly.go). In-process workers (WORKERS)
// consume with manual acknowledgements and a prefetch (PREFETCH); the
// deliveries and their outcomes are recorded in Postgres in batches, one
// statement per RECORD_BATCH, and acknowledged with multiple=true. Tasks
// retry through per-step delay queues (RETRY_BASE,
// doubling, capped at 30s) and dead-letter through the work queue's
// dead-letter exchange after MAX_ATTEMPTS. Every classic queue is declared
// with x-queue-version RABBITMQ_QUEUE_VERSION (default 2); a queue that
// exists with another version, or none, fails the start naming it. amqp091-go does not reconnect:
// the service does, re-declaring its topology and consuming again.
// With FANOUT, a task of a kind with subscribers is recorded as one task
// per subscriber and published once, to the kind's fanout exchange, which
// puts it in each subscriber's durable queue (docs/queue.md, "Fan-out").
// With MAX_BACKLOG set, an enqueue that would take the backlog (the open
// task records) past it is shed whole with 503 before anything is
// recorded or published (queue.Admission), as on the no-rabbitmq side.
// Settings come from environment variables (see Config); with none set it
// uses the stack started by `make up` or `docker compose up -d`.
//
//	go run ./services/rabbitmq
package main
