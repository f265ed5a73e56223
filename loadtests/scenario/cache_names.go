package scenario

import "github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"

// The names of the cache pair's points, ceilings and metrics (issue 10,
// and the roles beyond the cache, issue 41): written here once, by the
// scenario that measures them, and read by name by the report. The
// per-name families the cache shares with other scenarios (a process
// group's CPU, the stampede's figures per burst, the staleness per
// instance) are in names.go.

// The cache scenario's points.
const (
	// CacheProfileScenario is a product read/write mix (read_heavy,
	// write_heavy, ...) driven open loop over a Zipf key set.
	CacheProfileScenario driver.ScenarioName = "cache.profile"
	// CacheKVWriteScenario is the kv PUTs, logged vs unlogged table.
	CacheKVWriteScenario driver.ScenarioName = "cache.kv_write"
	// CacheKVReadScenario is the kv GETs of what the writes wrote.
	CacheKVReadScenario driver.ScenarioName = "cache.kv_read"
	// CacheStampedeScenario is the concurrent GETs of one cold key.
	CacheStampedeScenario driver.ScenarioName = "cache.stampede"
	// CacheStalenessScenario is the window after an out-of-band UPDATE
	// until every instance serves the new value.
	CacheStalenessScenario driver.ScenarioName = "cache.staleness"
	// CacheRawScenario is the lookup by key without HTTP (RawSidePostgres
	// against RawSideRedis).
	CacheRawScenario driver.ScenarioName = "cache.raw_lookup"
)

// CacheReadCeiling is the cache pair's ceiling search: read-through GETs
// per second of the profiles' products, over their key space.
const CacheReadCeiling driver.ScenarioName = "cache.read.ceiling"

// The cache scenario's own metrics (per mode, per round), beside the
// client's, the server's and the counters every point records.
const (
	// MetricHitRatio is hits ÷ (hits + misses) from /stats.
	MetricHitRatio driver.Metric = "hit_ratio"
	// MetricStaleTTLMS is the staleness point's PRODUCT_TTL in ms.
	MetricStaleTTLMS driver.Metric = "ttl_ms"
	// MetricFresh is 1 when every instance served the new value before
	// the TTL + 2 s deadline, 0 when one still served the old.
	MetricFresh driver.Metric = "fresh"
	// MetricStaleMS is the ms until the last instance served the new
	// value (recorded only when MetricFresh is 1).
	MetricStaleMS driver.Metric = "stale_ms"
)

// The stampede's bursts, the names of their figures in the
// MetricStampedeElapsedOf, MetricStampedeErrorsOf and
// MetricStampedeOriginLoadsOf families ("origin_loads.one").
const (
	// StampedeOneInstance is the burst at the first instance alone.
	StampedeOneInstance = "one"
	// StampedeTwoInstances is the burst spread over two instances.
	StampedeTwoInstances = "two"
)

// The roles' points.
const (
	// CacheLockScenario is acquire+release cycles, uncontended and with
	// contenders on a few names.
	CacheLockScenario driver.ScenarioName = "cache.lock"
	// CacheLockHandoverScenario is the time until another holder gets a
	// lock whose holder died.
	CacheLockHandoverScenario driver.ScenarioName = "cache.lock_handover"
	// CachePubSubScenario is one step of a pub/sub ladder (a subscriber
	// count, a publish rate).
	CachePubSubScenario driver.ScenarioName = "cache.pubsub"
	// CachePubSubCeilingScenario is each ladder's highest passing step.
	CachePubSubCeilingScenario driver.ScenarioName = "cache.pubsub_ceiling"
	// CacheRateLimitScenario is takes from one key by concurrent clients.
	CacheRateLimitScenario driver.ScenarioName = "cache.ratelimit"
)

// The roles' lock points' metrics (per granted cycle: the acquire and
// the release).
const (
	// MetricCyclesPerS is the granted acquire+release cycles per second.
	MetricCyclesPerS driver.Metric = "cycles_per_s"
	// MetricCycleP50 is a cycle's median ms.
	MetricCycleP50 driver.Metric = "cycle_p50_ms"
	// MetricCycleP99 is a cycle's 99th percentile ms.
	MetricCycleP99 driver.Metric = "cycle_p99_ms"
	// MetricAcquireP50 is an acquire's median ms, 409s included.
	MetricAcquireP50 driver.Metric = "acquire_p50_ms"
	// MetricAcquireP99 is an acquire's 99th percentile ms.
	MetricAcquireP99 driver.Metric = "acquire_p99_ms"
	// MetricConflictsPerS is the 409s (lock held) per second.
	MetricConflictsPerS driver.Metric = "conflicts_per_s"
	// MetricOverlaps is the double grants: two holders of one name at
	// once.
	MetricOverlaps driver.Metric = "overlaps"
	// MetricTokenRegress is the tokens not above the name's last.
	MetricTokenRegress driver.Metric = "token_regressions"
	// MetricRoleErrors is a lock or rate-limit point's failed requests.
	MetricRoleErrors driver.Metric = "errors"
)

