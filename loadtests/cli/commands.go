package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/term"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/eventstore"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/eventstorerun"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/experiments"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/launch"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/report"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/resultfile"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/scenario"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/versions"
)

// The load commands that are not a pair's.
const (
	resultsCommand = "results"
	demoCommand    = "demo"
	reportCommand  = "report"
)

// common holds the flags every load command takes.
type common struct {
	host, start, resultsDir, logDir, pgURL string
	portOffset, rounds                     int
	duration, settle                       time.Duration
	maxWorkers                             uint64
	progress                               bool
	out, chartsDir, readme                 string
	state                                  stateFlags

	// publishFailed lets `results` publish failed points as failed
	// instead of exiting non-zero (-publish-failed).
	publishFailed bool
}

func (c *common) register(fs *flag.FlagSet, rounds int, duration time.Duration) {
	fs.StringVar(&c.host, "host", "localhost", "host the services listen on")
	fs.IntVar(&c.portOffset, "port-offset", 0, "added to every service's default port (to run beside services of your own)")
	fs.StringVar(&c.start, "start", scenario.StartAuto, "auto: use services already up and start the others; always: start every service; never: only use running ones")
	fs.StringVar(&c.resultsDir, "results", "results", "folder for the results JSON files")
	fs.StringVar(&c.logDir, "logs", filepath.Join(os.TempDir(), "wpe-loadtests-logs"), "folder for the logs of services the driver starts")
	fs.StringVar(&c.pgURL, "database-url", envOr("DATABASE_URL", versions.DefaultPostgresURL), "Postgres, for the server version and the WAL measurements")
	fs.IntVar(&c.rounds, "rounds", rounds, "rounds per point (each side once per round, order rotated; at least 3 for published numbers)")
	fs.DurationVar(&c.duration, "duration", duration, "duration of each attack")
	fs.DurationVar(&c.settle, "settle", 20*time.Second, "longest wait for a backlog to drain after an attack")
	fs.Uint64Var(&c.maxWorkers, "max-workers", 2000, "most concurrent requests per attack (beyond it, waits still count: latency is from the intended send time)")
	fs.BoolVar(&c.progress, "progress", true, "report progress on stderr: the estimated duration, then a bar per attack on a terminal or one line per attack elsewhere")
	fs.StringVar(&c.out, "out", "RESULTS.md", "report: the Markdown file to write")
	fs.StringVar(&c.chartsDir, "charts", "docs/results", "report: the folder for the SVG charts")
	fs.StringVar(&c.readme, "readme", "README.md", "report: the file whose generated findings block (between its marker comments) is rewritten; empty for none")
}

func envOr(k, d string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return d
}

// rateFlags registers the flags of a rate scenario, their defaults from
// the scenario's declared value with ceiling c (the results command
// shortens it), and returns the -rates flag's value.
func rateFlags(fs *flag.FlagSet, o *scenario.RateOptions, sc scenario.RateScenario, c scenario.CeilingOptions) *string {
	d := sc.Defaults
	r := fs.String("rates", formatRates(d.Rates), "fixed rates per second, comma-separated")
	fs.BoolVar(&o.Ceiling, "ceiling", d.Ceiling, "run the ceiling search")
	fs.Float64Var(&o.CeilingOpts.Start, "ceiling-start", c.Start, "ceiling: first rate")
	fs.Float64Var(&o.CeilingOpts.Factor, "ceiling-factor", c.Factor, "ceiling: rate multiplier while steps pass")
	fs.Float64Var(&o.CeilingOpts.Max, "ceiling-max", c.Max, "ceiling: highest rate tried")
	ceilingShapeFlags(fs, &o.CeilingOpts, c)
	variant := sc.VariantFlag()
	help := "run the " + variant + " variant (restarts the services with another environment)"
	for _, x := range sc.Extras {
		help += ", then the " + x.Name + " variant"
	}
	o.Extras = len(sc.Extras)
	o.DesignSides = sc.DesignSides()
	fs.BoolVar(&o.Designs, "ceiling-designs", d.Designs, "ceiling: after the main search, search the ceiling designs too (equal durability, the specialist alone, the tuning table's before and after)")
	fs.BoolVar(&o.Variant, variant, d.Variant, help)
	fs.Float64Var(&o.VariantRate, variant+"-rate", d.VariantRate, "rate of the "+variant+" variant")
	return r
}

