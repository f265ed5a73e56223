// Command no-mongodb is the documents pair's Postgres side: user profiles as jsonb with a GIN (jsonb_path_ops) index.
//
// It serves the documents pair's REST contract on :8086, beside
// mongodb, which serves the same contract on the other side of the
// comparison. Settings come from environment variables (see Config); with
// none set it uses the stack started by `make up` or `docker compose up -d`.
//
// This is the service's skeleton from the foundation: configuration, its
// backends (connected, migrated, watched by /readyz, closed in order at
// shutdown) and the endpoints every service shares (/healthz, /readyz,
// /metrics, /stats, /stats/reset). The pair's business endpoints are built
// in the pair's own issue; until then other routes answer a JSON 404.
//
//	go run ./services/no-mongodb
package main
