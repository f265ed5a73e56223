package scenario

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/cost"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// Durability at equal guarantees (issue 25, item 3): each side of the
// queue and log pairs on the cluster profile (docs/cluster.md), under
// each of its durability settings, measured the same way: the write's
// acknowledgement latency (the 2xx answer) and the end-to-end latency at
// one fixed moderate rate, the CPU-seconds per 1,000 items of the
// service and of every server node's processes at that rate, and the
// sustainable rate (the throughput scenario's search, searchAt and
// StepJudge: the same criteria, shorter steps).
//
// The settings: the Postgres sides' synchronous_commit (local: the
// primary's flush; on: the synchronous standby's flush too; remote_apply:
// the standby has applied it), through the connection string (pgx sends
// an unknown URL parameter as a runtime parameter: every connection of
// the service, the replication one too) and, for no-kafka, its
// SYNCHRONOUS_COMMIT as well (it sets it per write transaction, which
// would override the URL's); RabbitMQ's queue type on its three nodes
// (classic: on one node; quorum: Raft over three), publisher confirms
// (the service's default); Kafka's producer acks (1: the leader; all:
// every in-sync replica, at least min.insync.replicas = 2) on a topic
// of replication factor 3. The specialists' sides keep their business
// records in the same Postgres at its server setting (on, with the
// cluster's synchronous standby).

// DurabilityCommand is the scenario's command and its results file's
// suffix ("<id>-durability.json").
const DurabilityCommand = "durability"

// The settings a configuration varies (DurabilityConfig.Setting).
const (
	SettingSyncCommit = "synchronous_commit"
	SettingQueueType  = "QUEUE_TYPE"
	SettingAcks       = "KAFKA_ACKS"
)

// DurabilityScenarioName is the Point.Scenario of a pair's fixed-rate
// points ("durability.queue"); DurabilitySustainName that of its
// sustainable searches ("durability.queue.sustainable").
func DurabilityScenarioName(pair string) driver.ScenarioName {
	return driver.ScenarioName(DurabilityCommand + "." + pair)
}

// DurabilitySustainName: see DurabilityScenarioName.
func DurabilitySustainName(pair string) driver.ScenarioName {
	return PairScenarioName(string(DurabilityScenarioName(pair)), KindSustainable)
}

// DurabilityConfig is one side under one durability setting.
type DurabilityConfig struct {
	// Pair is the side's pair; Service the side.
	Pair    Pair
	Service string
	// Setting is what varies (SettingSyncCommit, ...), Value its value.
	Setting, Value string
	// Env is the service's environment for this configuration.
	Env map[string]string
}

// Name labels the configuration's points: "synchronous_commit=local".
func (c DurabilityConfig) Name() string { return c.Setting + "=" + c.Value }

// DurabilityCluster is where the configurations run: the Postgres (a
// multi-host URL), the RabbitMQ nodes (AMQP URLs, comma-separated, as
// RABBITMQ_URL takes them) and the Kafka brokers (comma-separated).
type DurabilityCluster struct {
	DatabaseURL, RabbitMQURLs, KafkaBrokers string
	// PostgresMajor is the server's major version: no-kafka decodes with
	// pgoutput from 16 on, wal2json before.
	PostgresMajor int
}

// The values each setting takes, in the table's order.
var (
	SyncCommitModes = []string{"local", "on", "remote_apply"}
	QueueTypes      = []string{"classic", "quorum"}
	AcksModes       = []string{"1", "all"}
)

// DurabilitySchema is the Postgres schema the scenario gives svc: apart
// from the other scenarios' (DefaultSchemas), emptied before each
// configuration.
func DurabilitySchema(svc string) string { return "durability_" + DefaultSchemas[svc] }

// DurabilitySlot is no-kafka's replication slot in the scenario, dropped
// before and after it (an inactive logical slot holds WAL back).
const DurabilitySlot = "durability_no_kafka"

// WithRuntimeParam returns the connection URL u with the query parameter
// key=value set (replacing one already there): pgx sends a parameter it
// does not know as a runtime parameter of every connection.
func WithRuntimeParam(u, key, value string) (string, error) {
	p, err := url.Parse(u)
	if err != nil {
		return "", fmt.Errorf("not a URL: %w", err)
	}
	if p.Scheme != "postgres" && p.Scheme != "postgresql" {
		return "", fmt.Errorf("not a postgres:// URL: %q", p.Scheme)
	}
	q := p.Query()
	q.Set(key, value)
	p.RawQuery = q.Encode()
	return p.String(), nil
}

