// Command redis is the cache pair's specialist side: Redis (go-redis v9, or rueidis for client-side caching) in front of the Postgres products table.
//
// It serves the cache pair's REST contract on :8087, beside no-redis,
// which serves the same contract on the other side of the comparison.
// Settings come from environment variables (see Config); with none set it
// uses the stack started by `make up` or `docker compose up -d`.
//
// Every endpoint of the contract (package contract/cache) is served by the
// shared handlers over store, the Redis adapter: GET, SET with PX (the
// TTL) and DEL under REDIS_KEY_PREFIX. A PUT /products/{id} updates the
// row, then deletes its key; an UPDATE made outside the service stays
// stale in Redis until PRODUCT_TTL ends. When Redis cannot be reached,
// product reads are answered from Postgres with X-Cache: bypass.
//
// CACHE_MODE=client-side (csStore, on rueidis) adds Redis' server-assisted
// client-side caching: each instance keeps a copy of what it read, up to
// CLIENT_CACHE_BYTES, and Redis (RESP3 CLIENT TRACKING) pushes an
// invalidation when a key it read changes, whoever changed it. A hit says
// X-Cache-Layer: local when the copy answered, redis when Redis did.
//
// Beyond the cache (roles.go), on go-redis in both modes: locks (SET NX
// PX in a Lua script that also INCRs the name's fencing counter, seeded
// from the server's clock; release and extend by Lua scripts checking
// the value), pub/sub (PUBLISH, and one PSUBSCRIBE connection per process
// feeding the contract's fan-out) and fixed-window rate limits (INCR and
// PEXPIRE in one script).
//
//	go run ./services/redis
package main
