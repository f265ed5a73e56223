// Command no-kafka is the log pair's Postgres side: an event log whose transport is the WAL, read through a logical replication slot, decoded with wal2json or pgoutput.
//
// It serves the log pair's REST contract on :8084, beside
// kafka, which serves the same contract on the other side of the
// comparison. Settings come from environment variables (see Config); with
// none set it uses the stack started by `make up` or `docker compose up -d`.
//
// POST /events only INSERTs into the messages table. A consumer streams a
// persistent logical replication slot over the replication protocol
// (pglogrepl), decoded by the output plugin SLOT_PLUGIN names (see
// decoders.go): wal2json format-version 2 filtered to that table (the
// default), or the built-in pgoutput from a publication of that table alone,
// which the service creates (for servers without wal2json, such as
// PostgreSQL 18.4 from npm). One consumer loop serves both; it records each
// batch in the deliveries table (dedup by id) and only then confirms the
// LSN in a standby status update: at-least-once delivery, each event
// observed once, resumed from confirmed_flush_lsn after a restart or a
// dropped connection. GET /consumer shows the slot, including the WAL it
// retains. Consumer groups (PUT /groups/{name}) each get a slot of their
// own; a group from earliest first replays the messages table (before
// its slot exists: a slot's creation waits for every open transaction
// that holds an xid), then what committed until the slot's consistent
// point, in the snapshot the slot exported, then streams the slot (see
// groups.go). With GROUPS_DESIGN=cursors they get a cursor instead: one
// row of group_cursors over the deliveries the default slot records, read
// below the xid watermark (see cursors.go). The HTTP handlers, types and conformance suite are shared
// with kafka in services/kit/contract/log.
//
//	go run ./services/no-kafka
package main
