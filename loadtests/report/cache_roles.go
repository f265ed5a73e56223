package report

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/scenario"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// The roles beyond the cache (issue 41): their subsection of the cache
// section and their claims, from the points and metrics package scenario
// names (cache_names.go).

// RolesTitle is the heading of the roles' subsection.
const RolesTitle = "Beyond the cache: locks, pub/sub and rate limits"

// The roles' claims' thresholds.
const (
	// tensOfThousands is the publish rate the reference's "pub/sub at
	// tens of thousands of events per second" starts at.
	tensOfThousands = 10000
	// handoverWithin is how long after a dead holder's lease the lock
	// may be handed over and still count as freed by its lease.
	handoverWithin = 1000.0
)

// rolesCPURows are the CPU-seconds per 1,000 of a point's items.
func rolesCPURows(prefix driver.MetricPrefix, items string) []cacheRow {
	var out []cacheRow
	for _, g := range []string{"service", "postgres", "redis", "driver"} {
		label := map[string]string{"redis": "redis-server", "driver": "load driver"}[g]
		if label == "" {
			label = g
		}
		out = append(out, cacheRow{fmt.Sprintf("CPU-s / 1,000 %s: %s", items, label), prefix.Of(g)})
	}
	return out
}

// cacheRolesSection renders the roles' subsection of the cache section,
// or "" when r has none of their points.
func cacheRolesSection(r *driver.Run) string {
	if r == nil || r.Command != pairs.Cache {
		return ""
	}
	rs := runs{pairs.Cache: r}
	if len(rs.points(pairs.Cache, scenario.CacheLockScenario)) == 0 && len(rs.points(pairs.Cache, scenario.CachePubSubScenario)) == 0 && len(rs.points(pairs.Cache, scenario.CacheRateLimitScenario)) == 0 {
		return ""
	}
	var b bytes.Buffer
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("### %s\n\n", RolesTitle)
	w("The roles teams use Redis for beside a cache, on both sides behind the same contract: `no-redis` is a lease row per lock (token from a sequence), NOTIFY on one LISTEN connection per process, one upsert per take on an UNLOGGED table; `redis` is `SET NX PX` with Lua release (token from `INCR`), one `PSUBSCRIBE` connection per process, `INCR` + `PEXPIRE` in one script ([docs/cache.md](docs/cache.md#beyond-the-cache-locks-pubsub-and-rate-limits)). One instance per side; cells are the median across rounds (min–max).\n\n")
	if ps := rs.points(pairs.Cache, scenario.CacheLockScenario); len(ps) > 0 {
		w("#### Locks: acquire + release cycles (closed loop; a 409 is retried at once)\n\n")
		cacheTable(&b, ps, append([]cacheRow{
			{"cycles/s", scenario.MetricCyclesPerS}, {"cycle p50 ms", scenario.MetricCycleP50}, {"cycle p99 ms", scenario.MetricCycleP99},
			{"acquire p50 ms (409s included)", scenario.MetricAcquireP50}, {"acquire p99 ms", scenario.MetricAcquireP99}, {"409s/s", scenario.MetricConflictsPerS},
			{"double grants", scenario.MetricOverlaps}, {"tokens not above the name's last", scenario.MetricTokenRegress}, {"errors", scenario.MetricRoleErrors},
		}, rolesCPURows(scenario.MetricCPUPerKOf, "cycles")...))
	}
	if ps := rs.points(pairs.Cache, scenario.CacheLockHandoverScenario); len(ps) > 0 {
		w("#### A dead holder's lock: ms until another client (polling every 5 ms) got it\n\n")
		cacheTable(&b, ps, []cacheRow{{"lease ms", scenario.MetricLeaseMS}, {"ms until another holder", scenario.MetricHandoverMS},
			{"ms after the lease", scenario.MetricAfterLeaseMS}, {"new token higher (1 = yes)", scenario.MetricTokenHigher}})
	}
	if ps := rs.points(pairs.Cache, scenario.CachePubSubCeilingScenario); len(ps) > 0 {
		w("#### Pub/sub: the highest publish rate each side passed (delivery p99 within the bound, nothing missed)\n\n")
		cacheTable(&b, ps, []cacheRow{{"publishes/s", scenario.MetricMaxPublishRate}, {"deliveries/s at it", scenario.MetricMaxDeliveriesPerS},
			{"the ladder's top passed (1 = yes: a lower bound)", scenario.MetricLadderCapped}})
	}
	if ps := rs.points(pairs.Cache, scenario.CachePubSubScenario); len(ps) > 0 {
		w("#### Pub/sub: every step of the ladders (– : that side's ladder had stopped below)\n\n")
		cacheTable(&b, ps, append([]cacheRow{
			{"publishes/s answered", scenario.MetricPublishedPerS}, {"deliveries/s", scenario.MetricDeliveriesPerS}, {"delivery p50 ms", scenario.MetricDeliveryP50},
			{"delivery p99 ms", scenario.MetricDeliveryP99}, {"missed", scenario.MetricMissed}, {"subscriptions ended", scenario.MetricEnded}, {"passed (1 = yes)", scenario.MetricPass},
		}, rolesCPURows(scenario.MetricCPUPerKDeliveries, "deliveries")...))
	}
	if ps := rs.points(pairs.Cache, scenario.CacheRateLimitScenario); len(ps) > 0 {
		w("#### Rate limit: concurrent clients taking from one key (closed loop)\n\n")
		cacheTable(&b, ps, append([]cacheRow{
			{"takes/s", scenario.MetricTakesPerS}, {"take p50 ms", scenario.MetricTakeP50}, {"take p99 ms", scenario.MetricTakeP99}, {"limit per window", scenario.MetricLimit},
			{"windows", scenario.MetricWindows}, {"most admitted in a window", scenario.MetricAdmittedMax}, {"fewest admitted in a full window", scenario.MetricAdmittedMin},
			{"windows over the limit", scenario.MetricOverLimitWindows}, {"errors", scenario.MetricRoleErrors},
		}, rolesCPURows(scenario.MetricCPUPerKOf, "takes")...))
	}
	return b.String()
}

