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
// queue table so that it stays the size of the backlog. With MAX_BACKLOG
// set, an enqueue that would take the backlog (the rows of queue_jobs)
// past it is shed whole with 503 before anything is recorded
// (queue.Admission), so that a batch overload cannot starve the workers.
// Settings come from
// environment variables (see Config); with none set it uses the stack
// started by `make up` or `docker compose up -d`.
//
//	go run ./services/no-rabbitmq
//
// The queue (pgQueue) is split by concern, one file each:
//   - pgqueue.go: the type, its start and its stop;
//   - enqueue.go: the writes of the queue.Backend (Enqueue, Pay), whose
//     task records are kit's records.InsertTasksSQL (with FANOUT, the
//     copies of a task of a kind with subscribers go in the same
//     statement);
//   - claim.go: the fetcher, which claims due rows (FOR UPDATE SKIP
//     LOCKED) while there is capacity;
//   - complete.go: the workers, and the completer, which records their
//     outcomes in batches;
//   - lease.go: the tasks this instance holds, and the lease keeper that
//     renews them;
//   - listen.go: the LISTEN connection that wakes the fetcher, whose
//     state (pglisten.Listener's) /readyz and the start read;
//   - recovery.go: QUEUE_TABLE, and the rebuild of queue_jobs from the
//     task records after a crash emptied it;
//   - cursor.go: fan-out's second design (FANOUT_DESIGN=cursors): a
//     fanned-out task stored once, in fanout_messages, and a reader per
//     subscriber that runs the messages past its cursor below the xid
//     watermark, one batch per subscriber at a time across instances;
//     the derived records of its copies (Get, Finished, Depth) and its
//     retention jobs.
//
// The retention of done task records is kit's (records.Store.CleanerJob,
// run by package cleaner, attached in main.go).
package main
