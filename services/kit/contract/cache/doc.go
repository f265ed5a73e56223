// Package cache is the contract of the cache pair (services/redis against
// services/no-redis): the OpenAPI document both serve, the JSON types they
// encode, the Backend interface each side implements (the cache layer), the
// Origin both read through (the products table, package pgorigin), and the
// HTTP handlers both mount over them (Mount), which hold the shared
// read-through path: a cache lookup, then on a miss one origin load per key
// at a time within the instance (golang.org/x/sync/singleflight), then a
// fill. The pair's conformance suite is in the sub-package conformance.
//
// Because the handlers and the read-through path live here, the two
// services differ only in their Backend (Redis, an in-process cache
// invalidated by Postgres NOTIFY, an UNLOGGED table): status codes,
// validation, X-Cache headers, singleflight and counting are identical by
// construction.
//
// Beyond the cache, the contract holds three roles teams use Redis for
// (issue 41): locks with leases and fencing tokens (Locker), pub/sub
// fan-out over Server-Sent Events (PubSub, with the shared fan-out in
// hub.go) and fixed-window rate limits (Limiter). Each side implements
// the three small interfaces; the handlers (roles_handler.go) validate,
// bound and map errors to statuses in one place for both.
package cache
