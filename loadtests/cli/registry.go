package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/eventstore"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/eventstorerun"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/report"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/scenario"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// loadPair is one pair of the load driver and the report, registered
// once: its command, its services, how it takes part in the commands
// that drive several pairs (results, demo), and how the report shows it.
// Its scenario is in loadtests/scenario, its report's Pair and claims in
// loadtests/report; TestEveryPairIsDriven checks that every pair of
// services/kit/pairs has all of them.
type loadPair struct {
	// report is how the report shows the pair (its section, card,
	// findings and claims); its Name is the pair's name in
	// services/kit/pairs, its command and the suffix of its results
	// files. init hands every entry's report to report.Use.
	report report.Pair
	// help is its command's line in the usage; "" when the pair has no
	// load command of its own (the event store has its bench's command).
	help string
	// pair is its two services: the run's starting state reads their
	// tables when state is set, and results and demo stop them after it.
	pair scenario.Pair
	// state is set when the pair's runs declare their starting state
	// (driver.StartState).
	state bool
	// ownInstances is set when the pair's scenario starts and stops its
	// own instances: results leaves its services alone after it.
	ownInstances bool
	// last is set when results runs the pair after every other step
	// (the throughput, scale-out and long-lived runs): the event store,
	// whose bench starts its own services and topics. It runs through
	// runPair like every pair; its bench writes the results files of its
	// own (one per scenario), so its run stays empty and runPair writes
	// none.
	last bool
	// longLived, when set, is the rate scenario the long-lived variant
	// runs on the pair's tables, filled with history first (its
	// migrations' history SQL, scenario.Env.BuildHistory).
	longLived *scenario.RateScenario
	// duration and rounds are its command's -duration and -rounds
	// defaults (0: the load commands' defaults).
	duration time.Duration
	rounds   int
	// setup registers the pair's flags for cmd (its own command, results
	// or demo) and returns its part of that command, or nil when it
	// takes no part in cmd. set holds the pairs set up before it.
	setup func(fs *flag.FlagSet, cmd string, x *extras, set pairSet) pairRun
}

// pairRun is one pair's part of a command, once the flags are parsed.
type pairRun interface {
	// options completes the pair's options from the parsed flags (c:
	// the common ones).
	options(c common, set pairSet) error
	// estimate is the pair's step of the progress plan.
	estimate(settle time.Duration) scenario.Estimate
	// run measures the pair into run.
	run(ctx context.Context, env *scenario.Env, run *driver.Run) error
}

// pairSet is the pairs taking part in one command, by name.
type pairSet map[string]pairRun

// loadPairs is the project's pair table, in the order the commands run
// the pairs: one entry per pair of services/kit/pairs, the one place a
// pair is registered, for the driver and for the report.
var loadPairs = []loadPair{
	{report: report.Queue(), help: "drive the queue pair (rabbitmq vs no-rabbitmq): fixed rates, ceiling, durable variant",
		pair: scenario.QueuePair, state: true, setup: queueSetup, longLived: &scenario.QueueScenario},
	{report: report.Log(), help: "drive the log pair (kafka vs no-kafka): fixed rates, ceiling, synchronous_commit=off",
		pair: scenario.LogPair, state: true, setup: logSetup, longLived: &scenario.LogScenario},
	{report: report.Documents(), help: "drive the documents pair (mongodb vs no-mongodb): search, rewrite vs patch, WAL",
		pair: scenario.DocumentsPair, state: true, setup: documentsSetup},
	{report: report.Cache(), help: "drive the cache pair (redis vs no-redis, every mode): Zipf profiles, kv writes logged vs unlogged, raw lookups, stampede, staleness, CPU",
		pair: scenario.CachePair, ownInstances: true, setup: cacheSetup,
		duration: scenario.Cache.Defaults.Duration, rounds: scenario.Cache.Defaults.Rounds},
	// The event store is measured by its bench (the eventstore command,
	// eventStoreMain): results runs it last, demo in table order.
	{report: report.EventStore(), setup: eventStoreSetup, last: true},
}

