// Command rabbitmq is the queue pair's specialist side: the same task queue on RabbitMQ, with each task's business record in Postgres.
//
// It serves the queue pair's REST contract on :8081, beside
// no-rabbitmq, which serves the same contract on the other side of the
// comparison. Settings come from environment variables (see Config); with
// none set it uses the stack started by `make up` or `docker compose up -d`.
//
// This is the service's skeleton from the foundation: configuration, its
// backends (connected, migrated, watched by /readyz, closed in order at
// shutdown) and the endpoints every service shares (/healthz, /readyz,
// /metrics, /stats, /stats/reset). The pair's business endpoints are built
// in the pair's own issue; until then other routes answer a JSON 404.
//
//	go run ./services/rabbitmq
package main
