package report

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/scenario"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

var update = flag.Bool("update", false, "rewrite testdata/*.json from the synthetic fixture")

// fixture builds one synthetic run per pair with every scenario the
// report reads. values gives each side's metrics for a point.
func fixture() []*driver.Run {
	at := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	vs := driver.Versions{Postgres: "15.20", PostgresSettings: map[string]string{"shared_buffers": "128MB", "random_page_cost": "1.1"}, RabbitMQ: "3.10.8", Erlang: "25.2.3", Kafka: "4.3.1 (native stack jars)", Mongo: "7.0.42", MongoFlavor: "FerretDB", FerretDB: "v1.24.2"}
	machine := driver.Machine{Hostname: "fixture", OS: "linux", Arch: "amd64", CPUModel: "Test CPU", CPUs: 2, MemoryBytes: 4 << 30, GoVersion: "go1.26"}
	point := func(scenario, name string, rate float64, sides []string, m func(side string, round int) map[driver.Metric]float64) driver.Point {
		p := driver.Point{Scenario: driver.ScenarioName(scenario), Name: name, Rate: rate, DurationS: 5, Sides: sides}
		_ = driver.RunPoint(context.Background(), &p, 3, func(_ context.Context, s string, r int) (*driver.SideResult, error) {
			return &driver.SideResult{Metrics: m(s, r)}, nil
		})
		return p
	}
	ceil := func(scenario, svc string, rates ...float64) driver.Ceiling {
		c := driver.Ceiling{Scenario: driver.ScenarioName(scenario), Service: svc, Criteria: "fixture criteria"}
		for i, r := range rates {
			// A passing step with the figures the knee curve draws.
			step := map[driver.Metric]float64{"client.sent_rate": r, "client.ok_rate": r, "throughput": r, "drained": 1,
				"server.processing.p50_ms": 4, "server.processing.p99_ms": 40, "server.delivery.p50_ms": 2, "server.delivery.p99_ms": 20}
			c.Rounds = append(c.Rounds, driver.CeilingRound{Index: i, Rate: r, Steps: []driver.CeilingStep{{Rate: r, Pass: true, Metrics: step}}})
		}
		c.Rate = driver.Aggregate(rates)
		return c
	}
	newRun := func(cmd string, offset time.Duration) *driver.Run {
		r := driver.NewRun(cmd, nil, at.Add(offset))
		r.Machine, r.Versions, r.FinishedAt = machine, vs, at.Add(offset+5*time.Minute)
		r.Settings["rounds"] = 3
		return r
	}
	q := newRun("queue", 0)
	q.StartState = &driver.StartState{Mode: driver.StateFresh, Tables: []driver.TableState{
		{Schema: "queue", Table: "tasks", TotalBytes: 8192}, {Schema: "queue_rabbitmq", Table: "tasks", TotalBytes: 8192}}}
	qs := []string{"no-rabbitmq", "rabbitmq"}
	for _, rate := range []float64{500, 1000} {
		q.Points = append(q.Points, point("queue.rate", driver.Label(rate), rate, qs, func(s string, r int) map[driver.Metric]float64 {
			k := map[driver.Metric]float64{"no-rabbitmq": 1, "rabbitmq": 1.25}[driver.Metric(s)]
			return map[driver.Metric]float64{"client.p50_ms": 2 * k, "client.p99_ms": 6 * k, "client.errors": 0, "throughput": rate,
				"server.delivery.p99_ms": (4 + float64(r)) * k, "server.processing.p99_ms": (5 + float64(r)) * k}
		}))
	}
	q.Points = append(q.Points,
		point("queue.default", "1000/s", 1000, qs, func(s string, r int) map[driver.Metric]float64 {
			if s == "rabbitmq" {
				return map[driver.Metric]float64{"server.processing.p99_ms": 4, "server.send.p99_ms": 5, "throughput": 1000}
			}
			return map[driver.Metric]float64{"server.processing.p99_ms": 4, "server.send.p99_ms": 3, "throughput": 1000}
		}),
		point("queue.durable", "1000/s", 1000, qs, func(s string, r int) map[driver.Metric]float64 {
			return map[driver.Metric]float64{"server.processing.p99_ms": 11}
		}),
		// The outbox variant: rabbitmq's send p99 from 5 ms (the default
		// point's 4 × 1.25) to 2 ms, its processing p99 from 5 ms to 8 ms.
		point("queue.outbox", "1000/s", 1000, qs, func(s string, r int) map[driver.Metric]float64 {
			if s == "rabbitmq" {
				return map[driver.Metric]float64{"server.processing.p99_ms": 8, "server.send.p99_ms": 2, "throughput": 1000}
			}
			return map[driver.Metric]float64{"server.processing.p99_ms": 4, "server.send.p99_ms": 3, "throughput": 1000}
		}))
	q.Ceilings = []driver.Ceiling{ceil("queue.ceiling", "no-rabbitmq", 6000, 7000, 6500), ceil("queue.ceiling", "rabbitmq", 4000, 4000, 4500)}
	overload := func(r *driver.Run, pair string, sides []string, pct map[string]float64, ceilings map[string]float64) {
		for _, m := range []float64{2, 5} {
			p := point(pair+".overload", fmt.Sprintf("%g× ceiling", m), 0, sides, func(s string, _ int) map[driver.Metric]float64 {
				c := ceilings[s]
				// The driver's cores grow with the multiple, under
				// DriverShareLimit of the fixture's 2 CPUs at 5×
				// (claims_test.go checks the case above it).
				drv := 0.06*m + map[string]float64{"kafka": 0.05}[s]
				return map[driver.Metric]float64{"offered_rate": m * c, "ceiling_rate": c, "accepted_rate": 1.2 * c, "client.shed": 100 * m,
					"client.errors": 0, "throughput": pct[s] / 100 * c, "pct_of_ceiling": pct[s], "backlog_end": 50,
					"cores.driver": drv, "cores.service": 0.4, "cores.postgres": 0.3, scenario.MetricCoresOf.Of(map[string]string{"queue": "rabbitmq", "log": "kafka"}[pair]): 0.2,
					"cores.machine": 1.2 + drv}
			})
			r.Points = append(r.Points, p)
		}
	}
	overload(q, "queue", qs, map[string]float64{"no-rabbitmq": 90, "rabbitmq": 70}, map[string]float64{"no-rabbitmq": 6500, "rabbitmq": 4000})

	l := newRun("log", 10*time.Minute)
	ls := []string{"no-kafka", "kafka"}
	for _, rate := range []float64{100, 200} {
		l.Points = append(l.Points, point("log.rate", driver.Label(rate), rate, ls, func(s string, r int) map[driver.Metric]float64 {
			if s == "kafka" {
				return map[driver.Metric]float64{"server.write.p99_ms": 16, "server.delivery.p95_ms": 1.5}
			}
			return map[driver.Metric]float64{"server.write.p99_ms": 6, "server.delivery.p95_ms": 1.2}
		}))
	}
	l.Points = append(l.Points, point("log.sync_off", "200/s", 200, ls, func(string, int) map[driver.Metric]float64 {
		return map[driver.Metric]float64{"server.delivery.p50_ms": 170}
	}))
	l.Ceilings = []driver.Ceiling{ceil("log.ceiling", "no-kafka", 16000, 8000, 16000), ceil("log.ceiling", "kafka", 8000, 8000, 8000)}
	overload(l, "log", ls, map[string]float64{"no-kafka": 85, "kafka": 95}, map[string]float64{"no-kafka": 16000, "kafka": 8000})
	l.Points = append(l.Points, point("log.batch_throughput", "4 senders × 100", 0, ls, func(s string, _ int) map[driver.Metric]float64 {
		v := map[driver.Metric]float64{"no-kafka": 40000, "kafka": 60000}[driver.Metric(s)]
		return map[driver.Metric]float64{"accepted_rate": v * 1.2, "delivered_rate": v, "batch_throughput": v}
	}))
	for _, f := range []float64{0.25, 0.5, 0.75} {
		l.Points = append(l.Points, point("log.at_throughput", fmt.Sprintf("%.0f%%", 100*f), 0, ls, func(s string, _ int) map[driver.Metric]float64 {
			v := map[driver.Metric]float64{"no-kafka": 40000, "kafka": 60000}[driver.Metric(s)]
			return map[driver.Metric]float64{"offered_events": f * v, "batch_throughput": v, "throughput": f * v,
				"server.delivery.p50_ms": 10 * f, "server.delivery.p99_ms": 40 * f}
		}))
	}

	d := newRun("documents", 20*time.Minute)
	ds := []string{"no-mongodb", "mongodb"}
	d.Points = append(d.Points, point("documents.search", "5000 users", 20, ds, func(s string, _ int) map[driver.Metric]float64 {
		return map[driver.Metric]float64{"server.search.p95_ms": map[driver.Metric]float64{"no-mongodb": 30, "mongodb": 90}[driver.Metric(s)]}
	}))
	for _, size := range []string{"512KB", "2MB"} {
		d.Points = append(d.Points, point("documents.rewrite", size, 5, ds, func(s string, _ int) map[driver.Metric]float64 {
			return map[driver.Metric]float64{"client.rewrite.p50_ms": 40, "client.patch.p50_ms": 10, "client.rewrite.p99_ms": 80,
				"cost_ratio.p50": map[driver.Metric]float64{"no-mongodb": 4, "mongodb": 2}[driver.Metric(s)], "wal_per_op.rewrite": 600000}
		}))
	}
	for _, size := range []string{"512KB", "2MB"} {
		d.Points = append(d.Points, point("documents.rewrite_lz4", size, 5, ds, func(s string, _ int) map[driver.Metric]float64 {
			return map[driver.Metric]float64{"client.rewrite.p50_ms": 30, "client.patch.p50_ms": 10, "client.rewrite.p99_ms": 60,
				"cost_ratio.p50": map[driver.Metric]float64{"no-mongodb": 3, "mongodb": 2}[driver.Metric(s)], "wal_per_op.rewrite": 600000}
		}))
	}
	d.Note("fixture note")

	// The long-lived run: one round of the fixed rates on a million rows
	// of history; the queue's Postgres side ages by 1.5×, RabbitMQ's by 3×.
	ll := newRun("longlived", 30*time.Minute)
	ll.StartState = &driver.StartState{Mode: driver.StateLongLived, HistoryRows: 1_000_000, Tables: []driver.TableState{
		{Schema: "queue", Table: "tasks", Rows: 1_000_000, TotalBytes: 250 << 20, DeadTuples: 150_000},
		{Schema: "queue_rabbitmq", Table: "tasks", Rows: 1_000_000, TotalBytes: 251 << 20, DeadTuples: 150_000},
	}}
	for _, rate := range []float64{500, 1000} {
		ll.Points = append(ll.Points, point("queue.rate", driver.Label(rate), rate, qs, func(s string, r int) map[driver.Metric]float64 {
			k := map[driver.Metric]float64{"no-rabbitmq": 1.5, "rabbitmq": 1.25 * 3}[driver.Metric(s)]
			return map[driver.Metric]float64{"server.delivery.p99_ms": 5 * k, "server.processing.p99_ms": 6 * k, "throughput": rate}
		}))
	}
	ll.Points = append(ll.Points, point("log.rate", "100/s", 100, ls, func(s string, r int) map[driver.Metric]float64 {
		return map[driver.Metric]float64{"server.write.p99_ms": 7, "server.delivery.p99_ms": 2}
	}))
	return []*driver.Run{q, l, d, ll, cacheFixture(newRun, point)}
}

