// Package kit is the shared service kit of where-postgres-ends: every
// service of every pair is built from the same parts, so that the two sides
// of a comparison differ only in their backend.
//
// The parts live in sub-packages named for their purpose (doc_test.go
// checks that this list names every one, and that the counts and pair
// lists here and in docs/adding-a-pair.md are the pair table's;
// guide_test.go, that every qualified name here and there is declared,
// and that the guide's lists of each pair's files are complete):
//
//   - config:   environment variables into one Config struct per service,
//     with errors that name the variable, old names accepted with a
//     warning; configtest checks the docs' env tables against it.
//   - pairs:    the pair table (service, pair, side, backend, port) and the
//     stack's backends with their default URLs, written once;
//     pairs/pairstest checks the docs' counts and lists of pairs against it.
//   - httpapi:  chi router, middleware (slog request log, recovery, body
//     limit, admission: MAX_IN_FLIGHT and MAX_WAITERS shed with 503 and
//     Retry-After, bodies are read within BODY_READ_TIMEOUT before a slot),
//     strict JSON decoding, and the one place where errors become
//     HTTP status codes and {"error": "..."} bodies.
//   - stats:    HdrHistogram latency summaries and counters behind GET /stats
//     (one JSON shape for every service), mirrored to Prometheus on /metrics.
//   - postgres: the pgx pool, per-pair schema and goose migrations, and the
//     one mapping of Postgres errors to HTTP statuses.
//   - service:  the lifecycle (serve, then drain HTTP, stop consumers, close
//     pools) and the probes /healthz and /readyz; service/servicetest
//     builds, serves and restarts a service in its own tests.
//   - ids:      UUIDv7 ids (google/uuid) and the one rule on their case:
//     any case accepted, lower case issued and stored.
//   - backoff:  ctx-aware capped exponential backoff with jitter, for every
//     retry and reconnect loop.
//   - pglisten: a LISTEN connection that reconnects with backoff, calls
//     a hook after every (re)connect so callers re-read what they missed,
//     runs under a context (Run) or from Start to Close, and reports its
//     own state (listening, the last error, the first connection); and
//     Debouncer, which coalesces wake-ups into at most one NOTIFY per
//     interval sent outside the writers' transactions.
//   - cleaner:  removes, in small batches on a timer, what a service keeps
//     past its retention (the queue pair's finished task records, the log
//     pair's delivered events), with its progress in /stats.
//   - waiter:   wakes long polls in this process when their outcome is in.
//   - sse:      Server-Sent Events: a writer with a deadline per write and
//     a heartbeat, and the reader the tests use (the event store's
//     subscriptions, the documents pair's change feed).
//   - jsonbtext: refuses in JSON what Postgres jsonb cannot store (\u0000,
//     lone surrogates) or would write back far longer than sent (numbers
//     out of bounds), so both sides of a pair answer it with 400.
//   - contract: one package per pair (queue, log, documents, eventstore, cache):
//     its OpenAPI document, shared types, Backend interface and handlers;
//     each has a conformance sub-package holding the pair's one suite, and
//     a memory sub-package, an in-memory reference Backend that runs the
//     suite without servers (never a substitute for the real-server runs).
//   - kittest:  test helpers that find the real servers through environment
//     variables with defaults at the stack's ports, run services in the
//     test's process, and validate the suites' traffic against the pair's
//     OpenAPI document.
//   - localport: loopback ports for a child process to listen on, picked
//     outside the kernel's ephemeral range so that no outgoing connection
//     takes one between the pick and the child's bind.
//
// # Glossary
//
// Every pair uses these words with one meaning:
//
//   - Pair: one comparison, a specialist and its Postgres replacement
//     behind one REST contract (the event store is a trio: two
//     specialists). A side is one of its services.
//   - Contract: the package contract/<pair>. Every one has the same files:
//     doc.go, openapi.go (OpenAPI, the embedded openapi.yaml), types.go
//     (the wire types and /stats names), backend.go (Backend) and
//     handler.go (Mount, Options).
//   - Backend: the interface a side implements, its adapter to its
//     database or broker (contract/<pair>.Backend), and the in-memory
//     reference one that implements it (contract/<pair>/memory.Backend).
//     The name has three other uses, each about the server underneath:
//     pairs.Backend, a server of the stack with its address variable, and
//     the pair table's Service.Backend, the system a service is built on,
//     which /stats reports as "backend"; and documents.BackendInfo, the
//     description of the server a documents side serves at GET /backend.
//   - Mount: the function Mount(r chi.Router, b Backend, o Options) that
//     adds the contract's routes to a service's router; Options holds the
//     rest (stats recorder, timeouts, wake-up hub).
//   - Records: the Postgres tables a pair's sides both keep whatever
//     transports their work (queue/records, log.Records).
//   - Conformance suite: contract/<pair>/conformance, entered by
//     conformance.Run(t, Features, NewTarget) from every side's tests. It
//     is a separate package so that no service binary links testing.
//   - Features: what a side declares it can do, passed to Run; a test
//     that needs a flag the side lacks checks the honest opposite or
//     skips, naming the flag.
//   - Target: one running side under the suite: kittest.Target (URL,
//     Restart, Crash) plus the pair's extras; NewTarget starts one on
//     state of its own. A service's target embeds kittest.Instance, which
//     runs one instance at a time.
//   - Settings: a queue target's per-instance settings (workers, retries),
//     the variables they stand for (Settings.Env).
package kit