// formatRates is the -rates spelling of rates.
func formatRates(rates []float64) string {
	var parts []string
	for _, r := range rates {
		parts = append(parts, strconv.FormatFloat(r, 'g', -1, 64))
	}
	return strings.Join(parts, ",")
}

func parseRates(s string) ([]float64, error) {
	var out []float64
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		v, err := strconv.ParseFloat(f, 64)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("bad rate %q", f)
		}
		out = append(out, v)
	}
	return out, nil
}

// formatSizes is the -sizes spelling of sizes ("512KiB,2MiB").
func formatSizes(sizes []int) string {
	var parts []string
	for _, n := range sizes {
		switch {
		case n >= 1<<20 && n%(1<<20) == 0:
			parts = append(parts, strconv.Itoa(n>>20)+"MiB")
		case n >= 1<<10 && n%(1<<10) == 0:
			parts = append(parts, strconv.Itoa(n>>10)+"KiB")
		default:
			parts = append(parts, strconv.Itoa(n))
		}
	}
	return strings.Join(parts, ",")
}

func parseSizes(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		mult := 1
		switch {
		case strings.HasSuffix(f, "KiB"), strings.HasSuffix(f, "KB"):
			mult, f = 1<<10, strings.TrimRight(f, "KiB")
		case strings.HasSuffix(f, "MiB"), strings.HasSuffix(f, "MB"):
			mult, f = 1<<20, strings.TrimRight(f, "MiB")
		}
		v, err := strconv.Atoi(f)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("bad size %q (e.g. 512KiB, 2MiB)", f)
		}
		out = append(out, v*mult)
	}
	return out, nil
}

// parseInts parses a comma-separated list of positive integers ("" is
// none).
func parseInts(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		v, err := strconv.Atoi(f)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("bad count %q (e.g. 100000)", f)
		}
		out = append(out, v)
	}
	return out, nil
}

// loadMain runs one command of loadTable and returns the exit code.
// Flag errors and -h write to stderr; -h exits 0, a bad flag 2.
func loadMain(cmd string, args []string, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := runLoad(ctx, cmd, args, stderr); err != nil {
		if errors.Is(err, errFlags) {
			return 2
		}
		fmt.Fprintln(stderr, "loadtests "+cmd+":", err)
		return 1
	}
	return 0
}

// errFlags is a command line the flag package refused (and explained).
var errFlags = errors.New("bad flags")

// runLoad runs one command of loadTable: its flags (the common ones,
// then its own), its options, the environment and the progress plan,
// then the command itself.
func runLoad(ctx context.Context, cmd string, args []string, stderr io.Writer) error {
	lc, ok := loadTable[cmd]
	if !ok {
		return fmt.Errorf("unknown command %q", cmd)
	}
	fs := commandFlagSet(cmd, stderr)
	var c common
	c.register(fs, lc.rounds, lc.duration)
	x := newExtras()
	a := lc.setup(fs, &c, x)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return errFlags
	}
	if a.direct != nil {
		return a.direct(c)
	}
	if err := checkCommon(c); err != nil {
		return err
	}
	if a.options != nil {
		if err := a.options(c); err != nil {
			return err
		}
	}
	root, err := launch.Root()
	if err != nil {
		return err
	}
	x.overloadOpts.StackDir = scenario.StackDir(root)
	if a.withRoot != nil {
		if err := a.withRoot(c, root); err != nil {
			return err
		}
	}
	env, cleanup, err := newEnv(c, root)
	if err != nil {
		return err
	}
	defer cleanup()
	if c.progress {
		env.Progress = newProgress(os.Stderr, cmd, c.settle, x.plan(a.plan(c)))
	}
	return a.run(ctx, invocation{c, env, root, args})
}

// checkCommon checks the common flags' values.
func checkCommon(c common) error {
	if c.rounds < 1 {
		return errors.New("-rounds must be at least 1")
	}
	if c.state.mode != "" {
		return c.state.validate()
	}
	return nil
}

// loadCommand is one command of loadTable.
type loadCommand struct {
	// duration and rounds are -duration's and -rounds' defaults.
	duration time.Duration
	rounds   int
	// setup registers the command's own flags on fs (the common ones are
	// in c, the extras' in x) and returns what it does once they are
	// parsed.
	setup func(fs *flag.FlagSet, c *common, x *extras) action
}

