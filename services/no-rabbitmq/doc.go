// Command no-rabbitmq is the queue pair's Postgres side: a task queue in a
// Postgres table, with no broker.
//
// It serves the queue pair's REST contract (package
// services/kit/contract/queue, also at GET /openapi.yaml) on :8082, beside
// rabbitmq, which serves the same contract on RabbitMQ. POST /tasks
// writes the task's record and its queue row in one statement (the
// transactional outbox for free); a debouncer NOTIFYs after the commit, at
// most once per NOTIFY_INTERVAL, because a pg_notify in every enqueue
// transaction serializes commits (NOTIFY_MODE=commit keeps it there, for
// comparison). In-process workers
// (WORKERS) claim due rows in batches with FOR UPDATE SKIP LOCKED under a
// renewed lease (an expired lease is rescued), are woken by LISTEN on a
// dedicated, reconnecting connection (DATABASE_LISTEN_URL) with a sweep
// after every reconnect and a fallback poll, retry with exponential backoff
// (run_at) and mark tasks dead after MAX_ATTEMPTS. Finished rows leave the
// queue table so that it stays the size of the backlog. Settings come from
// environment variables (see Config); with none set it uses the stack
// started by `make up` or `docker compose up -d`.
//
//	go run ./services/no-rabbitmq
package main
