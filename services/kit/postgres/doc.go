// Package postgres opens the pgx pool every Postgres-backed service uses
// and applies a pair's goose migrations through goose's Provider API.
//
// Each pair lives in its own Postgres schema (DATABASE_SCHEMA, default the
// pair's name), set as the pool's search_path, so that migrations and
// queries use unqualified names. Tests exploit this: each test migrates a
// schema of its own and runs in parallel with the others.
//
// A service with background machinery opens its pools with OpenPools: the
// migrated pool of its requests, then a reserved pool each for its
// consumers, workers or notifier (Reserve, ReserveNotify), closed together
// after the hooks that use them (Register). A service that LISTENs reads
// its dedicated connection's URL with ReadListenURL (DATABASE_LISTEN_URL,
// default DATABASE_URL), configures that connection with ListenConnConfig
// and waits for it at start with AwaitListening.
//
// It is also the one place where a Postgres error becomes an HTTP one:
// MapError (by SQLSTATE, through github.com/jackc/pgerrcode: 400 for a
// refused value, 409 for a unique violation, 503 for an unreachable or
// restarting server, 500 for the rest), with SQLSTATE, IsDataError and
// IsUnavailable for callers that must tell cases apart.
//
// Connection notes that matter for the comparisons:
//   - Through pgbouncer in transaction mode, pgx's default statement cache
//     breaks ("prepared statement already exists"): add
//     default_query_exec_mode=exec (or simple_protocol) to the URL.
//     pgbouncer also drops the search_path startup parameter, so use
//     DATABASE_SCHEMA=public there or set the role's search_path.
//   - LISTEN/NOTIFY and logical replication need a direct connection to
//     Postgres, never one through pgbouncer in transaction mode: LISTEN
//     "works" there and then silently receives nothing.
package postgres
