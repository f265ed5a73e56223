package report

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/experiments"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/resultfile"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/scenario"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// failCase is one fault of a cluster experiment as a card counts it: who
// lost what, and when writes came back.
type failCase struct {
	// side is the card's name of the side ("RabbitMQ", "Postgres 15").
	side string
	// label names the fault ("leader killed").
	label string
	// loss is what the case did to the writes it acknowledged, counted
	// as the failover tables count it (experiments.FailoverLosses).
	loss experiments.Loss
	// backS is when the first write sent after the fault was
	// acknowledged, in seconds after it; back is false when none was
	// within the run.
	backS float64
	back  bool
	// allowed is true for a loss the settings allow (acks=1, an
	// asynchronous standby promoted): the card says so apart.
	allowed bool
	// failed is why the experiment measured nothing ("" when it did).
	failed string
}

// failExtractor reads the cases of one experiment's result.
type failExtractor func(r experiments.Result) []failCase

// failExtractors are the card's readers by experiment name, by pair: the
// pair's broker experiments, and every Postgres failover experiment of
// pgFaults on the pair's Postgres side. An experiment of the cluster
// profile without one is not on the cards.
var failExtractors = map[string]map[string]failExtractor{
	pairs.Queue: withPGCases("queue", map[string]failExtractor{
		experiments.RabbitMQLeaderKill: rmqCases("quorum queue's leader killed"),
		experiments.RabbitMQLeaderCut:  rmqCases("quorum queue's leader cut off"),
	}),
	pairs.Log: withPGCases("log", map[string]failExtractor{
		experiments.KafkaLeaderKill: kafkaCases,
		experiments.KafkaLeaderCut:  kafkaCases,
	}),
}

// withPGCases adds to a pair's broker readers a pgCases reader, of side
// key, for every experiment of pgFaults.
func withPGCases(key string, broker map[string]failExtractor) map[string]failExtractor {
	for name, fault := range pgFaults {
		broker[name] = pgCases(key, fault)
	}
	return broker
}

// pgFaults names the Postgres failover experiments' faults for the card:
// the scripted promotions name who promoted, the automatic ones the
// fault alone (pg_auto_failover's monitor detected it and promoted).
var pgFaults = map[string]string{
	experiments.PGSwitchover:     "switchover",
	experiments.PGFailoverSync:   "primary killed, synchronous standby promoted",
	experiments.PGFailoverAsync:  "primary killed, asynchronous standby promoted",
	experiments.PGAutoKill:       "primary killed, pg_auto_failover",
	experiments.PGAutoCut:        "primary cut off, pg_auto_failover",
	experiments.PGAutoIsolate:    "primary cut off from its peers, pg_auto_failover",
	experiments.PGAutoStandbyCut: "a standby cut off, pg_auto_failover",
}

// pgCases reads a Postgres failover experiment: the case of its side key
// ("queue": no-rabbitmq, "log": no-kafka), under "Postgres <major>" (an
// automatic failover's under "Postgres <major> under pg_auto_failover");
// the asynchronous standby's loss allowed, and phantoms alone where
// experiments.PhantomAllowed allows them.
func pgCases(key, label string) failExtractor {
	return func(r experiments.Result) []failCase {
		side := "Postgres"
		if v := experiments.PGMajor(r); v > 0 {
			side += " " + strconv.Itoa(v)
		}
		if experiments.IsAutoFailover(r.Name) {
			// detection included: never in one range with a scripted
			// promotion's times
			side += " under pg_auto_failover"
		}
		back := r.Metrics[experiments.SidePrefix(key+".").Of(experiments.MetricWritesResumeSeconds)]
		if st, ok := r.Metrics[experiments.SidePrefix(key+".").Of(experiments.MetricWritesStallSeconds)]; ok && back >= 0 && st < experiments.NoStall.Seconds() {
			// writes never stopped: back at once (the longest gap)
			back = st
		}
		loss := caseLoss(r, key)
		// a promoted asynchronous standby's loss; phantoms alone where
		// experiments.PhantomAllowed says why (a partitioned primary's
		// logical decoding before PostgreSQL 17)
		allowed := r.Name == experiments.PGFailoverAsync || (experiments.PhantomAllowed(r) != "" && loss.Lost == 0)
		return []failCase{{side: side, label: label, loss: loss,
			backS: back, back: back >= 0 && r.Metrics != nil, allowed: allowed, failed: r.Error}}
	}
}