// name is the pair's name: its report's.
func (p loadPair) name() string { return p.report.Name }

func init() { useReports() }

// useReports gives the report the pairs of loadPairs, in table order
// (report.Use): the report's pair table is derived from this one.
func useReports() {
	ps := make([]report.Pair, len(loadPairs))
	for i, p := range loadPairs {
		ps[i] = p.report
	}
	report.Use(ps...)
}

// lookupPair returns the named pair's entry.
func lookupPair(name string) (loadPair, bool) {
	for _, p := range loadPairs {
		if p.name() == name {
			return p, true
		}
	}
	return loadPair{}, false
}

// setupPairs sets up every pair of loadPairs for cmd, in table order,
// and returns the pairs taking part in it.
func setupPairs(fs *flag.FlagSet, cmd string, x *extras) pairSet {
	set := pairSet{}
	for _, p := range loadPairs {
		if r := p.setup(fs, cmd, x, set); r != nil {
			set[p.name()] = r
		}
	}
	return set
}

// options completes every pair's options, in table order.
func (s pairSet) options(c common) error {
	for _, p := range loadPairs {
		if r := s[p.name()]; r != nil {
			if err := r.options(c, s); err != nil {
				return err
			}
		}
	}
	return nil
}

// ratePair is the part of a rate pair (queue, log) in a command: its
// scenario, options and extras.
type ratePair struct {
	sc scenario.RateScenario
	o  scenario.RateOptions
	// rates is the -rates flag (nil when the command has none).
	rates *string
	// derive, when set, makes the options from the other pairs' (the
	// log pair's in results, from the queue pair's).
	derive func(c common, set pairSet) scenario.RateOptions
	x      *extras
	// extra runs the pair's extras after its scenario (nil: none).
	extra func(ctx context.Context, env *scenario.Env, run *driver.Run, o scenario.RateOptions) error
	// extraEst is the extras' part of the estimate.
	extraEst func(settle time.Duration) scenario.Estimate
}

func (p *ratePair) options(c common, set pairSet) error {
	if p.derive != nil {
		p.o = p.derive(c, set)
		return nil
	}
	if p.rates == nil {
		return nil
	}
	var err error
	if p.o.Rates, err = parseRates(*p.rates); err != nil {
		return err
	}
	p.o.Duration, p.o.Rounds = c.duration, c.rounds
	return nil
}

func (p *ratePair) estimate(settle time.Duration) scenario.Estimate {
	e := p.o.Estimate(settle)
	if p.extraEst != nil {
		e = e.Add(p.extraEst(settle))
	}
	return e
}

func (p *ratePair) run(ctx context.Context, env *scenario.Env, run *driver.Run) error {
	err := p.sc.Run(ctx, env, run, p.o)
	if p.extra == nil {
		return err
	}
	return errors.Join(err, p.extra(ctx, env, run, p.o))
}

// queueSetup is the queue pair's part of cmd: its own command and
// results take the rate flags (the declared ceiling: 15 s steps after a
// 5 s warm-up, two bisections, three searches per side) and the
// overload extra; demo runs one rate.
func queueSetup(fs *flag.FlagSet, cmd string, x *extras, _ pairSet) pairRun {
	p := &ratePair{sc: scenario.QueueScenario, x: x}
	switch cmd {
	case pairs.Queue, resultsCommand:
		p.rates = rateFlags(fs, &p.o, scenario.QueueScenario, scenario.QueueScenario.Defaults.CeilingOpts)
		x.registerOverload(fs)
		p.extra, p.extraEst = x.queue, x.overloadEstimate
	case demoCommand:
		p.derive = func(c common, _ pairSet) scenario.RateOptions {
			return scenario.RateOptions{Duration: c.duration, Rounds: c.rounds, Rates: []float64{500}}
		}
	default:
		return nil
	}
	return p
}

