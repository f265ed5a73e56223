// Package kit is the shared service kit of where-postgres-ends: every
// service of every pair is built from the same parts, so that the two sides
// of a comparison differ only in their backend.
//
// The parts live in sub-packages named for their purpose:
//
//   - config:   environment variables into one Config struct per service,
//     with errors that name the variable.
//   - httpapi:  chi router, middleware (slog request log, recovery, body
//     limit), strict JSON decoding, and the one place where errors become
//     HTTP status codes and {"error": "..."} bodies.
//   - stats:    HdrHistogram latency summaries and counters behind GET /stats
//     (one JSON shape for every service), mirrored to Prometheus on /metrics.
//   - postgres: the pgx pool, per-pair schema and goose migrations, and the
//     one mapping of Postgres errors to HTTP statuses.
//   - service:  the lifecycle (serve, then drain HTTP, stop consumers, close
//     pools) and the probes /healthz and /readyz.
//   - ids:      UUIDv7 ids (google/uuid) and the one rule on their case:
//     any case accepted, lower case issued and stored.
//   - backoff:  ctx-aware capped exponential backoff with jitter, for every
//     retry and reconnect loop.
//   - pglisten: a LISTEN connection that reconnects with backoff and calls
//     a hook after every (re)connect so callers re-read what they missed.
//   - waiter:   wakes long polls in this process when their outcome is in.
//   - jsontext: refuses in JSON what Postgres jsonb cannot store (\u0000,
//     lone surrogates), so both sides of a pair answer it with 400.
//   - contract: one package per pair: its OpenAPI document, shared types
//     and handlers, and the pair's one conformance suite.
//   - kittest:  test helpers that find the real servers through environment
//     variables with defaults at the stack's ports.
package kit