// contendedLock is the lock point with contenders (the one that is not
// "uncontended").
func contendedLock(rs runs) *driver.Point {
	for _, p := range rs.points(pairs.Cache, scenario.CacheLockScenario) {
		if p.Name != "uncontended" {
			return p
		}
	}
	return nil
}

// firstPubSubStep is the lowest-rate step of the one-subscriber ladder.
func firstPubSubStep(in claimInputs) *driver.Point {
	for _, p := range in.rs.points(pairs.Cache, scenario.CachePubSubScenario) {
		if strings.HasPrefix(p.Name, scenario.SubscribersName(1)+", ") {
			return p
		}
	}
	return nil
}

// cacheRolesClaims are the reference's Redis sentences the roles decide,
// appended to claimTable.
var cacheRolesClaims = []claimSpec{
	{pair: pairs.Cache, short: "a Postgres lock in Redis' place",
		claimText: texts("cache lock", figures),
		evaluate: func(in claimInputs) outcome {
			c, h := contendedLock(in.rs), in.rs.point(pairs.Cache, scenario.CacheLockHandoverScenario, "")
			if c == nil || h == nil {
				return notRun("cache roles' lock")
			}
			v, ok := medians(at{c, scenario.MetricOverlaps, pairs.NoRedis}, at{c, scenario.MetricTokenRegress, pairs.NoRedis},
				at{h, scenario.MetricAfterLeaseMS, pairs.NoRedis}, at{h, scenario.MetricTokenHigher, pairs.NoRedis})
			if !ok {
				return outcome{missing: "no lock figures for no-redis"}
			}
			o := outcome{measured: fmt.Sprintf("no-redis, %s: %s double grants, %s tokens not increasing; handover %s ms after a %s ms lease",
				c.Name, num(v[0]), num(v[1]), num(v[2]), lease(h)),
				holds: v[0] == 0 && v[1] == 0 && v[2] <= handoverWithin && v[3] == 1}
			if r, ok := optionalMedians(at{c, scenario.MetricOverlaps, pairs.Redis}, at{h, scenario.MetricAfterLeaseMS, pairs.Redis}); ok {
				o.measured += fmt.Sprintf(" (redis: %s double grants, handover %s ms after the lease)", num(r[0]), num(r[1]))
			}
			return o
		}},
	{pair: pairs.Cache, short: "Postgres slower at locks, limits and pub/sub",
		claimText: texts("cache roles slower", figures),
		evaluate: func(in claimInputs) outcome {
			lk, rl, ps := in.rs.point(pairs.Cache, scenario.CacheLockScenario, "uncontended"), in.rs.point(pairs.Cache, scenario.CacheRateLimitScenario, ""), firstPubSubStep(in)
			if lk == nil || rl == nil || ps == nil {
				return notRun("cache roles")
			}
			var parts, ties []string
			holds, behind := true, false
			for _, q := range []struct {
				what   string
				p      *driver.Point
				metric driver.Metric
			}{{"lock cycle", lk, scenario.MetricCycleP50}, {"take", rl, scenario.MetricTakeP50}, {"delivery at " + ps.Name, ps, scenario.MetricDeliveryP50}} {
				v, ok := medians(at{q.p, q.metric, pairs.NoRedis}, at{q.p, q.metric, pairs.Redis})
				if !ok {
					return outcome{missing: "no " + q.what + " p50 on both sides"}
				}
				part := fmt.Sprintf("%s p50 %s vs %s ms", q.what, num(v[0]), num(v[1]))
				switch {
				case tie(v[0], v[1]):
					part += " (a tie)"
					ties = append(ties, q.what)
					holds = false
				case v[1] >= v[0]:
					behind, holds = true, false
				}
				parts = append(parts, part)
			}
			o := outcome{measured: "no-redis vs redis: " + strings.Join(parts, "; "), holds: holds}
			if len(ties) > 0 && !behind {
				o.inconclusive = fmt.Sprintf("a tie (within %s%%) at %s decides no direction, and Redis is behind at none", num(100*tieWithin), strings.Join(ties, ", "))
			}
			return o
		}},
	{pair: pairs.Cache, short: "pub/sub at tens of thousands/s needs Redis",
		claimText: texts("cache pub/sub rate", figures),
		evaluate: atPoint(pairs.Cache, scenario.CachePubSubCeilingScenario, scenario.SubscribersName(1), "cache roles' pub/sub", func(in claimInputs, p *driver.Point) outcome {
			v, ok := medians(at{p, scenario.MetricMaxPublishRate, pairs.NoRedis}, at{p, scenario.MetricMaxPublishRate, pairs.Redis})
			if !ok {
				return outcome{missing: "no pub/sub ceiling on both sides"}
			}
			o := outcome{measured: fmt.Sprintf("one subscriber: no-redis %s/s, redis %s/s", num(v[0]), num(v[1])),
				holds: v[1] >= tensOfThousands && v[0] < tensOfThousands}
			for _, q := range in.rs.points(pairs.Cache, scenario.CachePubSubCeilingScenario) {
				if q.Name == p.Name {
					continue
				}
				if w, ok := optionalMedians(at{q, scenario.MetricMaxPublishRate, pairs.NoRedis}, at{q, scenario.MetricMaxPublishRate, pairs.Redis}); ok {
					o.measured += fmt.Sprintf("; %s: %s/s vs %s/s", q.Name, num(w[0]), num(w[1]))
				}
			}
			if v[0] < tensOfThousands && v[1] < tensOfThousands {
				o.unmeasurable = fmt.Sprintf("neither side passed %s publishes/s on this machine: where Redis ends is not measured here", count(tensOfThousands))
			}
			return o
		})},
	{pair: pairs.Cache, short: "no rate limiter in Postgres",
		claimText: texts("cache rate limiter", figures),
		evaluate: atPoint(pairs.Cache, scenario.CacheRateLimitScenario, "", "cache roles' rate limit", func(_ claimInputs, p *driver.Point) outcome {
			v, ok := medians(at{p, scenario.MetricOverLimitWindows, pairs.NoRedis}, at{p, scenario.MetricAdmittedMin, pairs.NoRedis},
				at{p, scenario.MetricAdmittedMax, pairs.NoRedis}, at{p, scenario.MetricLimit, pairs.NoRedis}, at{p, scenario.MetricTakesPerS, pairs.NoRedis})
			if !ok {
				return outcome{missing: "no per-window figures for no-redis"}
			}
			accurate := v[0] == 0 && v[1] == v[3] && v[2] == v[3]
			o := outcome{measured: fmt.Sprintf("no-redis, %s: %s takes/s, admitted per window %s–%s of a limit of %s, %s windows over it",
				p.Name, num(v[4]), num(v[1]), num(v[2]), num(v[3]), num(v[0])), holds: !accurate}
			if r, ok := optionalMedians(at{p, scenario.MetricTakesPerS, pairs.Redis}, at{p, scenario.MetricOverLimitWindows, pairs.Redis}); ok {
				o.measured += fmt.Sprintf(" (redis: %s takes/s, %s windows over the limit)", num(r[0]), num(r[1]))
			}
			return o
		})},
}