// DurabilityConfigs are the configurations on c, queue pair first, each
// pair's Postgres side first; tag makes the queue and topic names of
// this run unique.
func DurabilityConfigs(c DurabilityCluster, tag string) ([]DurabilityConfig, error) {
	var out []DurabilityConfig
	plugin := "wal2json"
	if c.PostgresMajor >= 16 {
		plugin = "pgoutput"
	}
	for _, m := range SyncCommitModes {
		u, err := WithRuntimeParam(c.DatabaseURL, SettingSyncCommit, m)
		if err != nil {
			return nil, err
		}
		out = append(out, DurabilityConfig{Pair: QueuePair, Service: pairs.NoRabbitMQ, Setting: SettingSyncCommit, Value: m,
			Env: map[string]string{"DATABASE_URL": u}})
	}
	for _, t := range QueueTypes {
		out = append(out, DurabilityConfig{Pair: QueuePair, Service: pairs.RabbitMQ, Setting: SettingQueueType, Value: t,
			Env: map[string]string{"DATABASE_URL": c.DatabaseURL, "RABBITMQ_URL": c.RabbitMQURLs, SettingQueueType: t,
				"RABBITMQ_QUEUE": "durability-" + tag + "-" + t}})
	}
	for _, m := range SyncCommitModes {
		u, _ := WithRuntimeParam(c.DatabaseURL, SettingSyncCommit, m)
		out = append(out, DurabilityConfig{Pair: LogPair, Service: pairs.NoKafka, Setting: SettingSyncCommit, Value: m,
			Env: map[string]string{"DATABASE_URL": u, "SYNCHRONOUS_COMMIT": m, "SLOT_NAME": DurabilitySlot, "SLOT_PLUGIN": plugin}})
	}
	for _, a := range AcksModes {
		name := "durability-" + tag + "-acks-" + a
		out = append(out, DurabilityConfig{Pair: LogPair, Service: pairs.Kafka, Setting: SettingAcks, Value: a,
			Env: map[string]string{"DATABASE_URL": c.DatabaseURL, "KAFKA_BROKERS": c.KafkaBrokers, SettingAcks: a,
				"KAFKA_REPLICATION_FACTOR": "3", "KAFKA_MIN_INSYNC_REPLICAS": "2", "KAFKA_TOPIC": name, "KAFKA_GROUP": name}})
	}
	for i := range out {
		out[i].Env["DATABASE_SCHEMA"] = DurabilitySchema(out[i].Service)
	}
	return out, nil
}

// DurabilityOptions parameterize the scenario.
type DurabilityOptions struct {
	// Cluster is where it runs.
	Cluster DurabilityCluster
	// Rate is the fixed point's items/s (single-item POSTs), Duration
	// the length of each of its windows.
	Rate     float64
	Duration time.Duration
	// Rounds is how many windows each configuration's fixed point gets,
	// interleaved: every configuration's first window, then every one's
	// second, and so on (driver.RunPoints), so that a drift of the
	// machine over the run reaches every configuration alike. Each
	// window starts its service fresh. The report gives the median and
	// the range over the windows, and a difference between two settings
	// only when every window agrees.
	Rounds int
	// Search is the sustainable search (one batch size, one round, no
	// overload point; Ladders "queue" and "log").
	Search SustainOptions
	// StackDir is where the cluster profile keeps its pid files
	// (<StackDir>/cluster/...): the nodes whose CPU is counted.
	StackDir string
	// Only, when not empty, keeps the configurations whose
	// "<service> <name>" contains one of its strings.
	Only []string
}

// DurabilityDefaults fit the ten configurations in about 35 minutes on 2
// cores: 3 windows of 30 s at 200 items/s each (issue 40: a price is
// not read off one short window), then a search of 10 s steps (2 s
// warm-up) in batches of 100, one bisection.
var DurabilityDefaults = DurabilityOptions{
	Rate: 200, Duration: 30 * time.Second, Rounds: 3,
	Search: SustainOptions{Sizes: []int{100}, Step: 10 * time.Second, Warmup: 2 * time.Second, Sample: 500 * time.Millisecond,
		Rounds: 1, Drain: 20 * time.Second, Ladders: map[string]SustainLadder{
			"queue": {Start: 1000, Factor: 2, Max: 16000, Bisect: 1},
			"log":   {Start: 2000, Factor: 2, Max: 32000, Bisect: 1},
		}},
}