// action is what a load command does once its flags are parsed.
type action struct {
	// direct, when set, is all the command does, without services
	// (report).
	direct func(c common) error
	// options completes the options from the parsed flags; withRoot
	// those that need the repository's root.
	options  func(c common) error
	withRoot func(c common, root string) error
	// plan is the progress plan, before the extras' steps.
	plan func(c common) []step
	// run runs the command.
	run func(ctx context.Context, inv invocation) error
}

// invocation is what every step of one load command shares: its common
// flags, the environment of services and servers, the repository's root
// and the command line its results files record.
type invocation struct {
	c    common
	env  *scenario.Env
	root string
	args []string
}

// defaultRounds and defaultDuration are -rounds' and -duration's
// defaults when a command declares none.
const (
	defaultRounds   = 3
	defaultDuration = 10 * time.Second
)

// loadTable is every load command: one per pair of loadPairs that has a
// command of its own, and the others.
var loadTable = loadCommandTable()

func loadCommandTable() map[string]loadCommand {
	t := map[string]loadCommand{
		// demo: five pairs in about 3 minutes on 2 cores.
		resultsCommand:    {duration: 5 * time.Second, rounds: defaultRounds, setup: resultsSetup},
		demoCommand:       {duration: 5 * time.Second, rounds: 1, setup: demoSetup},
		reportCommand:     {duration: defaultDuration, rounds: defaultRounds, setup: reportSetup},
		longLivedCommand:  {duration: defaultDuration, rounds: defaultRounds, setup: longLivedSetup},
		throughputCommand: {duration: scenario.ThroughputDefaults.Duration, rounds: scenario.ThroughputDefaults.Rounds, setup: throughputSetup},
		// The fixed point's length is the scenario's own (-size).
		scenario.DurabilityCommand: {duration: scenario.DurabilityDefaults.Duration, rounds: 1, setup: durabilitySetup},
		// The search's shape is its -ceiling-* flags, not -duration.
		eventstore.CeilingCommand: {duration: defaultDuration, rounds: 1, setup: eventStoreCeilingSetup},
	}
	for _, p := range loadPairs {
		if p.help != "" {
			t[p.name()] = pairCommand(p)
		}
	}
	return t
}

// pairCommand is a pair's own command: its scenario and extras, as one
// results file.
func pairCommand(p loadPair) loadCommand {
	lc := loadCommand{duration: p.duration, rounds: p.rounds}
	if lc.duration == 0 {
		lc.duration = defaultDuration
	}
	if lc.rounds == 0 {
		lc.rounds = defaultRounds
	}
	lc.setup = func(fs *flag.FlagSet, c *common, x *extras) action {
		if p.state {
			c.state.registerState(fs)
		}
		set := setupPairs(fs, p.name(), x)
		r := set[p.name()]
		return action{
			options: set.options,
			plan:    func(c common) []step { return []step{{p.name(), r.estimate(c.settle)}} },
			run: func(ctx context.Context, inv invocation) error {
				return runPair(ctx, inv, p.name(), func(run *driver.Run) error { return r.run(ctx, inv.env, run) })
			},
		}
	}
	return lc
}

// resultsSetup is the results command: every pair at the make-results
// size, the throughput and scale-out scenarios, the long-lived variant,
// the event-store bench and the failure-mode experiments, then the
// report.
func resultsSetup(fs *flag.FlagSet, c *common, x *extras) action {
	fs.BoolVar(&c.publishFailed, "publish-failed", false, "results: publish points that failed (shown as failed, with their reasons) and exit 0 instead of exiting non-zero")
	x.registerResults(fs)
	c.state.registerState(fs)
	c.state.registerHistory(fs)
	c.state.registerLongLived(fs)
	set := setupPairs(fs, resultsCommand, x)
	tf := registerThroughput(fs, resultsCommand)
	var to scenario.ThroughputOptions
	return action{
		options: set.options,
		withRoot: func(c common, root string) (err error) {
			to, err = tf.options(c, root)
			return err
		},
		plan: func(c common) []step { return resultsPlan(c, set, to) },
		run: func(ctx context.Context, inv invocation) error {
			return runResults(ctx, inv, set, x, to)
		},
	}
}

