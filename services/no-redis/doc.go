// Command no-redis is the cache pair's Postgres side: an in-process cache invalidated by Postgres NOTIFY, or a shared UNLOGGED table.
//
// It serves the cache pair's REST contract on :8088, beside redis, which
// serves the same contract on the other side of the comparison. Settings
// come from environment variables (see Config); with none set it uses the
// stack started by `make up` or `docker compose up -d`.
//
// CACHE_MODE=local (the default) keeps values in the process, in an otter
// cache bounded in bytes (LOCAL_CACHE_BYTES). Invalidation comes from
// Postgres: a statement-level trigger on products (migrations/cache/0002)
// sends one NOTIFY per changing statement naming the ids, which every
// instance's listener (kit/pglisten) drops; a bulk UPDATE typed in psql
// invalidates every instance. Notifications sent while the listener is
// disconnected are gone, so the cache is flushed whole when the
// connection is lost and bypassed until it is back.
//
// CACHE_MODE=unlogged keeps values in a table shared by every instance:
// UNLOGGED cache_kv by default, or the WAL-logged cache_kv_logged with
// CACHE_TABLE=logged for the comparison; expired rows are ignored by
// reads and removed in batches by a reaper (kit/cleaner).
//
// Beyond the cache, in every mode (roles.go, pubsub.go,
// migrations/cache/0005): locks are lease rows in cache_locks with
// fencing tokens from the sequence cache_lock_tokens (not session
// advisory locks: docs/cache.md says why), pub/sub is NOTIFY on
// cache_pubsub received by the process' one LISTEN connection (the same
// connection as the local mode's invalidations), and a rate-limit take is
// one upsert on the UNLOGGED table cache_limits.
//
//	go run ./services/no-redis
package main
