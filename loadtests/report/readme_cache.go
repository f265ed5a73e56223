package report

import (
	"fmt"
	"strings"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/scenario"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// cacheSpec is the cache pair's row of the findings and its answers to
// the decision questions, read from a cache run (loadtests/scenario's
// cache scenario).
var cacheSpec = pairSpec{
	name: pairs.Cache,
	doc:  "docs/cache.md", claims: pairs.Cache,
	has:      func(in *inputs) bool { return in.rs[pairs.Cache] != nil },
	headline: cacheHeadline,
	servers: func(in *inputs) string {
		v := in.rs[pairs.Cache].Versions
		return "Redis " + orWhy(v.Redis, v.Errors["redis"])
	},
	answers: map[string]func(*inputs) string{
		"semantics": fixedAnswer("cache semantics"),
		"team":      fixedAnswer("cache team"),
		"integrity": cacheIntegrity,
	},
}

// cacheModes lists the p50 of metric at p for every mode measured, in the
// point's order: "local 1.18, redis 1.34 ms".
func cacheModes(p *driver.Point, metric driver.Metric) string {
	var parts []string
	for _, s := range p.Sides {
		if v, ok := median(p, metric, s); ok {
			parts = append(parts, s+" "+num(v))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return strings.Join(parts, ", ") + " ms"
}

// cacheHeadline sums up a cache run: the read-heavy profile's client p50
// per mode, the stampede's origin loads and the staleness windows.
func cacheHeadline(in *inputs) string {
	var parts []string
	if p := in.rs.point(pairs.Cache, scenario.CacheProfileScenario, "read_heavy"); p != nil {
		if s := cacheModes(p, driver.ClientP50); s != "" {
			parts = append(parts, fmt.Sprintf("Read-heavy products over a Zipf key set at %s/s through the same HTTP contract, client p50: %s.", num(p.Rate), s))
		}
	}
	if p := in.rs.point(pairs.Cache, scenario.CacheRawScenario, ""); p != nil {
		if v, ok := medians(at{p, driver.ClientP50, scenario.RawSidePostgres}, at{p, driver.ClientP50, scenario.RawSideRedis}); ok {
			parts = append(parts, fmt.Sprintf("One lookup by key without HTTP: p50 %s ms on Postgres (pgx, primary key) vs %s ms on Redis.", num(v[0]), num(v[1])))
		}
	}
	if p := in.rs.point(pairs.Cache, scenario.CacheStalenessScenario, ""); p != nil {
		parts = append(parts, "After an out-of-band `UPDATE ... WHERE`, every instance was fresh within: "+stalenessModes(p)+".")
	}
	return joinNonEmpty(parts, "No cache measurement in these results.")
}

// stalenessModes lists each mode's longest staleness window, or that it
// stayed stale past its TTL.
func stalenessModes(p *driver.Point) string {
	var parts []string
	for _, s := range p.Sides {
		f, _ := sideMin(p.Find(scenario.MetricFresh), s)
		v, ok := sideMax(p.Find(scenario.MetricStaleMS), s)
		ttl, _ := median(p, scenario.MetricStaleTTLMS, s)
		switch {
		case f < 1 || !ok:
			parts = append(parts, s+" stale past its TTL")
		case ttl > 0 && v > ttl/2:
			parts = append(parts, fmt.Sprintf("%s %s ms (TTL-bound, TTL %s ms)", s, num(v), num(ttl)))
		default:
			parts = append(parts, fmt.Sprintf("%s %s ms", s, num(v)))
		}
	}
	return strings.Join(parts, "; ")
}

// cacheIntegrity prices freshness: how long each mode served a stale
// value after an update made outside the service.
func cacheIntegrity(in *inputs) string {
	p := in.rs.point(pairs.Cache, scenario.CacheStalenessScenario, "")
	if p == nil {
		return ""
	}
	return say("cache integrity", stalenessModes(p))
}