// cacheFixture is a synthetic cache run: Redis ahead of the unlogged
// table except on the write-heavy profile, the logged table 3× slower to
// write, the in-process cache ahead everywhere, one origin load per
// instance and a NOTIFY-fast local mode beside TTL-bound others; the
// client-side mode is as fast as local on reads and TTL-bound on an
// out-of-band UPDATE, like redis.
func cacheFixture(newRun func(string, time.Duration) *driver.Run, point func(string, string, float64, []string, func(string, int) map[driver.Metric]float64) driver.Point) *driver.Run {
	c := newRun("cache", 40*time.Minute)
	c.Settings["rate"], c.Settings["stale_ttl_s"] = 400, 3
	modes := []string{"unlogged", "redis", "local", "logged", "client-side"}
	p50 := map[driver.Metric]float64{"unlogged": 1.4, "redis": 1, "local": 0.5, "logged": 1.5, "client-side": 0.6}
	for _, pr := range []string{"read_heavy", "mixed", "write_heavy"} {
		c.Points = append(c.Points, point("cache.profile", pr, 400, modes, func(s string, r int) map[driver.Metric]float64 {
			v := p50[driver.Metric(s)]
			if pr == "write_heavy" && s == "redis" {
				v = 2
			}
			return map[driver.Metric]float64{"client.p50_ms": v, "client.p99_ms": 4 * v, "client.errors": 0, "hit_ratio": 0.9,
				"counter.origin_loads": 100, "cpu_per_k.service": 0.3, "cpu_per_k.postgres": 0.5, "cpu_per_k.redis": 0.05}
		}))
	}
	c.Points = append(c.Points,
		point("cache.kv_write", "400/s", 400, modes, func(s string, r int) map[driver.Metric]float64 {
			return map[driver.Metric]float64{"client.p50_ms": map[driver.Metric]float64{"unlogged": 1, "redis": 0.8, "local": 0.3, "logged": 3, "client-side": 0.9}[driver.Metric(s)], "client.p99_ms": 9}
		}),
		point("cache.kv_read", "400/s", 400, modes, func(s string, r int) map[driver.Metric]float64 {
			return map[driver.Metric]float64{"client.p50_ms": map[driver.Metric]float64{"unlogged": 1, "redis": 0.9, "local": 0.3, "logged": 1, "client-side": 0.35}[driver.Metric(s)], "client.p99_ms": 5}
		}),
		point("cache.raw_lookup", "by key", 0, []string{"postgres", "redis"}, func(s string, r int) map[driver.Metric]float64 {
			return map[driver.Metric]float64{"client.p50_ms": map[driver.Metric]float64{"postgres": 0.65, "redis": 0.1}[driver.Metric(s)], "client.p99_ms": 1, "client.ok_rate": 5000}
		}),
		point("cache.stampede", "100 GETs", 0, modes, func(s string, r int) map[driver.Metric]float64 {
			return map[driver.Metric]float64{"origin_loads.one": 1, "origin_loads.two": 2, "elapsed_ms.one": 110, "errors.one": 0}
		}),
		point("cache.staleness", "TTL 3s", 0, modes, func(s string, r int) map[driver.Metric]float64 {
			if s == "local" {
				return map[driver.Metric]float64{"fresh": 1, "stale_ms": 40 + float64(r), "ttl_ms": 3000}
			}
			return map[driver.Metric]float64{"fresh": 1, "stale_ms": 3000 + float64(r), "ttl_ms": 3000}
		}))
	c.Points = append(c.Points, cacheRolesFixture(point)...)
	c.Note("cache fixture note")
	return c
}

