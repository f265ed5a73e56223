package cache

import (
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
)

// Latency names recorded by both services (GET /stats).
const (
	// StatGetHit is a GET answered from the cache (products and kv).
	StatGetHit = "get_hit"
	// StatGetMiss is a GET the cache did not hold: a product loaded from
	// the origin (or shared with a load in flight), or a kv 404.
	StatGetMiss = "get_miss"
	// StatSet is a PUT /kv/{key}.
	StatSet = "set"
	// StatOrigin is one origin load (a product read from Postgres).
	StatOrigin = "origin"
	// StatLockAcquire is a granted POST /locks/{name}.
	StatLockAcquire = "lock_acquire"
	// StatLockExtend is a granted PUT /locks/{name}.
	StatLockExtend = "lock_extend"
	// StatLockRelease is a granted DELETE /locks/{name}.
	StatLockRelease = "lock_release"
	// StatPublish is an accepted POST /channels/{channel}/messages.
	StatPublish = "publish"
	// StatLimitTake is a POST /limits/{key}/take answered 200 or 429.
	StatLimitTake = "limit_take"
)

// Latencies lists every latency name, for service.New.
var Latencies = []string{StatGetHit, StatGetMiss, StatSet, StatOrigin, StatLockAcquire, StatLockExtend, StatLockRelease, StatPublish, StatLimitTake}

// Counter names (GET /stats).
const (
	// CounterHits counts GETs answered from the cache.
	CounterHits = "hits"
	// CounterMisses counts GETs the cache did not hold.
	CounterMisses = "misses"
	// CounterOriginLoads counts product reads from the origin: with
	// singleflight, concurrent misses on one key within an instance
	// count one.
	CounterOriginLoads = "origin_loads"
	// CounterInvalidations counts cache keys dropped because their source
	// changed (a PUT /products/{id}, a NOTIFY from the products trigger,
	// a whole flush counting one).
	CounterInvalidations = "invalidations"
	// CounterEvictions counts entries a bounded cache dropped to stay
	// within its bound (the in-process cache; 0 elsewhere: Redis evicts
	// by its own maxmemory policy, which this service does not see).
	CounterEvictions = "evictions"
	// CounterBypasses counts requests served while the cache was
	// unavailable (X-Cache: bypass), and invalidations that could not
	// reach it.
	CounterBypasses = "bypasses"
	// CounterLocksAcquired counts granted lock acquisitions.
	CounterLocksAcquired = "locks_acquired"
	// CounterLockConflicts counts acquisitions refused because the lock
	// was held (409).
	CounterLockConflicts = "lock_conflicts"
	// CounterPublished counts messages the bus accepted (202).
	CounterPublished = "published"
	// CounterDelivered counts messages written to subscribers of this
	// instance (one per subscriber).
	CounterDelivered = "delivered"
	// CounterSubscribers counts subscriptions that started (their
	// "subscribed" event sent); CounterSubscribersEnded those that ended
	// since, whatever the reason: the difference is what is open.
	CounterSubscribers      = "subscribers"
	CounterSubscribersEnded = "subscribers_ended"
	// CounterSubscribersDropped counts subscribers dropped for reading
	// too slowly (their queue passed SUBSCRIBER_BUFFER_BYTES).
	CounterSubscribersDropped = "subscribers_dropped"
	// CounterSubscribersLost counts subscriptions ended because the bus's
	// connection was lost.
	CounterSubscribersLost = "subscribers_lost"
	// CounterSubscribersRefused counts subscriptions refused with 503
	// (SUBSCRIBERS_MAX, or the bus not listening).
	CounterSubscribersRefused = "subscribers_refused"
	// CounterTakesAdmitted and CounterTakesRefused count rate-limit
	// takes answered 200 and 429.
	CounterTakesAdmitted = "takes_admitted"
	CounterTakesRefused  = "takes_refused"
)

// Counters lists every counter name, for service.New.
var Counters = []string{CounterHits, CounterMisses, CounterOriginLoads, CounterInvalidations, CounterEvictions, CounterBypasses,
	CounterLocksAcquired, CounterLockConflicts, CounterPublished, CounterDelivered, CounterSubscribers, CounterSubscribersEnded,
	CounterSubscribersDropped, CounterSubscribersLost, CounterSubscribersRefused, CounterTakesAdmitted, CounterTakesRefused}

