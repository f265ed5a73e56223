// Command kurrentdb is the event store trio's KurrentDB side (:8089),
// written against the official client (github.com/kurrent-io/
// KurrentDB-Client-Go): appends carry the expected version to the server
// (StreamState), reads use the server's per-stream index, and
// subscriptions read $all to catch up, then subscribe to $all (system
// events filtered out) from the last position read. The REST contract and
// its handlers are shared (package contract/eventstore).
//
// KurrentDB cannot be installed on the project's machines: its tests run
// only when KURRENTDB_URL points at a real server (docker compose up
// kurrentdb) and are skipped otherwise. No fake server is used.
package main
