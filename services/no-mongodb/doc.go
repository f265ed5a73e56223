// Command no-mongodb is the documents pair's Postgres side: user profiles as jsonb with a GIN (jsonb_path_ops) index.
//
// It serves the documents pair's REST contract on :8086, beside
// mongodb, which serves the same contract on the other side of the
// comparison. Settings come from environment variables (see Config); with
// none set it uses the stack started by `make up` or `docker compose up -d`.
//
// Every endpoint of the contract (package contract/documents) is served by
// the shared handlers over store, the Postgres adapter: a users row with
// fixed columns and a jsonb profile; PATCH /users/{id}/profile is
// profile || patch minus the keys given as null; search is profile @> query
// with keyset pagination on the primary key.
//
//	go run ./services/no-mongodb
package main