// lease is the handover point's lease in ms, as text.
func lease(p *driver.Point) string {
	if v, ok := medianOf(p, scenario.MetricLeaseMS, pairs.NoRedis, false); ok {
		return num(v)
	}
	return "?"
}

func init() { claimTable = append(claimTable, cacheRolesClaims...) }

// roleFigure is side's median of metric at p with its range across
// rounds, or why there is none.
func roleFigure(p *driver.Point, metric driver.Metric, side, unit string) Figure {
	f := pointFigure(p, metric, side, unit)
	if !f.OK() || p == nil {
		return f
	}
	if m := p.Find(metric); m != nil {
		if a, ok := m.Sides[side]; ok && a.N > 1 {
			f.Lo, f.Hi, f.N = a.Min, a.Max, a.N
		}
	}
	return f
}

// The roles of a RoleLimit.
const (
	// RolePubSub is pub/sub: LISTEN/NOTIFY against PUBLISH/SUBSCRIBE.
	RolePubSub = "pub/sub"
	// RoleLocks is locks with leases and fencing tokens.
	RoleLocks = "locks"
	// RoleRateLimits is fixed-window rate limits.
	RoleRateLimits = "rate limits"
)

// RoleLimit is one role beyond the cache, measured on both sides.
type RoleLimit struct {
	// Role is RolePubSub, RoleLocks or RoleRateLimits.
	Role string
	// Point names what was measured: "1 subscriber", "16 contenders on
	// 8 names", "32 clients".
	Point string
	// Subscribers is a pub/sub point's subscribers per channel (0 for
	// the other roles).
	Subscribers int
	// Ceiling is true when PG and Spec are the highest rate a majority
	// of rounds passed under the bound (pub/sub), false when they are
	// the rate the clients drove (locks, rate limits: closed loops,
	// the most they did, not a ceiling under a latency bound).
	Ceiling bool
	// PG and Spec are the Postgres side's and Redis' figures, per
	// second.
	PG, Spec Figure
}