// X-Cache values.
const (
	// HeaderCache is the response header saying how a GET was answered.
	HeaderCache = "X-Cache"
	// HeaderLayer names the layer whose data made the answer: the
	// Backend's layer name on a hit, LayerOrigin otherwise.
	HeaderLayer = "X-Cache-Layer"
	// Hit: the cache held the value.
	Hit = "hit"
	// Miss: the value was loaded from the origin (or the key is absent).
	Miss = "miss"
	// Bypass: the cache was unavailable; the origin answered.
	Bypass = "bypass"
	// LayerOrigin is X-Cache-Layer for an answer that came from the
	// origin.
	LayerOrigin = "origin"
)

// Limits of the contract.
const (
	// MaxValueBytes is the largest kv value (1 MiB).
	MaxValueBytes = 1 << 20
	// DefaultBodyLimit is both services' BODY_LIMIT default: a value of
	// MaxValueBytes fits, and the handler answers 413 above it.
	DefaultBodyLimit = MaxValueBytes + 64<<10
	// MaxKeyLen is the longest kv key.
	MaxKeyLen = 200
	// MinTTL and MaxTTL bound ?ttl=: a value outside is clamped, so that
	// every value the document's pattern admits is accepted.
	MinTTL = time.Millisecond
	// MaxTTL is the longest ?ttl=.
	MaxTTL = 30 * 24 * time.Hour
	// MaxNameLen is the longest product name, in characters.
	MaxNameLen = 200
	// Products is how many products the migration seeds (ids 1..Products).
	Products = 100000
	// DefaultProductTTL is PRODUCT_TTL's default: how long a cached product
	// lives. It bounds the redis mode's staleness after an update made
	// outside the service.
	DefaultProductTTL = 5 * time.Minute
	// MaxOriginWork bounds ORIGIN_WORK_MS.
	MaxOriginWork = 10 * time.Second
)

// keyRE is a kv key: letters, digits and ._:- only, so it needs no
// escaping in a URL, a Redis key or a log line.
var keyRE = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,200}$`)

// ValidKey reports whether key is a kv key.
func ValidKey(key string) bool { return keyRE.MatchString(key) }

// ProductKey is the Backend key of a product.
func ProductKey(id int64) string { return "product:" + strconv.FormatInt(id, 10) }

// KVKey is the Backend key of a kv entry.
func KVKey(key string) string { return "kv:" + key }

// Product is a row of the products table as the API returns it.
type Product struct {
	// ID is the product id, 1..Products for the seeded rows.
	ID int64 `json:"id"`
	// Name is the product's name.
	Name string `json:"name"`
	// PriceCents is the price in cents.
	PriceCents int64 `json:"price_cents"`
	// Stock is the count in stock.
	Stock int64 `json:"stock"`
	// UpdatedAt is when the row last changed.
	UpdatedAt time.Time `json:"updated_at"`
}

// ProductUpdate is the body of PUT /products/{id}: every field required.
type ProductUpdate struct {
	Name       string `json:"name"`
	PriceCents int64  `json:"price_cents"`
	Stock      int64  `json:"stock"`
}

// idRE is a product id as the OpenAPI document states it: 1 to 16
// decimal digits, no leading zero (every such number fits an int64).
var idRE = regexp.MustCompile(`^[1-9][0-9]{0,15}$`)

// ParseID reads a product id from a path segment: 1 to 16 decimal digits
// without a leading zero. An id no row has is a 404 later, not a 400.
func ParseID(s string) (int64, error) {
	if !idRE.MatchString(s) {
		return 0, httpapi.BadRequest("id %q is not a product id (1 to 16 decimal digits, no leading zero)", httpapi.Truncate(s, 64))
	}
	id, _ := strconv.ParseInt(s, 10, 64)
	return id, nil
}

// NotFound returns the error an Origin returns for a missing product.
func NotFound(id int64) error { return fmt.Errorf("product %d: %w", id, httpapi.ErrNotFound) }