// resultsPlan is the results command's plan: the pairs, the throughput
// and scale-out scenarios, the long-lived variant, then the pairs run
// last (the event store's bench).
func resultsPlan(c common, set pairSet, to scenario.ThroughputOptions) []step {
	steps := set.steps(c.settle, false)
	steps = append(steps, step{throughputCommand, to.Estimate(c.settle)}, step{scaleoutCommand, scenario.ScaleOutDefaults.Estimate(c.settle)})
	if c.state.longLived {
		steps = append(steps, resultsLongLived(c, set).steps(c.settle, c.state.history)...)
	}
	steps = append(steps, set.steps(c.settle, true)...)
	steps = append(steps, eventStoreCeilingPlan(c, set)...)
	// Measured only when the cluster profile runs (runResultsDurability).
	return append(steps, step{scenario.DurabilityCommand, scenario.DurabilityDefaults.Estimate(scenario.DurabilityDefaults.Count())})
}

// resultsLongLived are the long-lived variant's options in results: the
// rate pairs' options of the run.
func resultsLongLived(c common, set pairSet) longLivedOpts {
	opts := map[string]scenario.RateOptions{}
	for name, r := range set {
		if rp, ok := r.(*ratePair); ok {
			opts[name] = rp.o
		}
	}
	return longLivedOptions(opts, c)
}

// steps are the plan's steps of the pairs in set whose last flag is last
// (results runs those after its other steps), in table order.
func (s pairSet) steps(settle time.Duration, last bool) []step {
	var out []step
	for _, p := range loadPairs {
		r := s[p.name()]
		if r == nil || p.last != last {
			continue
		}
		out = append(out, step{p.name(), r.estimate(settle)})
	}
	return out
}

// demoSteps are the plan's steps of demo: every pair of set, in table
// order.
func (s pairSet) demoSteps(settle time.Duration) []step {
	var out []step
	for _, p := range loadPairs {
		if r := s[p.name()]; r != nil {
			out = append(out, step{p.name(), r.estimate(settle)})
		}
	}
	return out
}

// demoSetup is the demo command: every pair briefly, one table each.
func demoSetup(fs *flag.FlagSet, _ *common, x *extras) action {
	set := setupPairs(fs, demoCommand, x)
	return action{
		options: set.options,
		plan: func(c common) []step {
			return set.demoSteps(c.settle)
		},
		run: func(ctx context.Context, inv invocation) error {
			return runDemo(ctx, inv, set)
		},
	}
}

// reportSetup is the report command: RESULTS.md, the charts and the
// README's findings from the results files, without any service.
func reportSetup(fs *flag.FlagSet, _ *common, _ *extras) action {
	inputs := fs.String("in", "", "results files (comma-separated); default the newest of each pair in -results")
	return action{direct: func(c common) error { return writeReport(c, *inputs) }}
}

// longLivedSetup is the long-lived variant alone, at its pairs'
// scenarios' declared rates.
func longLivedSetup(fs *flag.FlagSet, c *common, _ *extras) action {
	c.state.registerSchemas(fs)
	c.state.registerHistory(fs)
	opts := func(c common) longLivedOpts { return longLivedOptions(nil, c) }
	return action{
		plan: func(c common) []step { return opts(c).steps(c.settle, c.state.history) },
		run: func(ctx context.Context, inv invocation) error {
			_, err := runLongLived(ctx, inv, opts(inv.c))
			return err
		},
	}
}

// throughputSetup is the throughput command (and sustainable, which main
// maps to it): the throughput scenario as one results file.
func throughputSetup(fs *flag.FlagSet, c *common, _ *extras) action {
	c.state.registerState(fs)
	tf := registerThroughput(fs, throughputCommand)
	var to scenario.ThroughputOptions
	return action{
		withRoot: func(c common, root string) (err error) {
			to, err = tf.options(c, root)
			return err
		},
		plan: func(c common) []step { return []step{{throughputCommand, to.Estimate(c.settle)}} },
		run: func(ctx context.Context, inv invocation) error {
			return runThroughput(ctx, inv, to)
		},
	}
}

// step is one part of a command's plan and its estimate.
type step struct {
	name string
	est  scenario.Estimate
}