// TestReportFromFixture regenerates RESULTS.md and the charts from the
// fixture JSON files and checks what a reader relies on: the machine and
// versions, FerretDB labelling, per-pair tables with ratios, the claims
// and their verdicts, and SVG charts referenced by relative paths.
func TestReportFromFixture(t *testing.T) {
	if *update {
		for _, r := range fixture() {
			if _, err := driver.WriteRun("testdata", r); err != nil {
				t.Fatal(err)
			}
		}
	}
	files, _ := filepath.Glob("testdata/*.json")
	if len(files) != 5 {
		t.Fatalf("fixtures %v (run go test -update)", files)
	}
	var runs []*driver.Run
	for _, f := range files {
		r, err := driver.ReadRun(f)
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "RESULTS.md")
	if err := Write(Files{out, filepath.Join(dir, "docs", "results")}, runs, Sources{Raw: notifyFixture()}, time.Date(2026, 1, 3, 0, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	md := string(b)
	if os.Getenv("SHOW_REPORT") != "" {
		t.Log(md)
	}
	wantContains(t, "RESULTS.md", md,
		"# Results", "2 CPUs (Test CPU)", "| PostgreSQL | 15.20 |", "| PostgreSQL settings | `random_page_cost` 1.1, `shared_buffers` 128MB |", "**FerretDB** v1.24.2", "NOT MongoDB",
		"## Queue: rabbitmq vs no-rabbitmq", "## Log: kafka vs no-kafka", "## Documents: mongodb vs no-mongodb",
		"| 1000/s | send→processed p99 ms |", "0.80× [0.80 0.80 0.80]", "mongodb (on FerretDB)",
		"| no-rabbitmq | 6500 (6000–7000) | 6000 7000 6500 |",
		"![queue](docs/results/queue-latency.svg)", "![log](docs/results/log-latency.svg)",
		"![documents](docs/results/documents-cost-ratio.svg)", "![ceilings](docs/results/ceilings.svg)",
		"- Note: fixture note",
		"![queue](docs/results/queue-latency.svg)\n\n*Lower is better; both axes are logarithmic",
		"![ceilings](docs/results/ceilings.svg)\n\n*Higher is better",
		"Starting state: **fresh**", "| queue.tasks | 0 | 8192 bytes | 0 |",
		"## "+LongLivedTitle, "| 1000/s | delivery p99 ms | 5 | 7.50 | 1.50× | 6.25 | 18.8 | 3× |",
		"Starting state: **long-lived**", "| queue_rabbitmq.tasks | 1,000,000 | 251 MB | 150,000 |",
		"### Outbox: rabbitmq with PUBLISH_MODE=outbox (no-rabbitmq unchanged)",
		"### What the outbox costs: rabbitmq dual-write vs PUBLISH_MODE=outbox",
		"| send p99 ms | 3 | 5 | 2 | 0.40× |", "| send→processed p99 ms | 4 | 4 | 8 | 2× |",
		"## "+CacheTitle, "| point | metric | unlogged | redis | local | logged | client-side |", "| read_heavy | client p50 ms | 1.40 | 1 | 0.50 | 1.50 | 0.60 |",
		"| kv_write 400/s | client p50 ms | 1 | 0.80 | 0.30 | 3 | 0.90 |", "| by key | p50 ms | 0.65 | 0.10 |",
		"| 100 GETs | origin loads, one instance | 1 | 1 | 1 | 1 | 1 |", "| redis | 3001 (3000–3002) | **TTL-bound** (TTL 3000 ms) |",
		"| local | 41 (40–42) |  |", "| client-side | 3001 (3000–3002) | **TTL-bound** (TTL 3000 ms) |", "- Note: cache fixture note",
		"read_heavy: local 0.50, redis 1, unlogged 1.40, client-side 0.60 ms",
		"| 5× ceiling | driver cores (the load driver itself) | 0.30 | 0.35 | 0.86× [0.86 0.86 0.86] |", "| 5× ceiling | RabbitMQ cores | 0.20 | 0.20 | 1× [1 1 1] |",
		"| 2× ceiling | machine cores busy (everything, other users too) | 1.32 | 1.37 | 0.96× [0.96 0.96 0.96] |",
		"errors 0; driver 0.30 cores, machine 1.50 of 2) |",
	)
	// Claims: one row per claim, with the expected verdicts.
	verdicts := map[string]string{
		// The design targets are decided by the sustainable rate
		// (TestSustainClaims), which this fixture lacks.
		"≥ 10,000 tasks/s":                    "**not measurable here**: the sustainable throughput scenario is not in these results",
		"fresh-table p99 after a million":     "**holds**",
		"within 1.5× of RabbitMQ":             "**holds**",
		"from 4 ms to 11 ms":                  "**holds**",
		"Delivery p95 ≤ 2 ms":                 "**holds**",
		"Kafka write p99 16 ms":               "**holds**",
		"synchronous_commit=off":              "**holds**",
		"≥ 15,000 events/s":                   "**not measurable here**: the sustainable throughput scenario is not in these results",
		"33 ms on Postgres":                   "**not measurable here**",
		"3.6–4.7× a neighbour":                "**holds**",
		"1.9–2.4× a patch on MongoDB":         "**not measurable here**",
		"rewrite p99 is 2.6× MongoDB's":       "**not measurable here**",
		"ceiling, no-rabbitmq keeps":          "**holds**",
		"ceiling, rabbitmq keeps":             "**does not hold**",
		"ceiling, no-kafka keeps":             "**holds**",
		"ceiling, kafka keeps":                "**holds**",
		"makes a large jsonb rewrite cheaper": "**holds**",
		// The raw loops' NOTIFY series (notify_test.go decides it).
		"NOTIFY in the committing transaction serializes": "**holds**",
		"The project's remedy, not the reference's":       "**holds**",
		// The throughput run's claims (throughput_test.go decides them).
		"~5K msg/s comfortably":                "**not measurable here**",
		"5–15K events/s":                       "**not measurable here**",
		"10,000 tasks/s or more on both sides": "**not measurable here**",
		// The scale-out claims (TestScaleOutClaims decides them): the
		// fixture has no scale-out run, and no slot-wal-retention
		// experiment.
		"Fan-out (an \"order placed\" task":      "**not measurable here**",
		"Independent consumer groups and replay": "**not measurable here**",
		"a lagging slot bloats WAL for everyone": "**not measurable here**",
		// The cache run's claims.
		"about 0.1 ms on Redis":                    "**holds**",
		"Redis is ahead on reads, writes":          "**does not hold**",
		"UNLOGGED makes writes about 3×":           "**holds**",
		"An in-process cache beats":                "**holds**",
		"computed once by an in-process cache":     "**holds**",
		"Postgres can be the cache's invalidation": "**holds**",
		// The roles beyond the cache (cache_roles_test.go).
		"an analogue of Redis' distributed locks": "**holds**",
		"slower than Redis at every type":         "**holds**",
		"tens of thousands of events per second":  "**holds**",
		"Rate limiters (like sorted sets":         "**does not hold**",
	}
	wantClaimRows(t, md, verdicts)
	if n := len(Claims(runs, notifyFixture())); n != len(verdicts) {
		t.Errorf("%d claims, the test knows %d", n, len(verdicts))
	}
	for _, f := range []string{"queue-latency.svg", "log-latency.svg", "documents-cost-ratio.svg", "ceilings.svg"} {
		svg, err := os.ReadFile(filepath.Join(dir, "docs", "results", f))
		if err != nil || !bytes.Contains(svg, []byte("<svg")) {
			t.Errorf("%s: %v (%d bytes)", f, err, len(svg))
		}
	}
	// The terminal tables render the same runs.
	var tb bytes.Buffer
	for _, r := range runs {
		Table(&tb, r)
		Demo(&tb, r)
	}
	if !strings.Contains(tb.String(), "A/B [per round]") || !strings.Contains(tb.String(), "queue pair: no-rabbitmq vs rabbitmq") {
		t.Errorf("terminal tables:\n%s", tb.String())
	}
}

// TestClaimsWithoutResults says "not measurable here" for everything.
func TestClaimsWithoutResults(t *testing.T) {
	for _, c := range Claims(nil) {
		if c.Verdict != NotMeasurable || c.Why == "" {
			t.Errorf("%+v", c)
		}
	}
}

// TestSessionsSplitOnPauses groups results files by invocation: files that
// follow each other are one, a file started long after the others ended is
// another, whatever the order they are given in.
func TestSessionsSplitOnPauses(t *testing.T) {
	at := func(cmd string, start, minutes int) *driver.Run {
		begin := time.Date(2026, 11, 30, 20, start, 0, 0, time.UTC)
		r := driver.NewRun(cmd, nil, begin)
		r.FinishedAt = begin.Add(time.Duration(minutes) * time.Minute)
		return r
	}
	one := []*driver.Run{at("queue", 0, 6), at("log", 6, 7), at("cache", 15, 3)}
	if gs := sessions(one); len(gs) != 1 || gs[0] != "queue, log, cache (2026-11-30 20:00–20:18 UTC)" {
		t.Errorf("one invocation: %q", gs)
	}
	two := []*driver.Run{at("documents", 53, 9), at("queue", 0, 6), at("log", 6, 7)}
	want := []string{"queue, log (2026-11-30 20:00–20:13 UTC)", "documents (2026-11-30 20:53–21:02 UTC)"}
	if gs := sessions(two); !slices.Equal(gs, want) {
		t.Errorf("two invocations: %q, want %q", gs, want)
	}
}

// TestPairReportsArePairs: the report's pair table names only pairs of
// services/kit/pairs, each once, and PairCoverage tells a pair it does not
// know.
func TestPairReportsArePairs(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, p := range pairReports() {
		if seen[p.Name] || !slices.Contains(pairs.Names(), p.Name) {
			t.Errorf("the report's pair table: %q twice or not a pair of services/kit/pairs", p.Name)
		}
		seen[p.Name] = true
		if why := PairCoverage(p.Name); why != "" {
			t.Errorf("%s: %s", p.Name, why)
		}
	}
	if len(seen) != len(pairTable) {
		t.Errorf("the report's pair table has %d entries, %d of them pairs of services/kit/pairs", len(pairTable), len(seen))
	}
	if PairCoverage("nope") == "" {
		t.Error("PairCoverage covered a pair that does not exist")
	}
}
