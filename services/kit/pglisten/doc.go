// Package pglisten keeps a Postgres LISTEN connection alive: it connects,
// LISTENs, hands out notifications and, whenever the connection fails or
// is lost (a server restart, pg_terminate_backend, a network cut),
// reconnects with a ctx-aware capped exponential backoff (package
// backoff). It is shaped like github.com/jackc/pgxlisten.
//
// Notifications sent while no connection listens are lost for good, so
// after every (re)connect, once LISTEN is in place, the Listener calls its
// OnConnect hook: the caller re-reads there whatever a missed notification
// would have announced. LISTEN first, then read: anything committed after
// the read is notified, anything before it is read.
//
// The connection must be a direct session with Postgres: a pooled
// connection is shared (LISTEN is per session), and through pgbouncer in
// transaction mode LISTEN "works" and then silently receives nothing. The
// Listener checks it on every connection before OnConnect: it LISTENs on
// a channel of its own, has a notification sent there from another
// connection (Notify), and refuses the connection with ErrDeaf if it does
// not arrive within ProbeTimeout. A service fails loudly instead of
// running deaf on its fallback poll. A standby (a server in recovery)
// refuses LISTEN outright; the Listener reports that as ErrStandby. With a
// multi-host connection string and target_session_attrs=read-write the
// Listener connects to the primary, and after a promotion it reconnects to
// the new one (docs/cluster.md, "Promotion").
//
// The Listener reports its own state, for readiness checks and for a
// service that must not serve what only notifications keep fresh while
// none can arrive: Listening (a connection listens now), Err (why the last
// one failed or was lost), ListenErr (nil while listening, else why not),
// Listened (closed once the first connection listened) and Await (wait
// for that at start, failing with the last error past a deadline). OnLost
// is called when a listening connection is lost, once Listening is false.
// Every state method is safe for concurrent use, before, during and after
// the run; a service keeps no copy of this state.
//
// A Listener runs either under the caller's context (Run, until ctx
// ends) or on its own until Close (Start, then Close at shutdown, which
// waits for the connection to close, at most until Close's ctx ends).
//
// The sending half is Debouncer: a pg_notify inside a committing
// transaction takes a cluster-wide lock at commit and serializes every
// such commit, so writers that commit fast commit without it and poke a
// Debouncer, which sends at most one NOTIFY per interval, after the
// commits it announces (NOTIFY_MODE=debounced in the services; "commit"
// keeps the NOTIFY in the transaction). NotifyConfig is that setting,
// read once for every service that has it (ReadNotifyConfig).
package pglisten