// rmqCases reads a RabbitMQ failover experiment: one case.
func rmqCases(label string) failExtractor {
	return func(r experiments.Result) []failCase {
		m := r.Metrics
		c := failCase{side: "RabbitMQ", label: label, loss: caseLoss(r, ""),
			backS: m[experiments.MetricPublishResumeSeconds], back: m[experiments.MetricPublishResumed] == 1, failed: r.Error}
		return []failCase{c}
	}
}

// kafkaFaults names the Kafka experiments' faults for the card.
var kafkaFaults = map[string]string{"kill": "leader killed", "isolate": "leader cut off from its peers", "cut": "leader cut off"}

// kafkaCases reads a Kafka failover experiment: one case per fault and
// acks setting (its "cases" setting), an acks=1 loss allowed.
func kafkaCases(r experiments.Result) []failCase {
	if r.Error != "" {
		return []failCase{{side: "Kafka", label: r.Name, failed: r.Error}}
	}
	var cs []failCase
	for _, name := range strings.Split(r.Settings["cases"], ",") {
		fault, acks, ok := strings.Cut(name, ".acks_")
		if !ok {
			continue
		}
		back, measured := r.Metrics[experiments.SidePrefix(name+".").Of(experiments.MetricAppendsResumeSeconds)]
		cs = append(cs, failCase{side: "Kafka, acks=" + acks, label: kafkaFaults[fault],
			loss: caseLoss(r, name), backS: back, back: measured && back > 0,
			allowed: acks != "all"})
	}
	return cs
}

// caseLoss is the Loss of r's case key (experiments.CaseLoss.Key); zero
// when r has no such case.
func caseLoss(r experiments.Result, key string) experiments.Loss {
	for _, c := range experiments.FailoverLosses(r) {
		if c.Key == key {
			return c.Loss
		}
	}
	return experiments.Loss{}
}

// failCasesOf reads every case of pair from the cluster experiments'
// parts.
func failCasesOf(pair string, parts []experiments.ClusterPart) []failCase {
	var cs []failCase
	for _, part := range parts {
		if part.File == nil {
			continue
		}
		for _, r := range part.File.Results {
			if x := failExtractors[pair][r.Name]; x != nil {
				cs = append(cs, x(r)...)
			}
		}
	}
	return cs
}

// failoverText is the card's failover line for pair: per side, what the
// faults lost and how soon writes came back; "" when the pair has no
// failover experiment at all.
func failoverText(pair string, parts []experiments.ClusterPart) string {
	if len(failExtractors[pair]) == 0 {
		return ""
	}
	cs := failCasesOf(pair, parts)
	if len(cs) == 0 {
		return "not measured: no results of the cluster profile's experiments (`results/" + resultfile.Pattern(resultfile.Failover) + "`)"
	}
	var sides []string
	for _, c := range cs {
		if !slices.Contains(sides, c.side) {
			sides = append(sides, c.side)
		}
	}
	var clauses []string
	for _, side := range sides {
		clauses = append(clauses, sideFailover(side, cs))
	}
	return strings.Join(clauses, "; ")
}

// sideFailover sums one side's cases: the faults, the acknowledged
// writes lost of those answered, and the range of times until writes
// came back (or why a case has none). When some of the side's cases
// allow a loss and others do not (an asynchronous standby promoted,
// beside the synchronous one), the allowed ones are summed apart, so
// that a loss the design does not allow never hides among them.
func sideFailover(side string, all []failCase) string {
	var strict, allowed []failCase
	for _, c := range all {
		switch {
		case c.side != side:
		case c.allowed:
			allowed = append(allowed, c)
		default:
			strict = append(strict, c)
		}
	}
	if len(strict) == 0 || len(allowed) == 0 {
		return side + ": " + sumCases(append(strict, allowed...))
	}
	return side + ": " + sumCases(strict) + "; " + sumCases(allowed)
}