// newProgress returns the progress reporter of cmd, bars when w is a
// terminal and one line per attack otherwise, after writing the plan's
// estimate to w.
func newProgress(w *os.File, cmd string, settle time.Duration, steps []step) *driver.Progress {
	var ds []driver.Step
	var total scenario.Estimate
	var parts []string
	for _, s := range steps {
		ds = append(ds, driver.Step{Name: s.name, Attacks: s.est.Attacks, Planned: s.est.Typical})
		total = total.Add(s.est)
		parts = append(parts, fmt.Sprintf("%s ~%s", s.name, driver.Human(s.est.Typical)))
	}
	fmt.Fprintf(w, "%s: estimated ~%s (%s); up to ~%s if every backlog takes the whole %s settle bound and every ceiling search climbs its whole ladder\n",
		cmd, driver.Human(total.Typical), strings.Join(parts, ", "), driver.Human(total.Bound), settle)
	return driver.NewProgress(w, term.IsTerminal(int(w.Fd())), ds)
}

// resultsLog is the log pair's options in the results command: the queue
// flags' shape with the log pair's own points.
func resultsLog(qo scenario.RateOptions) scenario.RateOptions {
	d := scenario.LogScenario.Defaults
	lo := qo
	lo.Rates = d.Rates
	lo.CeilingOpts = withShape(d.CeilingOpts, qo.CeilingOpts)
	lo.VariantRate = d.VariantRate
	lo.Extras = len(scenario.LogScenario.Extras)
	lo.Designs, lo.DesignSides = qo.Designs, scenario.LogScenario.DesignSides()
	return lo
}

// demoDocuments returns the demo's short documents options: one size
// of rewrite, attacks of at most 3 s.
func demoDocuments(do scenario.DocumentsOptions) scenario.DocumentsOptions {
	do.Sizes, do.RewriteRates, do.RewriteUsers, do.LZ4 = []int{512 << 10}, []float64{5}, 2, false
	do.SearchCeiling, do.WriteCeiling, do.ScaleUsers = false, false, nil
	// FerretDB answers the Mongo side slowly: 3 s attacks keep the pair
	// near a minute.
	do.Duration = min(do.Duration, 3*time.Second)
	return do
}

// newEnv assembles the scenario environment; cleanup stops every service
// the driver started.
func newEnv(c common, root string) (*scenario.Env, func(), error) {
	env := &scenario.Env{
		Host: c.host, PortOffset: c.portOffset, Start: c.start, Out: os.Stdout,
		Settle: c.settle, MaxWorkers: c.maxWorkers, PostgresURL: c.pgURL, StackDir: scenario.StackDir(root),
	}
	client := &http.Client{Timeout: 3 * time.Second}
	env.Probe = func(ctx context.Context, name string, port int) error {
		// "service@instance" is one more instance of service: it
		// reports service's name.
		name, _, _ = strings.Cut(name, "@")
		s := checkOne(ctx, client, c.host, Target{Name: name, Port: port})
		if !s.Up {
			return errors.New(s.Err)
		}
		return nil
	}
	var err error
	if env.ServiceEnv, err = c.state.serviceEnv(); err != nil {
		return nil, nil, err
	}
	cleanup := func() {}
	switch c.start {
	case scenario.StartAuto, scenario.StartAlways:
		l, err := launch.New(root, c.logDir)
		if err != nil {
			return nil, nil, err
		}
		env.Launcher = l
		cleanup = func() {
			if err := l.StopAll(30 * time.Second); err != nil {
				fmt.Fprintln(os.Stderr, "stopping services:", err)
			}
		}
	case scenario.StartNever:
	default:
		return nil, nil, fmt.Errorf("-start %q: want auto, always or never", c.start)
	}
	return env, cleanup, nil
}

