package report

import (
	"bytes"
	"fmt"
	"math"
	"strings"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/scenario"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// CacheTitle is the heading of the cache pair's RESULTS.md section.
const CacheTitle = "Cache: redis vs no-redis"

// The cache modes the claims compare: the Postgres cache table
// (UNLOGGED), Redis, the in-process cache, the logged table and Redis'
// client-side caching (results before it was built lack it).
const (
	modeUnlogged   = "unlogged"
	modeRedis      = "redis"
	modeLocal      = "local"
	modeLogged     = "logged"
	modeClientSide = "client-side"
)

// cacheRow is one metric row of a cache table.
type cacheRow struct {
	label  string
	metric driver.Metric
}

// cacheTable writes one table of ps: a row per point and metric, a
// column per mode (the points' sides).
func cacheTable(b *bytes.Buffer, ps []*driver.Point, rows []cacheRow) {
	if len(ps) == 0 {
		return
	}
	sides := ps[0].Sides
	fmt.Fprintf(b, "| point | metric | %s |\n|---|---|%s\n", strings.Join(sides, " | "), strings.Repeat("---|", len(sides)))
	for _, p := range ps {
		for _, row := range rows {
			m := p.Find(row.metric)
			if m == nil {
				continue
			}
			cells := make([]string, len(sides))
			for i, s := range sides {
				a, ok := m.Sides[s]
				cells[i] = cell(a, ok)
			}
			fmt.Fprintf(b, "| %s | %s | %s |\n", p.Name, row.label, strings.Join(cells, " | "))
		}
		for _, e := range sideErrors(p) {
			fmt.Fprintf(b, "\nError, %s %s: %s\n", p.Scenario, p.Name, md(e))
		}
	}
	b.WriteString("\n")
}

// cpuRows are the CPU-seconds per 1,000 operations of each process group.
var cpuRows = []cacheRow{
	{"CPU-s / 1,000 ops: service", scenario.MetricCPUPerKOf.Of("service")},
	{"CPU-s / 1,000 ops: postgres", scenario.MetricCPUPerKOf.Of("postgres")},
	{"CPU-s / 1,000 ops: redis-server", scenario.MetricCPUPerKOf.Of("redis")},
}

// CacheSection renders the cache run's section of RESULTS.md, or "" when
// r is not a cache run.
func CacheSection(r *driver.Run) string {
	if r == nil || r.Command != pairs.Cache {
		return ""
	}
	var b bytes.Buffer
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	rs := runs{pairs.Cache: r}
	w("\n## %s\n\n", CacheTitle)
	if s := settingsLine(r); s != "" {
		b.WriteString(settingsBlock(s))
	}
	w("Every mode is a column, driven identically: `unlogged` and `logged` are no-redis with `CACHE_MODE=unlogged` (`CACHE_TABLE=unlogged` or `logged`), `local` no-redis' in-process cache, `redis` the redis service, `client-side` the redis service with `CACHE_MODE=client-side` (a copy in the process, invalidated by Redis' tracking pushes; runs before it was built lack the column). Cells are the median across rounds (min–max).\n\n")
	if ps := rs.points(pairs.Cache, scenario.CacheProfileScenario); len(ps) > 0 {
		w("### Products over a Zipf key set (open loop, same rate on every mode)\n\n")
		cacheTable(&b, ps, append([]cacheRow{
			{"client p50 ms", driver.ClientP50}, {"client p99 ms", driver.ClientP99}, {"errors", driver.ClientErrors},
			{"shed (503)", driver.ClientShed}, {"hit ratio", scenario.MetricHitRatio}, {"origin loads", driver.CounterOriginLoads},
		}, cpuRows...))
	}
	kv := append(rs.points(pairs.Cache, scenario.CacheKVWriteScenario), rs.points(pairs.Cache, scenario.CacheKVReadScenario)...)
	if len(kv) > 0 {
		w("### kv writes, then reads of what was written: logged vs unlogged\n\n")
		named := make([]*driver.Point, len(kv))
		for i, p := range kv {
			c := *p
			c.Name = strings.TrimPrefix(string(p.Scenario), "cache.") + " " + p.Name
			named[i] = &c
		}
		cacheTable(&b, named, append([]cacheRow{{"client p50 ms", driver.ClientP50}, {"client p99 ms", driver.ClientP99}, {"errors", driver.ClientErrors}, {"shed (503)", driver.ClientShed}}, cpuRows...))
	}
	if ps := rs.points(pairs.Cache, scenario.CacheRawScenario); len(ps) > 0 {
		w("### Lookup by key without HTTP (pgx SELECT by primary key vs go-redis GET, one connection, one at a time)\n\n")
		cacheTable(&b, ps, []cacheRow{{"p50 ms", driver.ClientP50}, {"p99 ms", driver.ClientP99}, {"lookups/s", driver.ClientOKRate}})
	}
	if ps := rs.points(pairs.Cache, scenario.CacheStampedeScenario); len(ps) > 0 {
		w("### Stampede: concurrent GETs of one cold key (origin loads from /stats)\n\n")
		cacheTable(&b, ps, []cacheRow{{"origin loads, one instance", scenario.MetricStampedeOriginLoadsOf.Of(scenario.StampedeOneInstance)}, {"origin loads, two instances", scenario.MetricStampedeOriginLoadsOf.Of(scenario.StampedeTwoInstances)},
			{"ms until every GET answered, one instance", scenario.MetricStampedeElapsedOf.Of(scenario.StampedeOneInstance)}, {"failed GETs", scenario.MetricStampedeErrorsOf.Of(scenario.StampedeOneInstance)}})
	}
	if ps := rs.points(pairs.Cache, scenario.CacheStalenessScenario); len(ps) > 0 {
		w("### Staleness after an out-of-band `UPDATE products ... WHERE` (10 rows, through pgx)\n\n")
		w("Milliseconds until both instances of a mode serve the new value; **TTL-bound** when the window lasts until `PRODUCT_TTL` (more than half of it) or past it.\n\n")
		p := ps[0]
		w("| mode | ms until every instance is fresh | |\n|---|---|---|\n")
		for _, s := range p.Sides {
			v, ok := median(p, scenario.MetricStaleMS, s)
			fresh, _ := sideMin(p.Find(scenario.MetricFresh), s)
			ttl, _ := median(p, scenario.MetricStaleTTLMS, s)
			label := ""
			switch {
			case !ok || fresh < 1:
				label = "**TTL-bound** (stale past the TTL in a round)"
			case ttl > 0 && v > ttl/2:
				label = fmt.Sprintf("**TTL-bound** (TTL %s ms)", num(ttl))
			}
			a := p.Find(scenario.MetricStaleMS)
			var agg driver.Agg
			if a != nil {
				agg, ok = a.Sides[s]
			}
			w("| %s | %s | %s |\n", s, cell(agg, ok), label)
		}
		w("\n")
	}
	b.WriteString(cacheRolesSection(r))
	for _, n := range notesOf(r) {
		w("- Note: %s\n", md(n))
	}
	return b.String()
}

// sideMin returns a side's minimum across rounds of m.
func sideMin(m *driver.MetricSummary, side string) (float64, bool) {
	if m == nil {
		return 0, false
	}
	a, ok := m.Sides[side]
	return a.Min, ok
}

// The cache claims' thresholds.
const (
	// rawLookupRatio is the claimed Postgres ÷ Redis raw lookup p50.
	rawLookupRatio = 6.5
	// unloggedWriteClaim is the claimed logged ÷ unlogged write cost.
	unloggedWriteClaim = 3.0
	// readsUnchanged is how far the logged ÷ unlogged read p50 may be
	// from 1 and still be "unchanged".
	readsUnchanged = 0.25
)

// httpFloor names this machine's HTTP floor: the fastest median client
// p50 of any cache mode over HTTP, a figure no mode can go below here.
func httpFloor(in claimInputs) string {
	best, where := math.Inf(1), ""
	for _, sc := range []driver.ScenarioName{scenario.CacheProfileScenario, scenario.CacheKVWriteScenario, scenario.CacheKVReadScenario} {
		for _, p := range in.rs.points(pairs.Cache, sc) {
			for _, s := range p.Sides {
				if v, ok := median(p, driver.ClientP50, s); ok && v > 0 && v < best {
					best, where = v, fmt.Sprintf("%s %s %s", s, strings.TrimPrefix(string(sc), "cache."), p.Name)
				}
			}
		}
	}
	if where == "" {
		return ""
	}
	return fmt.Sprintf("the HTTP floor here is about %s ms (the fastest client p50 of any mode, %s)", num(best), where)
}

// cacheClaims are the cache pair's claims (issue 10), appended to
// claimTable.
var cacheClaims = []claimSpec{
	{pair: pairs.Cache, short: fmt.Sprintf("raw lookup by key: Redis %s× ahead", num(rawLookupRatio)),
		claimText: texts("cache raw lookup", figures),
		evaluate: atPoint(pairs.Cache, scenario.CacheRawScenario, "", "cache raw lookup", func(_ claimInputs, p *driver.Point) outcome {
			v, ok := medians(at{p, driver.ClientP50, scenario.RawSidePostgres}, at{p, driver.ClientP50, scenario.RawSideRedis})
			if !ok || v[1] <= 0 {
				return outcome{missing: "no lookup latency on both sides"}
			}
			r := v[0] / v[1]
			o := outcome{measured: fmt.Sprintf("p50 %s ms (postgres) vs %s ms (redis): %s×", num(v[0]), num(v[1]), num(r)), holds: around(rawLookupRatio, rawLookupRatio).has(r)}
			b := around(rawLookupRatio, rawLookupRatio)
			switch {
			case r > 1 && r < b.lo:
				o.note = fmt.Sprintf("Redis is ahead (%s×), as claimed, but by less than the claimed %s× (%s×)", num(r), num(rawLookupRatio), b)
			case r > b.hi:
				o.note = fmt.Sprintf("Redis is further ahead (%s×) than the claimed %s×", num(r), num(rawLookupRatio))
			case r <= 1:
				o.note = fmt.Sprintf("Redis is not ahead (%s×)", num(r))
			}
			return o
		})},
	{pair: pairs.Cache, short: "Redis ahead behind HTTP",
		claimText: texts("cache behind HTTP", figures),
		evaluate: func(in claimInputs) outcome {
			var ties []string
			behind := false
			o := atEveryPoint(pairs.Cache, scenario.CacheProfileScenario, pairs.Cache, func(claimInputs) string { return "p50 redis vs unlogged: " }, func(p *driver.Point) (string, bool) {
				v, ok := medians(at{p, driver.ClientP50, modeRedis}, at{p, driver.ClientP50, modeUnlogged})
				if !ok {
					return p.Name + ": " + notRecorded, false
				}
				part := fmt.Sprintf("%s %s vs %s ms", p.Name, num(v[0]), num(v[1]))
				switch {
				case tie(v[0], v[1]):
					part += " (a tie)"
					ties = append(ties, p.Name)
				case v[0] > v[1]:
					behind = true
				}
				if c, ok := optionalMedians(at{p, scenario.MetricCPUPerKOf.Of("redis"), modeRedis}, at{p, scenario.MetricCPUPerKOf.Of("postgres"), modeUnlogged}); ok {
					part += fmt.Sprintf(" (CPU-s/1k ops: redis-server %s, postgres %s)", num(c[0]), num(c[1]))
				}
				return part, v[0] < v[1] && !tie(v[0], v[1])
			})(in)
			o.floor = httpFloor(in)
			if len(ties) > 0 && !behind && o.missing == "" {
				o.inconclusive = fmt.Sprintf("a tie (within %s%%) at %s decides no direction, and Redis is behind at no profile", num(100*tieWithin), strings.Join(ties, ", "))
			}
			return o
		}},
	{pair: pairs.Cache, short: "UNLOGGED writes faster",
		claimText: texts("cache unlogged writes", figures),
		evaluate: func(in claimInputs) outcome {
			wp, rp := in.rs.point(pairs.Cache, scenario.CacheKVWriteScenario, ""), in.rs.point(pairs.Cache, scenario.CacheKVReadScenario, "")
			if wp == nil || rp == nil {
				return notRun("cache kv write and read")
			}
			v, ok := medians(at{wp, driver.ClientP50, modeLogged}, at{wp, driver.ClientP50, modeUnlogged},
				at{rp, driver.ClientP50, modeLogged}, at{rp, driver.ClientP50, modeUnlogged})
			if !ok || v[1] <= 0 || v[3] <= 0 {
				return outcome{missing: "no kv latency on both tables"}
			}
			w, r := v[0]/v[1], v[2]/v[3]
			return outcome{measured: fmt.Sprintf("PUT p50 %s ms logged vs %s ms unlogged (%s×); GET p50 %s vs %s ms (%s×)", num(v[0]), num(v[1]), num(w), num(v[2]), num(v[3]), num(r)),
				holds: w >= unloggedWriteClaim/tolerance && r >= 1-readsUnchanged && r <= 1+readsUnchanged,
				floor: joinWhy(commitFloor(in), httpFloor(in))}
		}},
	{pair: pairs.Cache, short: "in-process cache beats any network cache",
		claimText: texts("cache in-process", figures),
		evaluate: func(in claimInputs) outcome {
			var parts []string
			holds := true
			for _, p := range []*driver.Point{in.rs.point(pairs.Cache, scenario.CacheProfileScenario, "read_heavy"), in.rs.point(pairs.Cache, scenario.CacheKVReadScenario, "")} {
				if p == nil {
					return notRun("cache read-heavy and kv read")
				}
				v, ok := medians(at{p, driver.ClientP50, modeLocal}, at{p, driver.ClientP50, modeRedis}, at{p, driver.ClientP50, modeUnlogged})
				if !ok {
					return outcome{missing: "no " + string(p.Scenario) + " latency on local, redis and unlogged"}
				}
				part := fmt.Sprintf("%s %s: local %s, redis %s, unlogged %s", strings.TrimPrefix(string(p.Scenario), "cache."), p.Name, num(v[0]), num(v[1]), num(v[2]))
				if c, ok := median(p, driver.ClientP50, modeClientSide); ok {
					part += fmt.Sprintf(", client-side %s", num(c))
				}
				parts = append(parts, part+" ms")
				holds = holds && v[0] < v[1] && v[0] < v[2]
			}
			return outcome{measured: strings.Join(parts, "; "), holds: holds}
		}},
	{pair: pairs.Cache, short: "stampede computed once in-process",
		claimText: texts("cache stampede", figures),
		evaluate: atPoint(pairs.Cache, scenario.CacheStampedeScenario, "", "cache stampede", func(_ claimInputs, p *driver.Point) outcome {
			one, two := p.Find(scenario.MetricStampedeOriginLoadsOf.Of(scenario.StampedeOneInstance)), p.Find(scenario.MetricStampedeOriginLoadsOf.Of(scenario.StampedeTwoInstances))
			if one == nil || two == nil {
				return outcome{missing: "no origin loads recorded"}
			}
			a, ok1 := one.Sides[modeLocal]
			b, ok2 := two.Sides[modeLocal]
			if !ok1 || !ok2 {
				return outcome{missing: "the local mode was not measured"}
			}
			var parts []string
			for _, s := range p.Sides {
				x, y := one.Sides[s], two.Sides[s]
				parts = append(parts, fmt.Sprintf("%s %s / %s", s, num(x.Max), num(y.Max)))
			}
			return outcome{measured: fmt.Sprintf("%s: most origin loads in a round, one / two instances: %s", p.Name, strings.Join(parts, "; ")),
				holds: a.Min >= 1 && a.Max == 1 && b.Max <= 2}
		})},
	{pair: pairs.Cache, short: "Postgres as the invalidation source",
		claimText: texts("cache invalidation", figures),
		evaluate: atPoint(pairs.Cache, scenario.CacheStalenessScenario, "", "cache staleness", func(_ claimInputs, p *driver.Point) outcome {
			fresh, ok := sideMin(p.Find(scenario.MetricFresh), modeLocal)
			if !ok {
				return outcome{missing: "the local mode was not measured"}
			}
			var parts []string
			for _, s := range p.Sides {
				if f, _ := sideMin(p.Find(scenario.MetricFresh), s); f < 1 {
					parts = append(parts, s+" stale past the TTL in a round")
				} else if v, ok := sideMax(p.Find(scenario.MetricStaleMS), s); ok {
					parts = append(parts, fmt.Sprintf("%s %s ms", s, num(v)))
				} else {
					parts = append(parts, s+" stale past the TTL")
				}
			}
			worst, ok := sideMax(p.Find(scenario.MetricStaleMS), modeLocal)
			return outcome{measured: fmt.Sprintf("%s, longest window: %s", p.Name, strings.Join(parts, "; ")), holds: fresh == 1 && ok && worst <= 1000}
		})},
}

func init() {
	claimTable = append(claimTable, cacheClaims...)
}

// Cache is the cache pair's Pair: its whole section, written from its
// run (every mode), with the staleness chart.
func Cache() Pair {
	return Pair{Name: pairs.Cache, Title: CacheTitle, section: cacheSection,
		chart: &pairChart{"staleness", stalenessFile, stalenessChart}, card: "staleness",
		ceiling: rateSource{pairs.Cache, scenario.CacheReadCeiling, "one read per request"},
		verdict: cacheVerdict,
		text: cardText{question: "Postgres behind an in-process cache, or Redis?",
			pgWhen: "reads dominate and a stale value must vanish on an out-of-band `UPDATE` (NOTIFY invalidation)"},
		findings: &cacheSpec}
}

// cacheSection is the cache pair's section and its staleness chart.
func cacheSection(r *driver.Run, charts map[string]string, chartsRel string) string {
	return CacheSection(r) + "\n" + chartLine(charts, "staleness", chartsRel)
}

// sideMax returns a side's maximum across rounds of m.
func sideMax(m *driver.MetricSummary, side string) (float64, bool) {
	if m == nil {
		return 0, false
	}
	a, ok := m.Sides[side]
	return a.Max, ok
}
