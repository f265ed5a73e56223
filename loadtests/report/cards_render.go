package report

import (
	"fmt"
	"strings"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/scenario"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// cardText holds a pair's sentences; the figures come from its Verdict.
type cardText struct {
	// question is the card's heading after the pair's title.
	question string
	// pgWhen opens the "Use Postgres when" sentence.
	pgWhen string
}

// cardTexts are the cards' sentences by pair.
var cardTexts = map[string]cardText{
	pairs.Queue: {question: "a table with `FOR UPDATE SKIP LOCKED`, or RabbitMQ?",
		pgWhen: "each task goes to one worker and must commit with its business row in one transaction"},
	pairs.Log: {question: "logical replication with wal2json, or Kafka?",
		pgWhen: "one consumer reads the stream (one replication slot) and the event must commit with the row"},
	pairs.Documents: {question: "`jsonb` with a GIN index, or MongoDB?",
		pgWhen: "search is containment (`@>`) and large documents are rarely rewritten whole"},
	pairs.EventStore: {question: "an append-only table, or KurrentDB (or Kafka)?",
		pgWhen: "appends must check an expected version and events commit with state"},
	pairs.Cache: {question: "Postgres behind an in-process cache, or Redis?",
		pgWhen: "reads dominate and a stale value must vanish on an out-of-band `UPDATE` (NOTIFY invalidation)"},
}

// rateText says up to which rate Postgres passed, or what was measured
// instead.
func rateText(v Verdict) string {
	if v.PGRate.OK() {
		s := fmt.Sprintf("up to %s %s/s%s", num(v.PGRate.Value), v.Item, oneEach(v))
		if v.RateCriterion != "" {
			s += " (" + v.RateCriterion + ")"
		}
		return s
	}
	if v.MaxRate > 0 {
		return fmt.Sprintf("at the %s %s/s measured (single-request ceiling: %s)", num(v.MaxRate), v.Item, v.PGRate)
	}
	return "single-request ceiling " + v.PGRate.String()
}

// oneEach qualifies the single-request rates when the card also shows
// batched ones: " one per request", else "".
func oneEach(v Verdict) string {
	if v.SustainedAt == "" {
		return ""
	}
	return " one per request"
}

// cpuText is the CPU cost of both sides, or why it is missing.
func cpuText(v Verdict) string {
	if !v.PGCPU.OK() && !v.SpecCPU.OK() && v.PGCPU.Why == v.SpecCPU.Why {
		return "CPU per 1,000 " + v.Item + ": " + v.PGCPU.Why
	}
	return fmt.Sprintf("CPU per 1,000 %s (one per request, every process): Postgres %s, %s %s", v.Item, v.PGCPU, v.Specialist, v.SpecCPU)
}

// Card renders one pair's verdict card: at most about 12 lines.
func Card(v Verdict) string {
	t := cardTexts[v.Pair]
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("### %s: %s\n\n", v.Title, t.question)
	w("![%s: measured thresholds](%s)\n\n", v.Title, v.Chart)
	w("- **Use Postgres when** %s, %s. %s.\n", t.pgWhen, rateText(v), cpuText(v))
	spec := fmt.Sprintf("- **Use %s when** you need %s", v.Specialist, strings.Join(v.SpecOnly, ", or "))
	switch {
	case v.PGRate.OK() && v.SpecRate.OK():
		spec += fmt.Sprintf(", or more than %s %s/s%s (%s passed %s)", num(v.PGRate.Value), v.Item, oneEach(v), v.Specialist, v.SpecRate)
	case v.PGRate.OK():
		spec += fmt.Sprintf(", or more than %s %s/s%s (%s's rate: %s)", num(v.PGRate.Value), v.Item, oneEach(v), v.Specialist, v.SpecRate)
	}
	w("%s. %s: Postgres %s, %s %s.", spec, capitalize(v.LatencyWhat), v.PGLatency, v.Specialist, v.SpecLatency)
	if v.SustainedAt != "" {
		w(" Sent in batches (%s, open loop; backlog flat, end-to-end p99 < %s ms) Postgres sustained %s, %s %s.", v.SustainedAt, count(scenario.SustainSLO.Milliseconds()), v.PGSustained, v.Specialist, v.SpecSustained)
	}
	if v.Alt != "" {
		w(" %s.", v.Alt)
	}
	w("\n")
	w("- **Bites Postgres first:** %s.", v.Bites)
	if v.MaxRate > 0 {
		w(" Above %s %s/s nothing was measured.", num(v.MaxRate), v.Item)
	}
	w("\n")
	w("- **On failover** (3 nodes each, [Replicated and failover](RESULTS.md#%s)): %s.", anchor(FailoverTitle), failoverLine(v))
	if v.LoseNothing != "" {
		w(" **To lose nothing:** %s.", v.LoseNothing)
	}
	w("\n")
	conf := v.SpecConfidence
	if conf == MeasuredHere {
		server := v.Specialist
		if v.SpecServer != "" {
			server = v.SpecServer
		}
		conf = server + " " + conf
	}
	if v.Claims != "" {
		conf += fmt.Sprintf("; [claims of the reference](RESULTS.md#claims): %s", v.Claims)
	}
	w("- **Confidence:** Postgres %s; %s. **Details:** [%s](%s), [RESULTS.md](RESULTS.md#%s)\n", MeasuredHere, conf, v.Doc, v.Doc, anchor(v.Section))
	return b.String()
}

// capitalize upper-cases the first letter of s.
func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// failoverLine is the card's failover sentence: the verdict's, or why the
// pair has none.
func failoverLine(v Verdict) string {
	if v.Failover == "" {
		return "not measured for this pair (the cluster profile's experiments cover the queue and the log)"
	}
	return v.Failover
}