// DurabilitySmall is a check that the scenario runs (about 2 minutes):
// one window of 3 s at 50/s, 4 s steps at 200–400 items/s. Its figures
// are no measurement.
var DurabilitySmall = DurabilityOptions{
	Rate: 50, Duration: 3 * time.Second, Rounds: 1,
	Search: SustainOptions{Sizes: []int{100}, Step: 4 * time.Second, Warmup: time.Second, Sample: 250 * time.Millisecond,
		Rounds: 1, Drain: 10 * time.Second, Ladders: map[string]SustainLadder{
			"queue": {Start: 200, Factor: 2, Max: 400},
			"log":   {Start: 200, Factor: 2, Max: 400},
		}},
}

// Validate says what is wrong with o.
func (o DurabilityOptions) Validate() error {
	var errs []error
	if o.Rate <= 0 || o.Duration <= 0 {
		errs = append(errs, fmt.Errorf("durability: rate %g and duration %s must be positive", o.Rate, o.Duration))
	}
	if o.Rounds < 1 {
		errs = append(errs, fmt.Errorf("durability: rounds %d: want at least 1", o.Rounds))
	}
	if len(o.Search.Sizes) != 1 || o.Search.Rounds != 1 || o.Search.OverRounds != 0 {
		errs = append(errs, errors.New("durability: the search takes one batch size, one round and no overload point"))
	}
	c := o.Cluster
	if c.DatabaseURL == "" {
		errs = append(errs, errors.New("durability: the Postgres URL is required"))
	}
	for _, n := range o.Needs() {
		if (n == NeedsRabbitMQ && c.RabbitMQURLs == "") || (n == NeedsKafka && c.KafkaBrokers == "") {
			errs = append(errs, fmt.Errorf("durability: the %s cluster's addresses are required by the configurations kept", n))
		}
	}
	return errors.Join(append(errs, o.Search.Validate())...)
}

// keep reports whether o.Only keeps c.
func (o DurabilityOptions) keep(c DurabilityConfig) bool {
	return len(o.Only) == 0 || slices.ContainsFunc(o.Only, func(s string) bool {
		return strings.Contains(c.Service+" "+c.Name(), s)
	})
}

// NeedsRabbitMQ and NeedsKafka are what Needs names: the cluster
// profile's names of those clusters (scripts/cluster.sh running).
const (
	NeedsRabbitMQ = "rabbitmq"
	NeedsKafka    = "kafka"
)

// Needs names the clusters besides Postgres (which every configuration
// uses: the specialists' sides keep their records there) that the
// configurations o keeps run on: NeedsRabbitMQ, NeedsKafka, in that
// order. It reads no address, so it can decide which clusters to look
// for.
func (o DurabilityOptions) Needs() []string {
	var out []string
	for _, s := range []struct {
		service, setting, need string
		values                 []string
	}{
		{pairs.RabbitMQ, SettingQueueType, NeedsRabbitMQ, QueueTypes},
		{pairs.Kafka, SettingAcks, NeedsKafka, AcksModes},
	} {
		if slices.ContainsFunc(s.values, func(v string) bool {
			return o.keep(DurabilityConfig{Service: s.service, Setting: s.setting, Value: v})
		}) {
			out = append(out, s.need)
		}
	}
	return out
}

// Count is how many configurations o runs (o.Only kept).
func (o DurabilityOptions) Count() int {
	cs, err := DurabilityConfigs(o.Cluster, "")
	if err != nil {
		return len(SyncCommitModes)*2 + len(QueueTypes) + len(AcksModes)
	}
	n := 0
	for _, c := range cs {
		if o.keep(c) {
			n++
		}
	}
	return n
}