// logSetup is the log pair's part of cmd: its own command takes the rate
// flags, results the queue pair's shape with the log pair's own points
// (resultsLog); both add the overload and at-throughput extras. Demo
// runs one rate.
func logSetup(fs *flag.FlagSet, cmd string, x *extras, _ pairSet) pairRun {
	p := &ratePair{sc: scenario.LogScenario, x: x}
	switch cmd {
	case pairs.Log:
		p.rates = rateFlags(fs, &p.o, scenario.LogScenario, scenario.LogScenario.Defaults.CeilingOpts)
	case resultsCommand:
		p.derive = func(_ common, set pairSet) scenario.RateOptions { return resultsLog(set[pairs.Queue].(*ratePair).o) }
	case demoCommand:
		p.derive = func(c common, _ pairSet) scenario.RateOptions {
			return scenario.RateOptions{Duration: c.duration, Rounds: c.rounds, Rates: []float64{200}}
		}
		return p
	default:
		return nil
	}
	x.registerOverload(fs)
	x.registerAtThroughput(fs)
	p.extra = x.log
	p.extraEst = func(settle time.Duration) scenario.Estimate {
		return x.overloadEstimate(settle).Add(x.atThroughputEstimate(settle))
	}
	return p
}

// documentsPair is the documents pair's part of a command.
type documentsPair struct {
	o              scenario.DocumentsOptions
	sizes, rwRates *string
	demo           bool
	// scale is -scale-users.
	scale *string
	// shape is its ceiling searches' shape: its own command's -ceiling-*
	// flags (nil in results, where the queue's flags give it).
	shape *scenario.CeilingOptions
}

// documentsSetup registers the documents flags of its command, results
// and demo (demo with a smaller data set: FerretDB creates users
// slowly, and a small set keeps the demo near 3 minutes).
func documentsSetup(fs *flag.FlagSet, cmd string, _ *extras, _ pairSet) pairRun {
	if cmd != pairs.Documents && cmd != resultsCommand && cmd != demoCommand {
		return nil
	}
	p := &documentsPair{demo: cmd == demoCommand}
	d := scenario.DocumentsScenario.Defaults
	if p.demo {
		d.Users = 200
	}
	fs.IntVar(&p.o.Users, "users", d.Users, "documents: users in the generated data set (created on both sides)")
	fs.Uint64Var(&p.o.Seed, "seed", d.Seed, "documents: data set seed")
	fs.Float64Var(&p.o.SearchRate, "search-rate", d.SearchRate, "documents: containment searches per second")
	fs.DurationVar(&p.o.SearchTimeout, "search-timeout", d.SearchTimeout, "documents: bound of each containment search request")
	p.sizes = fs.String("sizes", formatSizes(d.Sizes), "documents: profile sizes rewritten")
	p.rwRates = fs.String("rewrite-rates", formatRates(d.RewriteRates), "documents: rewrites (then neighbour patches) per second, per size")
	fs.IntVar(&p.o.RewriteUsers, "rewrite-users", d.RewriteUsers, "documents: users of each size rewritten in turn")
	fs.BoolVar(&p.o.LZ4, "lz4", d.LZ4, "documents: measure the rewrite points again with TOAST_COMPRESSION=lz4 on the Postgres side")
	p.scale = fs.String("scale-users", formatInts(d.ScaleUsers), "documents: larger data sets (users, comma-separated, ascending) loaded straight into both databases, the ceilings searched again on each; empty for none")
	p.o.SearchCeilingOpts, p.o.WriteCeilingOpts = d.SearchCeilingOpts, d.WriteCeilingOpts
	ladderFlags(fs, ladder{"search-ceiling", "documents containment search"}, &p.o.SearchCeiling, d.SearchCeiling, &p.o.SearchCeilingOpts)
	ladderFlags(fs, ladder{"write-ceiling", "documents profile write"}, &p.o.WriteCeiling, d.WriteCeiling, &p.o.WriteCeilingOpts)
	if cmd == pairs.Documents {
		p.shape = &scenario.CeilingOptions{}
		ceilingShapeFlags(fs, p.shape, d.SearchCeilingOpts)
	}
	return p
}

