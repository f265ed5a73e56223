package report

import (
	"strings"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// cacheRolesFixture is a synthetic run of the roles beyond the cache:
// Redis faster at every operation, no double grant nor token regression
// on either side, a handover shortly after the lease, a one-subscriber
// pub/sub ceiling of 4,000/s on no-redis against 16,000/s on redis, and
// an exact rate limit on both.
func cacheRolesFixture(point func(string, string, float64, []string, func(string, int) map[driver.Metric]float64) driver.Point) []driver.Point {
	sides := []string{pairs.NoRedis, pairs.Redis}
	k := func(s string) float64 {
		return map[driver.Metric]float64{pairs.NoRedis: 1.5, pairs.Redis: 1}[driver.Metric(s)]
	}
	lock := func(s string, _ int) map[driver.Metric]float64 {
		return map[driver.Metric]float64{"cycles_per_s": 800 / k(s), "cycle_p50_ms": 2 * k(s), "cycle_p99_ms": 6 * k(s), "acquire_p50_ms": k(s),
			"acquire_p99_ms": 3 * k(s), "conflicts_per_s": 100, "overlaps": 0, "token_regressions": 0, "errors": 0,
			"cpu_per_k.service": 0.2, "cpu_per_k.postgres": 0.3, "cpu_per_k.redis": 0.05, "cpu_per_k.driver": 0.1}
	}
	out := []driver.Point{
		point("cache.lock", "uncontended", 0, sides, lock),
		point("cache.lock", "16 contenders on 8 names", 0, sides, lock),
		point("cache.lock_handover", "lease 1s", 0, sides, func(s string, r int) map[driver.Metric]float64 {
			return map[driver.Metric]float64{"lease_ms": 1000, "handover_ms": 1010 + float64(r), "after_lease_ms": 10 + float64(r), "token_higher": 1}
		}),
		point("cache.ratelimit", "32 clients, 200 per 1s", 0, sides, func(s string, _ int) map[driver.Metric]float64 {
			return map[driver.Metric]float64{"takes_per_s": 3000 / k(s), "take_p50_ms": k(s), "take_p99_ms": 4 * k(s), "limit": 200, "windows": 3,
				"admitted_max_per_window": 200, "admitted_min_per_window": 200, "over_limit_windows": 0, "errors": 0}
		}),
	}
	for _, rate := range []float64{250, 500} {
		out = append(out, point("cache.pubsub", "1 subscriber, "+driver.Label(rate), 0, sides, func(s string, _ int) map[driver.Metric]float64 {
			return map[driver.Metric]float64{"published_per_s": rate, "deliveries_per_s": rate, "delivery_p50_ms": 2 * k(s), "delivery_p99_ms": 8 * k(s),
				"missed": 0, "ended": 0, "pass": 1, "cpu_per_k_deliveries.postgres": 0.4, "cpu_per_k_deliveries.service": 0.2}
		}))
	}
	out = append(out, point("cache.pubsub_ceiling", "1 subscriber", 0, sides, func(s string, _ int) map[driver.Metric]float64 {
		return map[driver.Metric]float64{"max_publish_rate": map[driver.Metric]float64{pairs.NoRedis: 4000, pairs.Redis: 16000}[driver.Metric(s)],
			"max_deliveries_per_s": map[driver.Metric]float64{pairs.NoRedis: 4000, pairs.Redis: 16000}[driver.Metric(s)], "capped": 0, "subscribers": 1}
	}))
	return out
}

// TestCacheRolesSection: the cache section holds the roles' subsection
// with each table, before the notes, and the roles' claims decide on the
// fixture as its figures say.
func TestCacheRolesSection(t *testing.T) {
	runs := fixture()
	var cache *driver.Run
	for _, r := range runs {
		if r.Command == pairs.Cache {
			cache = r
		}
	}
	sec := CacheSection(cache)
	i := strings.Index(sec, "### "+RolesTitle)
	if i < 0 || i > strings.Index(sec, "- Note:") {
		t.Fatalf("no roles subsection before the notes:\n%s", sec)
	}
	for _, want := range []string{"#### Locks", "#### A dead holder's lock", "#### Pub/sub: the highest", "#### Pub/sub: every step", "#### Rate limit",
		"| 1 subscriber | publishes/s | 4000", "CPU-s / 1,000 deliveries: postgres"} {
		if !strings.Contains(sec[i:], want) {
			t.Errorf("the roles subsection lacks %q", want)
		}
	}
	want := map[string]string{"a Postgres lock in Redis' place": Holds, "Postgres slower at locks, limits and pub/sub": Holds,
		"pub/sub at tens of thousands/s needs Redis": Holds, "no rate limiter in Postgres": DoesNotHold}
	for _, c := range Claims(runs) {
		if v, ok := want[c.Short]; ok {
			if c.Verdict != v {
				t.Errorf("%q: %s (%s; %s), want %s", c.Short, c.Verdict, c.Measured, c.Why, v)
			}
			delete(want, c.Short)
		}
	}
	if len(want) > 0 {
		t.Errorf("claims missing: %v", want)
	}
}

// TestCacheCardRoles: the cache card says, per role, what each side
// measured (the pub/sub ceiling with its bound), and a role missing from
// the results is "not measured", never a number.
func TestCacheCardRoles(t *testing.T) {
	t.Parallel()
	var card string
	for _, v := range Verdicts(fixture()) {
		if v.Pair == pairs.Cache {
			card = Card(v)
			if len(v.Roles) != 3 {
				t.Fatalf("roles: %q, want a sentence per role", v.Roles)
			}
			got := map[string]RoleLimit{}
			for _, l := range v.RoleLimits {
				got[l.Role+"/"+l.Point] = l
			}
			if l := got[RolePubSub+"/1 subscriber"]; l.Subscribers != 1 || !l.Ceiling || l.PG.Value != 4000 || l.Spec.Value != 16000 {
				t.Errorf("pub/sub limit of one subscriber: %+v", l)
			}
			if l := got[RoleLocks+"/16 contenders on 8 names"]; l.Ceiling || !l.PG.OK() || !l.Spec.OK() || l.PG.Unit != " cycles/s" {
				t.Errorf("locks' limit: %+v (all: %+v)", l, v.RoleLimits)
			}
			if len(v.RoleLimits) != 3 {
				t.Errorf("role limits: %+v, want pub/sub, locks and rate limits", v.RoleLimits)
			}
		}
	}
	for _, want := range []string{"**Beyond the cache**", "**Locks** (16 contenders on 8 names", "**Pub/sub**", "1 subscriber: Postgres 4,000/s", "Redis 16,000/s",
		"**Rate limits** (32 clients, 200 per 1s on one key)", "windows admitting more than the limit: Postgres 0, Redis 0"} {
		if !strings.Contains(card, want) {
			t.Errorf("the cache card lacks %q:\n%s", want, card)
		}
	}
	for _, l := range rolesLines(runs{}) {
		if !strings.HasSuffix(l, "not measured in these results") {
			t.Errorf("no roles measured: %q", l)
		}
	}
}