// Estimate is the scenario's expected duration on n configurations:
// each o.Rounds windows (a service start and warm-up, the fixed point
// and its drain), and a search whose first rate passes, the next fails
// (ending early) and one bisection passes. Bound: every search climbs
// its whole ladder.
func (o DurabilityOptions) Estimate(n int) Estimate {
	s := o.Search
	pass := s.Step + attackOverhead
	fail := s.Warmup + earlyFailAfter + 2*attackOverhead + min(s.Drain, s.Step/3)
	fixed := serviceStart + warmupTime/2 + o.Duration + 2*attackOverhead
	rounds := time.Duration(max(o.Rounds, 1))
	typical := rounds*fixed + time.Second + 2*pass + fail
	rungs := 1
	for _, l := range s.Ladders {
		k := 1
		for r := l.Start * l.Factor; r <= l.Max; r *= l.Factor {
			k++
		}
		rungs = max(rungs, k+l.Bisect)
	}
	bound := rounds*(fixed+o.Duration) + time.Duration(rungs)*(s.Step+attackOverhead+s.Drain)
	return Estimate{Attacks: n * (2*int(rounds) + 3), Typical: time.Duration(n) * typical, Bound: time.Duration(n) * bound}
}

// DurabilityConfigsSetting and DurabilityServerSetting are run
// settings: each configuration's environment by "<service>
// <configuration>", and the cluster's Postgres server_version. The
// process groups whose CPU was counted are CostProcessesSetting's, by
// the same key.
const (
	DurabilityConfigsSetting = "durability_configs"
	DurabilityServerSetting  = "durability_postgres_version"
)