func (p *documentsPair) options(c common, set pairSet) error {
	shape := shapeOf(set)
	if p.shape != nil {
		shape = *p.shape
	}
	p.o.SearchCeilingOpts, p.o.WriteCeilingOpts = withShape(p.o.SearchCeilingOpts, shape), withShape(p.o.WriteCeilingOpts, shape)
	var err error
	if p.o.Sizes, err = parseSizes(*p.sizes); err != nil {
		return err
	}
	if p.o.ScaleUsers, err = parseInts(*p.scale); err != nil {
		return fmt.Errorf("-scale-users: %v", err)
	}
	if err := scenario.ValidateScaleUsers(p.o.Users, p.o.ScaleUsers); err != nil {
		return fmt.Errorf("-scale-users: %v", err)
	}
	if rr, err := parseRates(*p.rwRates); err != nil || len(rr) == 0 {
		return fmt.Errorf("-rewrite-rates: %v", err)
	} else {
		p.o.RewriteRates = rr
	}
	p.o.Duration, p.o.Rounds = c.duration, c.rounds
	if p.demo {
		p.o = demoDocuments(p.o)
	}
	return nil
}

func (p *documentsPair) estimate(settle time.Duration) scenario.Estimate { return p.o.Estimate(settle) }

func (p *documentsPair) run(ctx context.Context, env *scenario.Env, run *driver.Run) error {
	return scenario.DocumentsScenario.Run(ctx, env, run, p.o)
}

// cachePair is the cache pair's part of a command.
type cachePair struct {
	s   scenario.CacheScenario
	o   scenario.CacheOptions
	cmd string
	// shape is its read ceiling's shape: its own command's -ceiling-*
	// flags (results takes the queue's).
	shape scenario.CeilingOptions
	// ro are the roles beyond the cache (scenario.CacheRoles), run after
	// the cache points (off in demo).
	ro rolesFlags
}

// cacheSetup registers the cache flags of its command and results; demo
// runs demoCache's short scenario.
func cacheSetup(fs *flag.FlagSet, cmd string, _ *extras, _ pairSet) pairRun {
	p := &cachePair{s: scenario.Cache, o: scenario.Cache.Defaults, cmd: cmd}
	switch cmd {
	case pairs.Cache, resultsCommand:
		fs.Float64Var(&p.o.Rate, "cache-rate", p.o.Rate, "cache: product requests per second of each profile")
		fs.Float64Var(&p.o.KVRate, "kv-rate", p.o.KVRate, "cache: kv writes (then reads) per second")
		fs.IntVar(&p.o.Keys, "keys", p.o.Keys, "cache: product ids the Zipf distribution draws from (1 to keys)")
		fs.IntVar(&p.o.StampedeN, "stampede-n", p.o.StampedeN, "cache: concurrent GETs of one cold key")
		fs.IntVar(&p.o.OriginWorkMS, "origin-work-ms", p.o.OriginWorkMS, "cache: ORIGIN_WORK_MS of the stampede and staleness points")
		fs.DurationVar(&p.o.StaleTTL, "stale-ttl", p.o.StaleTTL, "cache: PRODUCT_TTL of the stampede and staleness points")
		fs.DurationVar(&p.o.RawDuration, "raw-lookup-duration", p.o.RawDuration, "cache: duration of each raw lookup loop")
		ladderFlags(fs, ladder{"read-ceiling", "cache read"}, &p.o.ReadCeiling, p.o.ReadCeiling, &p.o.ReadCeilingOpts)
		if cmd == pairs.Cache {
			ceilingShapeFlags(fs, &p.shape, p.o.ReadCeilingOpts)
		}
		p.ro.register(fs)
	case demoCommand:
		p.ro.o.Off = true
	default:
		return nil
	}
	return p
}