// roleLimits are the RoleLimits of the measured roles, pub/sub by
// subscriber count.
func roleLimits(rs runs) []RoleLimit {
	pg, rd := pairs.NoRedis, pairs.Redis
	var out []RoleLimit
	for _, p := range rs.points(pairs.Cache, scenario.CachePubSubCeilingScenario) {
		n, _ := median(p, scenario.MetricSubscribers, pg)
		l := RoleLimit{Role: RolePubSub, Point: p.Name, Subscribers: int(n), Ceiling: true,
			PG: roleFigure(p, scenario.MetricMaxPublishRate, pg, "/s"), Spec: roleFigure(p, scenario.MetricMaxPublishRate, rd, "/s")}
		for side, f := range map[string]*Figure{pg: &l.PG, rd: &l.Spec} {
			if v, ok := median(p, scenario.MetricLadderCapped, side); ok && v == 1 && f.OK() {
				f.AtLeast = true
			}
		}
		out = append(out, l)
	}
	if p := contendedLock(rs); p != nil {
		out = append(out, RoleLimit{Role: RoleLocks, Point: p.Name,
			PG: roleFigure(p, scenario.MetricCyclesPerS, pg, " cycles/s"), Spec: roleFigure(p, scenario.MetricCyclesPerS, rd, " cycles/s")})
	}
	if p := rs.point(pairs.Cache, scenario.CacheRateLimitScenario, ""); p != nil {
		out = append(out, RoleLimit{Role: RoleRateLimits, Point: p.Name,
			PG: roleFigure(p, scenario.MetricTakesPerS, pg, " takes/s"), Spec: roleFigure(p, scenario.MetricTakesPerS, rd, " takes/s")})
	}
	return out
}