// RunDurability measures every configuration of o (DurabilityConfigs)
// on e: first every configuration's fixed rate (DurabilityScenarioName),
// o.Rounds windows each, interleaved across the configurations; then
// each configuration's search (DurabilitySustainName), one after the
// other. A configuration's environment is e.ServiceEnv's for its service
// while it runs (the fresh start reads its schema, slot and queue from
// there).
func RunDurability(ctx context.Context, e *Env, run *driver.Run, o DurabilityOptions, tag string) error {
	if err := o.Validate(); err != nil {
		return err
	}
	all, err := DurabilityConfigs(o.Cluster, tag)
	if err != nil {
		return err
	}
	configs := slices.DeleteFunc(all, func(c DurabilityConfig) bool { return !o.keep(c) })
	run.Settings["rate"] = o.Rate
	run.Settings["duration_s"] = o.Duration.Seconds()
	run.Settings["rounds"] = o.Rounds
	run.Settings[SustainSetting] = o.Search.Settings()
	envs := map[string]map[string]string{}
	run.Settings[DurabilityConfigsSetting] = envs
	costs := map[string]cost.Set{}
	run.Settings[CostProcessesSetting] = costs
	e.dropSlot(ctx, DurabilitySlot)
	defer e.dropSlot(context.WithoutCancel(ctx), DurabilitySlot)
	defer durabilityCleanup(o.Cluster, configs, e.logf)
	fixed := make([]*driver.Point, len(configs))
	started := make([]bool, len(configs))
	for i, c := range configs {
		envs[c.Service+" "+c.Name()] = c.Env
		fixed[i] = &driver.Point{Scenario: DurabilityScenarioName(c.Pair.Name), Name: c.Name(), Rate: o.Rate, DurationS: o.Duration.Seconds(),
			Sides: []string{c.Service}, Env: map[string]map[string]string{c.Service: c.Env}}
	}
	_ = driver.RunPoints(ctx, fixed, o.Rounds, func(ctx context.Context, i int, _ string, round int) (*driver.SideResult, error) {
		c := configs[i]
		defer e.useConfig(c)()
		e.logf("durability: %s %s, window %d of %d", c.Service, c.Name(), round+1, o.Rounds)
		res, groups, err := e.durabilityFixed(ctx, c, o)
		if key := c.Service + " " + c.Name(); costs[key] == nil {
			costs[key] = groups
		}
		started[i] = started[i] || err == nil
		return res, err
	})
	for _, p := range fixed {
		run.Points = append(run.Points, *p)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	for i, c := range configs {
		run.Points = append(run.Points, e.durabilitySearch(ctx, c, o, started[i]))
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return nil
}

// useConfig makes c's environment e.ServiceEnv's for its service and
// returns what puts the previous one back.
func (e *Env) useConfig(c DurabilityConfig) (restore func()) {
	prev, had := e.ServiceEnv[c.Service]
	if e.ServiceEnv == nil {
		e.ServiceEnv = map[string]map[string]string{}
	}
	e.ServiceEnv[c.Service] = maps.Clone(c.Env)
	return func() {
		if had {
			e.ServiceEnv[c.Service] = prev
		} else {
			delete(e.ServiceEnv, c.Service)
		}
	}
}

// durabilitySearch is configuration c's sustainable search, one round,
// on its service started afresh; not run when none of its fixed windows
// could start it (started false).
func (e *Env) durabilitySearch(ctx context.Context, c DurabilityConfig, o DurabilityOptions, started bool) driver.Point {
	defer e.useConfig(c)()
	e.logf("durability: %s %s, sustainable search", c.Service, c.Name())
	th := durabilityThroughput(c.Pair)
	search := driver.Point{Scenario: DurabilitySustainName(c.Pair.Name), Name: c.Name(), DurationS: o.Search.Step.Seconds(), Sides: []string{c.Service}}
	_ = driver.RunPoint(ctx, &search, 1, func(ctx context.Context, svc string, _ int) (*driver.SideResult, error) {
		res := &driver.SideResult{Metrics: map[driver.Metric]float64{}}
		if !started {
			return res, errors.New("not run: no window of the fixed point could start the service")
		}
		// The service runs the last window's configuration, which may be
		// another's: start it afresh on c's.
		if err := e.freshSide(ctx, c.Pair, svc, th.SustainEnv, res.Metrics); err != nil {
			return res, err
		}
		size := o.Search.Sizes[0]
		side := sideLoad{e: e, svc: svc, size: size, body: th.Body(size), o: o.Search, st: &sideState{base: e.URL(svc)}}
		_, err := th.searchAt(ctx, side, o.Search.Ladders[c.Pair.Name], bracket{}, res)
		return res, err
	})
	return search
}

// durabilityThroughput is the throughput scenario of pair p.
func durabilityThroughput(p Pair) ThroughputScenario {
	if p.Name == LogPair.Name {
		return LogThroughput
	}
	return QueueThroughput
}

// durabilityRate is the rate scenario of pair p (its fixed point's
// single-item POSTs).
func durabilityRate(p Pair) RateScenario {
	if p.Name == LogPair.Name {
		return LogScenario
	}
	return QueueScenario
}

// durabilityFixed checks the configuration's synchronous_commit
// (checkSyncCommit), starts c's service fresh (its tables emptied, the
// pair's other side stopped), warms it (2 s at 50/s), then offers o.Rate
// single items per second for o.Duration, counting the CPU of the
// service and of every node (durabilityGroups) over the load, and records
// it per 1,000 items answered 2xx (MetricCPUPerThousand).
func (e *Env) durabilityFixed(ctx context.Context, c DurabilityConfig, o DurabilityOptions) (*driver.SideResult, cost.Set, error) {
	res := &driver.SideResult{Metrics: map[driver.Metric]float64{}}
	if err := checkSyncCommit(ctx, c, res.Metrics); err != nil {
		return res, nil, err
	}
	th := durabilityThroughput(c.Pair)
	if err := e.freshSide(ctx, c.Pair, c.Service, th.SustainEnv, res.Metrics); err != nil {
		return res, nil, err
	}
	rs := durabilityRate(c.Pair)
	if _, err := rs.side(ctx, e, rateAttack{svc: c.Service, rate: 50, dur: 2 * time.Second, settle: e.settle()}); err != nil {
		e.logf("warm-up of %s: %v", c.Service, err)
	}
	groups := e.durabilityGroups(ctx, c, o.StackDir)
	fixed, err := rs.side(ctx, e, rateAttack{svc: c.Service, rate: o.Rate, dur: o.Duration, settle: e.settle(), groups: groups})
	if fixed != nil {
		maps.Copy(fixed.Metrics, res.Metrics)
		res = fixed
	}
	if err != nil {
		return res, groups, err
	}
	var ok int64
	for _, ph := range res.Phases {
		ok += ph.Client.OK
	}
	perThousand(res.Metrics, groups, ok)
	return res, groups, nil
}

// perThousand records in m each group's CPU-seconds ("cpu.<group>.s",
// from side) per 1,000 items, and their total.
func perThousand(m map[driver.Metric]float64, groups cost.Set, items int64) {
	used := map[string]float64{}
	for _, g := range groups {
		if v, ok := m[MetricCPUSeconds(g.Name)]; ok {
			used[g.Name] = v
		}
	}
	sideCPU(m, groups, used, items)
}

// DurabilityTag is the unique part of the queue and topic names of a run
// started at t.
func DurabilityTag(t time.Time) string { return strconv.FormatInt(t.Unix(), 36) }