// runPair runs one pair's scenario, writes its results file and prints
// its table. The file is written even when the scenario fails midway.
func runPair(ctx context.Context, inv invocation, pair string, fn func(*driver.Run) error) error {
	c, env := inv.c, inv.env
	env.Progress.Begin(pair)
	run := driver.NewRun(pair, inv.args, time.Now())
	run.Versions = versions.Collect(ctx, versionsConfig(c, inv.root))
	run.Settings["host"] = c.host
	run.Settings["port_offset"] = c.portOffset
	prepareStart(ctx, c, env, run, pair)
	err := fn(run)
	if err != nil {
		run.Note("run ended early: %v", err)
		run.Aborted = err.Error()
	}
	run.FinishedAt = time.Now().UTC()
	if len(run.Points) > 0 || len(run.Ceilings) > 0 {
		path, werr := driver.WriteRun(c.resultsDir, run)
		if werr != nil {
			return errors.Join(err, werr)
		}
		report.Table(os.Stdout, run)
		fmt.Printf("\nresults: %s\n", path)
	}
	return err
}

func versionsConfig(c common, root string) versions.Config {
	v := versions.FromEnv(root)
	v.PostgresURL = c.pgURL
	return v
}

// stopPair stops the pair's services the driver started, to leave the CPU
// to the next pair.
func stopPair(env *scenario.Env, p scenario.Pair) {
	if env.Launcher == nil {
		return
	}
	for _, s := range p.Services() {
		_ = env.Launcher.Stop(s.Name, 30*time.Second)
	}
}

