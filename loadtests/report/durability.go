package report

import (
	"fmt"
	"slices"
	"strings"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/scenario"
)

// DurabilityTitle heads the durability table within the "Replicated and
// failover" section.
const DurabilityTitle = "Durability at equal guarantees"

// DurabilitySection renders the durability scenario's tables from parts
// (LoadDurabilityParts: one run per PostgreSQL major version; none when
// there is no results file): one row per configuration. A run that was
// not measured says why, never zeros; a configuration that failed says
// why in its cells.
func DurabilitySection(parts []DurabilityPart) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("\n### %s\n\n", DurabilityTitle)
	w("Each side of the queue and log pairs on the cluster profile under each durability setting, end to end through the services' HTTP API: ")
	w("the Postgres sides with `synchronous_commit` local (the primary's flush), on (the synchronous standby's flush too) and remote_apply (the standby has applied it); ")
	w("RabbitMQ on 3 nodes with publisher confirms, a classic queue (one node) against a quorum queue (Raft over three); ")
	w("Kafka on 3 brokers, replication factor 3 and `min.insync.replicas=2`, with `acks=1` (the leader) against `acks=all` (every in-sync replica). ")
	w("The specialists' sides keep their records in the same Postgres at its server setting (on). ")
	w("`go run ./loadtests durability` (root, the cluster profile up; part of `make results` when its three clusters run). ")
	w("Acknowledged: the write's 2xx answer, single items at a fixed rate; end to end: send→processed (queue) or write→delivered (log) at that rate; ")
	w("sustainable: the throughput section's search (backlog flat, end-to-end p99 under %s) in batches; ", scenario.SustainSLO)
	w("CPU-seconds per 1,000 items at the fixed rate, read from each process's own counters: the service, and each node of the servers the side uses (idle time included). ")
	w("The fixed rate runs in windows interleaved across the configurations (every configuration's first window, then every one's second, and so on), each on its service started afresh; a cell gives the median over the windows and, for the p99s and the CPU total, their range; a window that failed leaves its configuration without figures. ")
	w("All of it runs on one 2-core machine whose nodes share those cores (the standbys' round trip is a veth pair, not a network): the cards state a difference between two settings only when it has the same sign in every window, and none from a run of one window.")
	switch {
	case len(parts) == 0:
		w("\n\nNo results file of the durability scenario (`results/*-%s.json`) was found: it has not run against the cluster profile yet.\n", scenario.DurabilityCommand)
		return b.String()
	case !parts[0].Measured():
		run := parts[0].Run
		w("\n\nNot measured (`results/%s`, %s): %s\n", parts[0].File, run.StartedAt.UTC().Format("2006-01-02 15:04 MST"), md(orDash(run.Aborted)))
		return b.String()
	case len(parts) > 1:
		w(" One table per PostgreSQL version the cluster ran, each from its own run: every run measures all the configurations, the brokers' too (their services keep their own records in that run's Postgres), so a broker's rows in two tables show how far one run differs from another here.")
	}
	w("\n")
	for _, p := range parts {
		if len(parts) > 1 && p.Label() != "" {
			w("\n#### %s\n", p.Label())
		}
		w("\n")
		durabilityTable(&b, p.Run, p.File)
	}
	return b.String()
}