func (p *cachePair) options(c common, set pairSet) error {
	switch p.cmd {
	case pairs.Cache:
		// Its own command takes -duration and -rounds; results keeps the
		// scenario's declared size.
		p.o.Duration, p.o.Rounds = c.duration, c.rounds
		p.o.ReadCeilingOpts = withShape(p.o.ReadCeilingOpts, p.shape)
	case resultsCommand:
		p.o.ReadCeilingOpts = withShape(p.o.ReadCeilingOpts, shapeOf(set))
	case demoCommand:
		p.s, p.o = demoCache(c)
	}
	return p.ro.parse()
}

func (p *cachePair) estimate(settle time.Duration) scenario.Estimate {
	return p.s.Estimate(p.o, settle).Add(scenario.CacheRoles.Estimate(p.ro.o))
}

func (p *cachePair) run(ctx context.Context, env *scenario.Env, run *driver.Run) error {
	if err := p.s.Run(ctx, env, run, p.o); err != nil {
		return err
	}
	return scenario.CacheRoles.Run(ctx, env, run, p.ro.o)
}

// eventStorePair is the event store's part of results or demo.
type eventStorePair struct {
	cmd string
	c   common
	// ceiling is results' append ceiling search, a step of its own after
	// the bench (eventStoreCeilingSteps); nil in demo.
	ceiling *eventStoreCeiling
}

// eventStoreSetup: the event store takes part in results (the bench,
// long streams, cleanup and the causal experiment, then the append
// ceiling) and in demo (the append scenario).
func eventStoreSetup(fs *flag.FlagSet, cmd string, _ *extras, _ pairSet) pairRun {
	if cmd != resultsCommand && cmd != demoCommand {
		return nil
	}
	p := &eventStorePair{cmd: cmd}
	if cmd == resultsCommand {
		p.ceiling = &eventStoreCeiling{}
		p.ceiling.register(fs, cmd)
	}
	return p
}

func (p *eventStorePair) options(c common, set pairSet) error {
	p.c = c
	if p.ceiling != nil {
		p.ceiling.o = withShape(p.ceiling.o, shapeOf(set))
	}
	return nil
}

func (p *eventStorePair) estimate(time.Duration) scenario.Estimate {
	if p.cmd == demoCommand {
		return eventstore.Append.Estimate(eventstorerun.DemoOptions(p.c.host, p.c.portOffset), 2)
	}
	dirs, _ := eventstorerun.CompareBindirs()
	// no-kurrentdb on each other version, beside the stack's, after its
	// server's start (eventstorerun.CompareStart).
	start := time.Duration(len(dirs)) * eventstorerun.CompareStart
	return eventstore.BenchEstimate(eventstorerun.ResultsOptions(p.c.host, p.c.portOffset, p.c.resultsDir), len(eventstorerun.Services)+len(dirs)).
		Add(scenario.Estimate{Typical: start, Bound: 2 * start}).
		Add(eventstore.LongEstimate(len(eventstorerun.Services) + 1)).
		Add(eventstore.CausalEstimate(eventstore.DefaultCausalOptions()))
}

// run is the event store's part of results or demo. In results the
// bench writes its own results files (one per scenario) and leaves run
// empty; in demo, run becomes the demo's short append bench's run.
func (p *eventStorePair) run(ctx context.Context, env *scenario.Env, run *driver.Run) error {
	if p.cmd != demoCommand {
		o := eventstorerun.ResultsOptions(p.c.host, p.c.portOffset, p.c.resultsDir)
		o.DatabaseURL = p.c.pgURL
		return eventstorerun.Results(ctx, env, o)
	}
	got, err := eventstorerun.Demo(ctx, env, eventstorerun.DemoOptions(p.c.host, p.c.portOffset))
	*run = *got
	return err
}