// sumCases sums cases into one clause; a loss is said to be allowed when
// every case allows it.
func sumCases(cases []failCase) string {
	var labels, failed []string
	var loss experiments.Loss
	lo, hi, notBack := -1.0, 0.0, 0
	allowed := true
	for _, c := range cases {
		if c.failed != "" {
			failed = append(failed, c.label+": failed: "+c.failed)
			continue
		}
		labels = append(labels, c.label)
		loss = loss.Add(c.loss)
		allowed = allowed && c.allowed
		switch {
		case !c.back:
			notBack++
		case lo < 0:
			lo, hi = c.backS, c.backS
		default:
			lo, hi = min(lo, c.backS), max(hi, c.backS)
		}
	}
	var s string
	if len(labels) > 0 {
		s = fmt.Sprintf("%s of %s acknowledged writes lost, %s phantom, %s duplicated over %s (%s)", count(loss.Lost), count(loss.Acked),
			count(loss.Phantom), count(loss.Duplicated), faults(len(labels)), timesEach(labels))
		if allowed && loss.Lost+loss.Phantom > 0 {
			s += ", a loss these settings allow"
		}
		s += ", " + backRange(lo, hi, notBack)
	}
	if len(failed) > 0 {
		if s != "" {
			s += "; "
		}
		s += strings.Join(failed, "; ")
	}
	return s
}

// timesEach lists labels once each, in order, with how many times a
// repeated one occurs ("leader killed ×3; leader cut off ×3"); a
// semicolon parts them, as a label may hold a comma ("primary killed,
// synchronous standby promoted").
func timesEach(labels []string) string {
	var order []string
	n := map[string]int{}
	for _, l := range labels {
		if n[l] == 0 {
			order = append(order, l)
		}
		n[l]++
	}
	for i, l := range order {
		if n[l] > 1 {
			order[i] = fmt.Sprintf("%s ×%d", l, n[l])
		}
	}
	return strings.Join(order, "; ")
}

// backRange says when writes came back after the faults: "writes back
// after 0.2–29 s", with the faults after which none came back counted.
func backRange(lo, hi float64, notBack int) string {
	var s string
	switch {
	case lo < 0:
		s = "writes not back within the run"
	case hi-lo < 0.05:
		s = fmt.Sprintf("writes back after %s s", num(lo))
	default:
		s = fmt.Sprintf("writes back after %s–%s s", num(lo), num(hi))
	}
	if lo >= 0 && notBack > 0 {
		s += fmt.Sprintf(" (after %s: not back within the run)", faults(notBack))
	}
	return s
}

// faults is "1 fault" or "n faults".
func faults(n int) string {
	if n == 1 {
		return "1 fault"
	}
	return fmt.Sprintf("%d faults", n)
}

// durableChoice is one side's setting that loses nothing on failover
// against its cheaper one, as the durability scenario names them.
type durableChoice struct {
	side, svc, durable, cheap string
	// postgres marks a Postgres side's choice, priced on each PostgreSQL
	// version the durability scenario ran on.
	postgres bool
}

// durableChoices are the choices the cards price, by pair.
var durableChoices = map[string][]durableChoice{
	pairs.Queue: {
		{"a synchronous standby", pairs.NoRabbitMQ, scenario.SettingSyncCommit + "=on", scenario.SettingSyncCommit + "=local", true},
		{"RabbitMQ, quorum queues", pairs.RabbitMQ, scenario.SettingQueueType + "=quorum", scenario.SettingQueueType + "=classic", false},
	},
	pairs.Log: {
		{"a synchronous standby", pairs.NoKafka, scenario.SettingSyncCommit + "=on", scenario.SettingSyncCommit + "=local", true},
		{"Kafka, acks=all", pairs.Kafka, scenario.SettingAcks + "=all", scenario.SettingAcks + "=1", false},
	},
}