// durabilityTable writes run's table to b.
func durabilityTable(b *strings.Builder, run *driver.Run, file string) {
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	w("From `results/%s` (started %s, Postgres %s", file, run.StartedAt.UTC().Format("2006-01-02 15:04 MST"), orDash(fmt.Sprint(run.Settings[scenario.DurabilityServerSetting])))
	if r, ok := run.Settings["rate"].(float64); ok {
		w(", fixed rate %s/s", num(r))
		if d, ok := run.Settings["duration_s"].(float64); ok {
			w(" in %s of %s s", windowsText(runWindows(run)), num(d))
		}
	}
	w(").\n\n| pair | side | setting | acknowledged p50 / p99 | end to end p50 / p99 | sustainable (items/s) | CPU-s / 1,000 items: service | nodes | total |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, p := range run.Points {
		if !strings.HasPrefix(string(p.Scenario), scenario.DurabilityCommand+".") || strings.HasSuffix(string(p.Scenario), ".sustainable") || len(p.Sides) != 1 {
			continue
		}
		pair := strings.TrimPrefix(string(p.Scenario), scenario.DurabilityCommand+".")
		svc := p.Sides[0]
		cells := append([]string{pair, svc, "`" + p.Name + "`"}, durabilityLatencies(p, svc, pair)...)
		cells = append(append(cells, sustainCell(run, pair, p.Name, svc)), durabilityCPU(p, svc)...)
		w("| %s |\n", strings.Join(mdAll(cells), " | "))
	}
	if n := noSyncStandby(run); n > 0 {
		w("\nIn %d configuration(s) no synchronous standby was streaming from the primary when the fixed point began: there, on and remote_apply waited for none (a single server, or a cluster short of its standby).\n", n)
	}
	if notes := run.Notes; len(notes) > 0 {
		w("\n")
		for _, n := range notes {
			w("- %s\n", md(n))
		}
	}
}

// sideMetrics are svc's metrics in p, each the median over p's rounds
// (driver.Summarize), with their medians and ranges, or why there are
// none ("failed: <reason>": a point with a failed round has no figure).
func sideMetrics(p driver.Point, svc string) (map[driver.Metric]float64, string) {
	aggs, why := sideAggs(p, svc)
	if aggs == nil {
		return nil, why
	}
	m := make(map[driver.Metric]float64, len(aggs))
	for k, a := range aggs {
		m[k] = a.Median
	}
	return m, ""
}

// sideAggs are svc's metrics in p as medians with their range over p's
// rounds, or why there are none.
func sideAggs(p driver.Point, svc string) (map[driver.Metric]driver.Agg, string) {
	if st := p.SideStatus(svc); !st.OK() {
		return nil, st.String()
	}
	// Summarized afresh from the rounds: the file's summary may predate
	// a metric's rule, and the rounds are the record.
	q := driver.Point{Sides: []string{svc}, Rounds: p.Rounds}
	driver.Summarize(&q)
	out := map[driver.Metric]driver.Agg{}
	for _, m := range q.Metrics {
		if a, ok := m.Sides[svc]; ok && a.N > 0 {
			out[m.Name] = a
		}
	}
	if len(out) == 0 {
		return nil, "not measured"
	}
	return out, ""
}

// runWindows is the most windows any fixed point of run measured (1 in
// files written before the scenario had rounds).
func runWindows(run *driver.Run) int {
	n := 1
	for _, p := range run.Points {
		if len(p.Sides) == 1 && !strings.HasSuffix(string(p.Scenario), ".sustainable") {
			n = max(n, windows(p, p.Sides[0]))
		}
	}
	return n
}

// windowsText is "1 window" or "n windows".
func windowsText(n int) string {
	if n == 1 {
		return "1 window"
	}
	return fmt.Sprintf("%d windows", n)
}

// windows is how many rounds of p measured svc.
func windows(p driver.Point, svc string) int {
	n := 0
	for _, r := range p.Rounds {
		if r.Sides[svc] != nil {
			n++
		}
	}
	return n
}

// durabilityLatencies are the acknowledgement and end-to-end cells of
// svc's fixed point p, or its failure in both.
func durabilityLatencies(p driver.Point, svc, pair string) []string {
	m, why := sideAggs(p, svc)
	if m == nil {
		return []string{why, why}
	}
	lat := scenario.QueueThroughput.Latency
	if pair == scenario.LogPair.Name {
		lat = scenario.LogThroughput.Latency
	}
	return []string{quantiles(m, driver.ClientP50, driver.ClientP99),
		quantiles(m, driver.ServerLatency(lat, driver.SuffixP50), driver.ServerLatency(lat, driver.SuffixP99))}
}