func runResults(ctx context.Context, inv invocation, set pairSet, x *extras, to scenario.ThroughputOptions) error {
	c, env, root := inv.c, inv.env, inv.root
	if x.raw && x.runs("raw") {
		env.Progress.Begin("raw")
		if err := measureRaw(ctx, c, x.rawDuration, os.Stderr); err != nil {
			fmt.Fprintf(os.Stderr, "raw: %v (the report will say what is missing)\n", err)
		}
	}
	files, err := runResultsSteps(ctx, inv, x.keep(resultsSteps(ctx, c, env, set, to)))
	if err != nil {
		return err
	}
	if c.state.longLived && x.runs(longLivedCommand) {
		f, err := runLongLived(ctx, inv, resultsLongLived(c, set))
		env.ReleaseSlot(ctx)
		if f != "" {
			files = append(files, f)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "long-lived: %v (the report will say what is missing)\n", err)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	// The pairs run last (the event store's bench writes its own files,
	// which the report reads from the results folder), then the event
	// store's append ceiling (its own file, which the report reads the
	// same way).
	last := append(pairSteps(ctx, env, set, true), eventStoreCeilingSteps(ctx, env, set)...)
	if _, err := runResultsSteps(ctx, inv, x.keep(last)); err != nil {
		return err
	}
	// Its file stays out of files: the report reads the newest itself,
	// and a failed configuration is a row that says so, not a failed
	// make results.
	if x.runs(scenario.DurabilityCommand) {
		runResultsDurability(ctx, inv)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if x.experiments && x.runs("experiments") {
		env.Progress.Begin("experiments")
		xenv := experiments.Env{PostgresURL: c.pgURL, Root: root}
		xenv.CompareBindirs, xenv.CompareNone = experiments.DefaultCompareBindirs(root)
		for _, set := range experiments.Groups(experiments.All()) {
			if _, err := runExperiments(ctx, xenv, experiments.Full, set, experimentsOut{c.resultsDir, os.Stdout, os.Stderr}); err != nil {
				fmt.Fprintf(os.Stderr, "experiments: %v (the report will say what is missing)\n", err)
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	inputs := strings.Join(files, ",")
	if len(x.steps) > 0 {
		// Some steps only: the report reads every step's newest file.
		inputs = ""
	}
	if err := writeReport(c, inputs); err != nil {
		return err
	}
	return publishVerdict(c, files)
}

// keep is those of steps the results command runs (-steps).
func (x *extras) keep(steps []resultsStep) []resultsStep {
	return slices.DeleteFunc(steps, func(s resultsStep) bool { return !x.runs(s.name) })
}

// resultsStep is one results file of the results command.
type resultsStep struct {
	// name is its command (its results file's suffix).
	name string
	// stop is the pair whose services are stopped after it (empty for a
	// step that stops its own).
	stop scenario.Pair
	fn   func(*driver.Run) error
}

// resultsSteps are the results command's steps with a results file each:
// every pair of set but those run last (pairSteps), in table order, then
// the throughput and scale-out scenarios.
func resultsSteps(ctx context.Context, c common, env *scenario.Env, set pairSet, to scenario.ThroughputOptions) []resultsStep {
	steps := pairSteps(ctx, env, set, false)
	so := scenario.ScaleOutDefaults
	so.StackDir = to.StackDir
	return append(steps,
		// Stops each pair's services itself; its Pair is empty.
		resultsStep{throughputCommand, scenario.Pair{}, throughputRun(ctx, c, env, to)},
		// Starts and stops its own instances of the queue pair (scaleout.go).
		resultsStep{scaleoutCommand, scenario.Pair{}, scaleoutRun(ctx, env, so)})
}

// pairSteps are results' steps of the pairs of set whose last flag is
// last, in table order.
func pairSteps(ctx context.Context, env *scenario.Env, set pairSet, last bool) []resultsStep {
	var steps []resultsStep
	for _, p := range loadPairs {
		r := set[p.name()]
		if r == nil || p.last != last {
			continue
		}
		stop := p.pair
		if p.ownInstances {
			// It starts and stops its own instances (the cache: two per
			// mode, at the scenario's declared size, under 5 minutes on 2
			// cores).
			stop = scenario.Pair{}
		}
		steps = append(steps, resultsStep{p.name(), stop, func(run *driver.Run) error { return r.run(ctx, env, run) }})
	}
	return steps
}

// runResultsSteps runs steps, one results file each, and returns the
// files written; a step that fails is reported and the next one runs,
// until ctx ends.
func runResultsSteps(ctx context.Context, inv invocation, steps []resultsStep) ([]string, error) {
	c, env := inv.c, inv.env
	var files []string
	for _, step := range steps {
		before := resultfile.Newest(c.resultsDir, resultfile.Kind(step.name))
		err := runPair(ctx, inv, step.name, step.fn)
		stopPair(env, step.stop)
		env.ReleaseSlot(ctx)
		if f := resultfile.Newest(c.resultsDir, resultfile.Kind(step.name)); f != "" && f != before {
			files = append(files, f)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v (the report will say what is missing)\n", step.name, err)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	return files, nil
}

// eventStoreMain runs `eventstore <append|point-read|catch-up> [flags]`:
// the bench's scenario, then its RESULTS.md section rendered by package
// report from every JSON result present; it returns the exit status.
func eventStoreMain(args []string, stdout, stderr io.Writer) int {
	const use = "usage: go run ./loadtests eventstore <append|point-read|catch-up|causal> [flags]  (-h for flags)"
	if len(args) < 1 {
		fmt.Fprintln(stderr, use)
		return 2
	}
	if args[0] == causalScenario {
		return causalMain(args[1:], stdout, stderr)
	}
	fs := newFlagSet("eventstore "+args[0], stderr)
	o := eventstore.DefaultOptions()
	eventStoreServers(&o.DatabaseURL, &o.KafkaBrokers)
	o.Register(fs)
	compare := fs.String("compare-bindirs", "", "comma-separated bin directories of other PostgreSQL versions: no-kurrentdb also runs against a private server of each (the -database-url server's settings), as engine no-kurrentdb-pg<major> beside the targets; \"default\": PostgreSQL 18 from make deps-cluster ("+experiments.CompareBindirsEnv+")")
	const header = use + "\n\nflags (the same for every scenario):\n"
	fs.Usage = func() { printFlags(stderr, fs, header) }
	if isHelp(args[0]) {
		printFlags(stdout, fs, header)
		return 0
	}
	if rc, ok := parseFlags(fs, args[1:]); !ok {
		return rc
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if *compare != "" {
		closeCompared, err := eventstorerun.Compare(ctx, &o, *compare, stderr)
		defer closeCompared()
		if err != nil {
			return fail(stderr, 1, err)
		}
	}
	// One line per loop: the plan's estimate first, as the load commands
	// write it.
	est := eventstore.Append.Estimate(o, len(eventstore.Append.Sides))
	if args[0] != "append" {
		est = scenario.Estimate{}
	}
	progress := driver.NewProgress(stderr, false, []driver.Step{{Name: "eventstore " + args[0], Attacks: est.Attacks, Planned: est.Typical}})
	if args[0] == "append" {
		fmt.Fprintf(stderr, "eventstore append: estimated ~%s (at most ~%s) if every engine answers\n", driver.Human(est.Typical), driver.Human(est.Bound))
	}
	progress.Begin("eventstore " + args[0])
	path, err := eventstore.Bench(ctx, args[0], o, progress, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		if errors.Is(err, eventstore.ErrUnknownScenario) {
			return 2
		}
		return 1
	}
	es, err := eventstore.LoadRuns(o.Out)
	if err != nil {
		return fail(stderr, 1, err)
	}
	md := report.EventStoreSection(es)
	wrote := path
	if o.MD != "" {
		if err := os.WriteFile(o.MD, []byte(md), 0o644); err != nil {
			return fail(stderr, 1, err)
		}
		wrote += " and " + o.MD
	}
	fmt.Fprintf(stdout, "wrote %s\n\n%s", wrote, md)
	return 0
}

// demoCache is the demo's cache scenario: the in-process cache (no-redis,
// CACHE_MODE=local) against Redis, one read-heavy profile, the kv points,
// the raw lookups, the stampede and a 2 s staleness window, 3 s attacks;
// about 40 s on 2 cores.
func demoCache(c common) (scenario.CacheScenario, scenario.CacheOptions) {
	s := scenario.Cache
	// The Postgres side first, as in every table (and as the raw
	// lookups' sides, postgres then redis).
	s.Modes = nil
	for _, name := range []string{"local", "redis"} {
		for _, m := range scenario.Cache.Modes {
			if m.Name == name {
				s.Modes = append(s.Modes, m)
			}
		}
	}
	s.Profiles = scenario.Cache.Profiles[:1]
	o := s.Defaults
	o.Rate, o.KVRate, o.Rounds = 200, 200, 1
	o.Duration = min(c.duration, 3*time.Second)
	o.StampedeN, o.StaleTTL, o.RawDuration = 50, 2*time.Second, 2*time.Second
	o.ReadCeiling = false
	return s, o
}

// runDemo drives every pair briefly, one after the other (each pair's
// services stopped before the next starts), and prints one side-by-side
// table per pair: queue, log, documents, cache (in-process vs Redis) and
// the event store (its bench's append scenario, Postgres vs Kafka).
func runDemo(ctx context.Context, inv invocation, set pairSet) error {
	c, env, root := inv.c, inv.env, inv.root
	var errs []error
	var runs []*driver.Run
	for _, p := range loadPairs {
		r := set[p.name()]
		if r == nil {
			continue
		}
		env.Progress.Begin(p.name())
		run := driver.NewRun(p.name(), nil, time.Now())
		run.Versions = versions.Collect(ctx, versionsConfig(c, root))
		err := r.run(ctx, env, run)
		stopPair(env, p.pair)
		runs = append(runs, run)
		if err != nil {
			run.Note("run ended early: %v", err)
			errs = append(errs, fmt.Errorf("%s: %w", p.name(), err))
			fmt.Fprintf(os.Stderr, "%s: %v\n", p.name(), err)
		}
		if ctx.Err() != nil {
			break
		}
	}
	fmt.Println()
	for _, run := range runs {
		report.Demo(os.Stdout, run)
	}
	return errors.Join(errs...)
}

func writeReport(c common, inputs string) error {
	files := report.NewestInputs(c.resultsDir)
	if inputs != "" {
		files = strings.Split(inputs, ",")
	}
	// The README's findings read the same runs, the event store's among
	// them; loading those first fails before anything is written when one
	// of them does not parse.
	runs, err := report.ReadInputs(c.resultsDir, files)
	if err != nil {
		return err
	}
	rawMD, err := rawSection(c, runs)
	if err != nil {
		return err
	}
	src, xfile, err := report.LoadSources(c.resultsDir)
	if err != nil {
		return err
	}
	if err := report.Write(report.Files{Markdown: c.out, Charts: c.chartsDir}, runs, src, time.Now(), rawMD, report.FailureModesSection(src.Experiments, xfile),
		report.BeyondCRUDSection(src.BeyondCRUD, src.BeyondCRUDFile)+"\n"+report.FailoverSection(src.FailoverParts)+report.DurabilitySection(src.Durability)); err != nil {
		return err
	}
	if c.readme != "" {
		if err := report.WriteREADME(c.readme, runs, src); err != nil {
			return err
		}
		fmt.Printf("rewrote the findings of %s\n", c.readme)
	}
	fmt.Printf("wrote %s and charts in %s from %d results files\n", c.out, c.chartsDir, len(runs))
	return nil
}
