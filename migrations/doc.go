// Package migrations embeds the goose SQL migrations of every pair, one
// folder per pair (queue, log, documents, eventstore, cache), each applied in the
// pair's own Postgres schema. Postgres-backed services apply theirs at
// start through kit/postgres.Migrate (goose's Provider API); `make migrate`
// applies them from the command line (cmd/migrate).
//
// Rules for a migration file NNNN_name.sql: it has a -- +goose Up and a
// -- +goose Down section, its Up can run again on a schema that already has
// it (CREATE ... IF NOT EXISTS), and its Down undoes exactly its Up.
package migrations