// loseNothingText is what losing nothing costs each side of pair: the
// acknowledgement p99 with the durable setting against the cheaper one,
// from the durability runs (LoadDurabilityParts): the Postgres side's on
// each PostgreSQL version, the broker's from the first run (the lowest
// version, the stack's); "" when the pair has no choices, or why it is
// not measured.
func loseNothingText(pair string, parts []DurabilityPart) string {
	cs := durableChoices[pair]
	if len(cs) == 0 {
		return ""
	}
	if len(parts) == 0 || !parts[0].Measured() {
		why := "the durability scenario has not run"
		if len(parts) > 0 && parts[0].Run != nil && parts[0].Run.Aborted != "" {
			why = parts[0].Run.Aborted
		}
		if strings.HasPrefix(why, "not measured") {
			return why
		}
		return "not measured (" + why + ")"
	}
	var out []string
	price := func(side string, run *driver.Run, c durableChoice) string {
		return fmt.Sprintf("%s, acknowledged p99 %s (`%s`: %s; %s)", side,
			ackP99(run, pair, c.durable, c.svc), c.cheap, ackP99(run, pair, c.cheap, c.svc), ackDifference(run, pair, c))
	}
	for _, c := range cs {
		if !c.postgres {
			out = append(out, price(c.side, parts[0].Run, c))
			continue
		}
		for _, p := range parts {
			name := "Postgres"
			if p.PGMajor > 0 {
				name = fmt.Sprintf("Postgres %d", p.PGMajor)
			}
			out = append(out, price(name+", "+c.side, p.Run, c))
		}
	}
	return strings.Join(out, "; ")
}

// ackDifference says whether c's durable setting answered slower than
// its cheaper one, window by window (the scenario interleaves them, so
// window i of each ran side by side): a difference only when every
// window agrees on its sign, else that none is claimed.
func ackDifference(run *driver.Run, pair string, c durableChoice) string {
	sc := scenario.DurabilityScenarioName(pair)
	d, k := durabilityPoint(run, sc, c.durable), durabilityPoint(run, sc, c.cheap)
	if d == nil || k == nil || !d.SideStatus(c.svc).OK() || !k.SideStatus(c.svc).OK() {
		return "no difference is claimed without both"
	}
	var higher, lower, n int
	for i := range min(len(d.Rounds), len(k.Rounds)) {
		a, b := d.Rounds[i].Sides[c.svc], k.Rounds[i].Sides[c.svc]
		if a == nil || b == nil {
			continue
		}
		x, ok1 := a.Metrics[driver.ClientP99]
		y, ok2 := b.Metrics[driver.ClientP99]
		if !ok1 || !ok2 {
			continue
		}
		n++
		switch {
		case x > y:
			higher++
		case x < y:
			lower++
		}
	}
	switch {
	case n < 2:
		return fmt.Sprintf("%s each: no difference is claimed", windowsText(n))
	case higher == n:
		return fmt.Sprintf("higher in each of the %d windows", n)
	case lower == n:
		return fmt.Sprintf("lower in each of the %d windows", n)
	}
	return fmt.Sprintf("higher in %d of %d windows: no difference is claimed", higher, n)
}

// durabilityPoint is run's point of scenario sc under setting name, or
// nil.
func durabilityPoint(run *driver.Run, sc driver.ScenarioName, name string) *driver.Point {
	for i := range run.Points {
		if p := &run.Points[i]; p.Scenario == sc && p.Name == name {
			return p
		}
	}
	return nil
}

// ackP99 is svc's acknowledgement p99 under setting name in run's
// fixed-rate points of pair, or why there is none.
func ackP99(run *driver.Run, pair, name, svc string) string {
	p := durabilityPoint(run, scenario.DurabilityScenarioName(pair), name)
	if p == nil {
		return "not measured"
	}
	m, why := sideAggs(*p, svc)
	if m == nil {
		return why
	}
	v, ok := m[driver.ClientP99]
	if !ok {
		return notRecorded
	}
	s := num(v.Median) + " ms" + aggRange(" (windows ", v, " ms)")
	if n, ok := m[scenario.MetricSyncStandbys]; ok && n.Min == 0 && name != scenario.SettingSyncCommit+"=local" {
		s += ", but with no synchronous standby streaming"
	}
	return s
}