// quantiles is "p50 / p99 ms" from m's keys, medians over the rounds,
// with the p99's range when the rounds differ ("1.2 / 3.4 ms (p99
// 2.9–4.1)"), or what is not recorded.
func quantiles(m map[driver.Metric]driver.Agg, p50, p99 driver.Metric) string {
	a, ok1 := m[p50]
	c, ok2 := m[p99]
	if !ok1 || !ok2 {
		return notRecorded
	}
	return num(a.Median) + " / " + num(c.Median) + " ms" + aggRange(" (p99 ", c, ")")
}

// aggRange is a's range between before and after when it has one (more
// than one value, not all equal), else "".
func aggRange(before string, a driver.Agg, after string) string {
	if a.N < 2 || a.Min == a.Max {
		return ""
	}
	return before + num(a.Min) + "–" + num(a.Max) + after
}

// sustainCell is the sustainable rate of svc under setting name, from
// run's search point of pair.
func sustainCell(run *driver.Run, pair, name, svc string) string {
	m, why := durabilityMetrics(run, scenario.DurabilitySustainName(pair), name, svc)
	if m == nil {
		return why
	}
	v, ok := m[scenario.MetricSustainable]
	switch {
	case !ok:
		return notRecorded
	case m[scenario.MetricCapped] == 1:
		return "≥ " + num(v) + " (the search's top)"
	}
	return num(v)
}

// durabilityMetrics are svc's metrics in run's point of scenario sc
// under setting name, or why there are none.
func durabilityMetrics(run *driver.Run, sc driver.ScenarioName, name, svc string) (map[driver.Metric]float64, string) {
	if p := durabilityPoint(run, sc, name); p != nil {
		return sideMetrics(*p, svc)
	}
	return nil, "not measured"
}

// durabilityCPU is the CPU cells of svc's fixed point p: the service's,
// each node's ("pg1 0.31 · pg2 0.05") and the total.
func durabilityCPU(p driver.Point, svc string) []string {
	m, why := sideAggs(p, svc)
	if m == nil {
		return []string{why, why, why}
	}
	one := func(g string) string {
		if v, ok := m[scenario.MetricCPUPerThousand(g)]; ok {
			return num(v.Median)
		}
		return notRecorded
	}
	var nodes []string
	for k := range m {
		g, isCPU := strings.CutPrefix(string(k), "cpu.")
		g, perThousand := strings.CutSuffix(g, ".per_1k")
		if isCPU && perThousand && g != scenario.DurabilityServiceGroup && g != "total" {
			nodes = append(nodes, g)
		}
	}
	// The Postgres nodes first (pg1, pg2, ... or postgres), then the
	// broker's.
	pgFirst := func(g string) string {
		if strings.HasPrefix(g, "pg") || g == "postgres" {
			return "0" + g
		}
		return "1" + g
	}
	slices.SortFunc(nodes, func(a, b string) int { return strings.Compare(pgFirst(a), pgFirst(b)) })
	var parts []string
	for _, g := range nodes {
		parts = append(parts, g+" "+one(g))
	}
	total := one("total")
	if v, ok := m[scenario.MetricCPUPerThousand("total")]; ok {
		total += aggRange(" (", v, ")")
	}
	return []string{one(scenario.DurabilityServiceGroup), orDash(strings.Join(parts, " · ")), total}
}

// noSyncStandby counts run's fixed points measured with no synchronous
// standby streaming (scenario.MetricSyncStandbys 0).
func noSyncStandby(run *driver.Run) int {
	n := 0
	for _, p := range run.Points {
		for _, r := range p.Rounds {
			for _, s := range r.Sides {
				if v, ok := s.Metrics[scenario.MetricSyncStandbys]; ok && v == 0 {
					n++
				}
			}
		}
	}
	return n
}
