// Command no-kurrentdb is the event store trio's Postgres side (:8090): an
// events table whose primary key (stream_id, version) is the optimistic
// lock, read by stream through that key, and subscribed to through a
// (xid, global_pos) cursor that reads only below the transaction watermark,
// so that commit-order gaps in global_pos never lose an event. Live
// subscribers are woken by LISTEN/NOTIFY on a dedicated connection, with a
// fallback poll; by default the NOTIFY leaves the append's transaction
// (which it would serialize at commit) for a debouncer that sends at most
// one per NOTIFY_INTERVAL after the commits (NOTIFY_MODE). The REST contract and its handlers are shared with the
// other two services (package contract/eventstore).
package main