// The roles' handover point's metrics.
const (
	// MetricLeaseMS is the dead holder's lease in ms.
	MetricLeaseMS driver.Metric = "lease_ms"
	// MetricHandoverMS is the ms from the holder's acquire until another
	// client got the lock.
	MetricHandoverMS driver.Metric = "handover_ms"
	// MetricAfterLeaseMS is MetricHandoverMS past the lease.
	MetricAfterLeaseMS driver.Metric = "after_lease_ms"
	// MetricTokenHigher is 1 when the new holder's token was higher.
	MetricTokenHigher driver.Metric = "token_higher"
)

// The roles' pub/sub step's metrics.
const (
	// MetricPublishRate is the step's offered publish rate.
	MetricPublishRate driver.Metric = "publish_rate"
	// MetricPublishedPerS is the publishes answered per second.
	MetricPublishedPerS driver.Metric = "published_per_s"
	// MetricPublishErrors is the publishes failed or shed.
	MetricPublishErrors driver.Metric = "publish_errors"
	// MetricDeliveriesPerS is the messages the subscribers read per
	// second.
	MetricDeliveriesPerS driver.Metric = "deliveries_per_s"
	// MetricDeliveryP50 is a delivery's median ms, from when the driver
	// made the message to when a subscriber read it.
	MetricDeliveryP50 driver.Metric = "delivery_p50_ms"
	// MetricDeliveryP99 is a delivery's 99th percentile ms.
	MetricDeliveryP99 driver.Metric = "delivery_p99_ms"
	// MetricDeliveryMax is the slowest delivery's ms.
	MetricDeliveryMax driver.Metric = "delivery_max_ms"
	// MetricMissed is the messages some subscriber never got.
	MetricMissed driver.Metric = "missed"
	// MetricEnded is the subscriptions that ended during the step.
	MetricEnded driver.Metric = "ended"
	// MetricSubscribers is the step's subscribers per channel.
	MetricSubscribers driver.Metric = "subscribers"
	// MetricPass is 1 when the step passed.
	MetricPass driver.Metric = "pass"
	// MetricCPUPerKDeliveries prefixes each process group's CPU-seconds
	// per 1,000 deliveries ("cpu_per_k_deliveries.postgres").
	MetricCPUPerKDeliveries driver.MetricPrefix = "cpu_per_k_deliveries."
)

// The roles' pub/sub ceiling's metrics (a ladder's highest passing
// step).
const (
	// MetricMaxPublishRate is the highest publish rate that passed.
	MetricMaxPublishRate driver.Metric = "max_publish_rate"
	// MetricMaxDeliveriesPerS is the deliveries per second at it.
	MetricMaxDeliveriesPerS driver.Metric = "max_deliveries_per_s"
	// MetricLadderCapped is 1 when the ladder's top rate passed: the
	// ceiling is then a lower bound.
	MetricLadderCapped driver.Metric = "capped"
)

// The roles' rate-limit point's metrics.
const (
	// MetricTakesPerS is the takes answered per second.
	MetricTakesPerS driver.Metric = "takes_per_s"
	// MetricTakeP50 is a take's median ms.
	MetricTakeP50 driver.Metric = "take_p50_ms"
	// MetricTakeP99 is a take's 99th percentile ms.
	MetricTakeP99 driver.Metric = "take_p99_ms"
	// MetricAdmitted is the takes admitted.
	MetricAdmitted driver.Metric = "admitted"
	// MetricRefused is the takes refused (over the limit).
	MetricRefused driver.Metric = "refused"
	// MetricWindows is the windows the admitted takes fell in.
	MetricWindows driver.Metric = "windows"
	// MetricAdmittedMax is the most takes admitted in one window.
	MetricAdmittedMax driver.Metric = "admitted_max_per_window"
	// MetricAdmittedMin is the fewest admitted in a full window.
	MetricAdmittedMin driver.Metric = "admitted_min_per_window"
	// MetricOverLimitWindows is the windows that admitted more than the
	// limit.
	MetricOverLimitWindows driver.Metric = "over_limit_windows"
	// MetricLimit is the limit per window.
	MetricLimit driver.Metric = "limit"
)