// rolesLines are the cache card's sentences on the roles beyond the
// cache, one per role, each true alone: the measured figures of both
// sides, or that the role was not measured in these results.
func rolesLines(rs runs) []string {
	pg, rd := pairs.NoRedis, pairs.Redis
	var locks, limits *RoleLimit
	var ps []string
	for _, l := range roleLimits(rs) {
		switch l.Role {
		case RoleLocks:
			locks = &l
		case RoleRateLimits:
			limits = &l
		case RolePubSub:
			ps = append(ps, fmt.Sprintf("%s: Postgres %s, Redis %s", l.Point, publishRate(l.PG), publishRate(l.Spec)))
		}
	}
	var out []string
	if locks == nil {
		out = append(out, "**Locks:** not measured in these results")
	} else {
		c := contendedLock(rs)
		line := fmt.Sprintf("**Locks** (%s, acquire + release): Postgres (a lease row) %s, Redis (`SET NX PX`) %s; double grants: Postgres %s, Redis %s",
			locks.Point, locks.PG, locks.Spec, roleFigure(c, scenario.MetricOverlaps, pg, ""), roleFigure(c, scenario.MetricOverlaps, rd, ""))
		if h := rs.point(pairs.Cache, scenario.CacheLockHandoverScenario, ""); h != nil {
			line += fmt.Sprintf("; a dead holder's lock passed on after its %s ms lease plus Postgres %s, Redis %s",
				lease(h), roleFigure(h, scenario.MetricAfterLeaseMS, pg, " ms"), roleFigure(h, scenario.MetricAfterLeaseMS, rd, " ms"))
		}
		out = append(out, line)
	}
	if len(ps) == 0 {
		out = append(out, "**Pub/sub:** not measured in these results")
	} else {
		out = append(out, "**Pub/sub** (LISTEN/NOTIFY against PUBLISH/SUBSCRIBE; the highest publish rate a majority of rounds passed with every message delivered and delivery p99 < 100 ms): "+strings.Join(ps, "; "))
	}
	if limits == nil {
		out = append(out, "**Rate limits:** not measured in these results")
	} else {
		p := rs.point(pairs.Cache, scenario.CacheRateLimitScenario, "")
		out = append(out, fmt.Sprintf("**Rate limits** (%s on one key): Postgres (an upsert on an UNLOGGED table) %s, Redis (`INCR` + `PEXPIRE`) %s; windows admitting more than the limit: Postgres %s, Redis %s",
			limits.Point, limits.PG, limits.Spec, roleFigure(p, scenario.MetricOverLimitWindows, pg, ""), roleFigure(p, scenario.MetricOverLimitWindows, rd, "")))
	}
	return out
}

// publishRate is a pub/sub ceiling as the card prints it: a ceiling of 0
// in every round is "no rate passed in any round", not a rate.
func publishRate(f Figure) string {
	if f.OK() && f.Value == 0 && f.Hi == 0 {
		return "no rate passed in any round"
	}
	return rateFigure(f)
}
