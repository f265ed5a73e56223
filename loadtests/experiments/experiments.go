package experiments

import (
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/launch"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/resultfile"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/versions"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// SchemaVersion is the version of the experiments results file's shape.
// Version 2 holds figures, statuses and settings only (the prose is the
// experiment's Text); Load still reads version 1, whose results carry
// their sentences.
const SchemaVersion = 2

// legacySchema is the version Load reads besides SchemaVersion.
const legacySchema = 1

// Size says how big an experiment runs: Small in tests (seconds), Full in
// make results.
type Size int

// Sizes of a run.
const (
	// Small runs in seconds, for the experiment's own test.
	Small Size = iota
	// Full is make results' size.
	Full
)

// Env locates the stack and the tools an experiment may need. Fields
// left empty take the stack's defaults (scripts/ports.env).
type Env struct {
	// PostgresURL is the shared stack's Postgres (wal2json installed).
	PostgresURL string
	// PgBouncerURL is the stack's pgbouncer (transaction pooling).
	PgBouncerURL string
	// MongoURL is the stack's MongoDB (FerretDB on the native stack),
	// for the documents pair's experiments (BeyondCRUD).
	MongoURL string
	// RabbitMQURL and KafkaBrokers locate the stack's brokers.
	RabbitMQURL  string
	KafkaBrokers []string
	// ClusterKafkaBrokers are the cluster profile's three brokers
	// (CLUSTER_KAFKA_BROKERS, `bash scripts/cluster.sh env running`);
	// empty when the profile's Kafka does not run: the Cluster
	// experiments on it then report why they did not run.
	ClusterKafkaBrokers []string
	// ClusterRabbitMQURLs are the cluster profile's RabbitMQ nodes, rmq1
	// first (CLUSTER_RABBITMQ_URLS, which `bash scripts/cluster.sh env`
	// prints); empty when the profile does not run, and then the
	// experiments that need it report "not run".
	ClusterRabbitMQURLs []string
	// ClusterDatabaseURL is the cluster profile's multi-host Postgres URL
	// (CLUSTER_DATABASE_URL, `bash scripts/cluster.sh env running`:
	// target_session_attrs=read-write); empty when the profile's Postgres
	// does not run: the Postgres failover experiments then report why
	// they did not run.
	ClusterDatabaseURL string
	// ClusterPGHA is CLUSTER_PG_HA: HAAuto while that Postgres runs
	// under pg_auto_failover (`bash scripts/cluster.sh up postgres-auto`),
	// empty for the scripted formation; each kind of Postgres failover
	// experiment runs on its own formation and reports "not run" on the
	// other.
	ClusterPGHA string
	// Root is the repository root (services are built from it).
	Root string
	// CompareBindirs are the bin directories of other PostgreSQL versions
	// (PostgreSQL 18's from make deps-cluster: DefaultCompareBindirs):
	// the experiments that compare versions (notify-serializes-commits)
	// measure again on a private server of each, given the shared
	// server's settings. Empty: the shared server's version only.
	CompareBindirs []string
	// CompareNone says why CompareBindirs is empty, for the results (""
	// when nobody asked: then they say nothing about other versions).
	CompareNone string
	// Out receives progress lines; nil for none.
	Out io.Writer
}

// Result is what one experiment found: its figures, statuses and
// settings. Its sentences are its experiment's Text, joined at render
// time (Describe).
type Result struct {
	// Name is the experiment's Experiment.Name.
	Name string `json:"name"`
	// AckedLost counts acknowledged writes (2xx answers, committed
	// transactions) missing afterwards; -1 when the experiment writes
	// nothing it acknowledges.
	AckedLost int64 `json:"acked_lost"`
	// LossDocumented is true when the experiment demonstrates a
	// documented loss (AckedLost > 0 is then the figure, not a failure).
	LossDocumented bool `json:"loss_documented,omitempty"`
	// Metrics are the raw figures, named.
	Metrics map[driver.Metric]float64 `json:"metrics,omitempty"`
	// Settings are the run's settings and statuses that are not numbers:
	// server versions, the machine, a service's answer quoted.
	Settings map[string]string `json:"settings,omitempty"`
	// DurationS is how long the experiment ran.
	DurationS float64 `json:"duration_s"`
	// Round is which run of the experiment this is (1, 2, ...) when the
	// run repeated it (Repeat); 0 when it ran once.
	Round int `json:"round,omitempty"`
	// Error is set when the experiment could not measure (Run recorded
	// the Experiment's error); the figure is then missing.
	Error string `json:"error,omitempty"`

	// Title, Happens, Figure, UserMust and Notes are the sentences a
	// schema 1 file holds with each result. Experiments no longer set
	// them; Describe prints a file's own Figure and Notes when it has
	// them, so that old files still render.
	Title    string   `json:"title,omitempty"`
	Happens  string   `json:"happens,omitempty"`
	Figure   string   `json:"figure,omitempty"`
	UserMust string   `json:"user_must,omitempty"`
	Notes    []string `json:"notes,omitempty"`
}

// setting records setting k = v in r.Settings.
func (r *Result) setting(k, v string) {
	if r.Settings == nil {
		r.Settings = map[string]string{}
	}
	r.Settings[k] = v
}

// metric records metric k = v in r.Metrics.
func (r *Result) metric(k driver.Metric, v float64) {
	if r.Metrics == nil {
		r.Metrics = map[driver.Metric]float64{}
	}
	r.Metrics[k] = v
}

// Experiment is one runnable failure-mode experiment.
type Experiment struct {
	// Name is its id: lowercase words joined by '-'.
	Name string
	// Run runs it at size against env. It must leave the shared stack as
	// it found it, and return an error only when it could not measure
	// (a lost acknowledged write is a figure, not an error).
	Run func(ctx context.Context, env Env, size Size) (Result, error)
	// Full is its expected wall time at Full size, for the progress
	// estimate; zero counts as DefaultEstimate.
	Full time.Duration
	// Text is its prose, joined with a Result's figures by Describe.
	Text Text
}

// DefaultEstimate is an experiment's expected Full wall time when it
// declares none.
const DefaultEstimate = 30 * time.Second

// Estimate is the expected wall time of xs at Full size.
func Estimate(xs []Experiment) time.Duration {
	var d time.Duration
	for _, x := range xs {
		if x.Full > 0 {
			d += x.Full
		} else {
			d += DefaultEstimate
		}
	}
	return d
}

// File is the results file of one experiments run
// (results/<UTC time>-experiments.json).
type File struct {
	// SchemaVersion is SchemaVersion when written; Started is when the
	// run began (UTC).
	SchemaVersion int       `json:"schema_version"`
	Started       time.Time `json:"started"`
	// Size is the run's size ("small" or "full").
	Size    string   `json:"size,omitempty"`
	Results []Result `json:"results"`
}

// All returns every experiment a plain run (and make results) runs, in
// the table's order.
func All() []Experiment {
	return slices.Concat(stackExperiments(), crashExperiments(), brokerExperiments(), BeyondCRUD())
}

// BeyondCRUD returns the documents pair's experiments beyond CRUD (issue
// 42: the change feed, expiring sessions, the aggregation report): in
// All, but written to a results file of their own (resultfile.BeyondCRUD),
// read by RESULTS.md's documents section, so that running them alone
// does not hide the failure modes' newest file, nor it theirs.
func BeyondCRUD() []Experiment { return documentsExperiments() }

// Cluster returns the experiments that need the cluster profile running
// (scripts/cluster.sh, as root; docs/cluster.md): not in All, so that
// make results never needs the profile; -only names them. Without the
// profile each reports "not run" and why.
func Cluster() []Experiment {
	return slices.Concat(kafkaClusterExperiments(), rabbitmqClusterExperiments(), pgFailoverExperiments())
}

// Known returns All and Cluster: every experiment -only accepts.
func Known() []Experiment { return slices.Concat(All(), Cluster()) }

// String is the -size spelling of s.
func (s Size) String() string {
	if s == Full {
		return "full"
	}
	return "small"
}

// ParseSize reads "small" or "full".
func ParseSize(s string) (Size, error) {
	switch s {
	case "small":
		return Small, nil
	case "full":
		return Full, nil
	}
	return Small, fmt.Errorf("size %q: want small or full", s)
}

// WithDefaults fills the empty fields of e from the environment
// (DATABASE_URL, PGBOUNCER_URL, RABBITMQ_URL, KAFKA_BROKERS,
// CLUSTER_KAFKA_BROKERS, CLUSTER_RABBITMQ_URLS, CLUSTER_DATABASE_URL, CLUSTER_PG_HA) or the stack's defaults, and Root from the
// working directory.
func (e Env) WithDefaults() Env {
	if e.PostgresURL == "" {
		e.PostgresURL = envOr("DATABASE_URL", pairs.DefaultPostgresURL)
	}
	if e.PgBouncerURL == "" {
		e.PgBouncerURL = envOr("PGBOUNCER_URL", pairs.DefaultPgBouncerURL)
	}
	if e.MongoURL == "" {
		e.MongoURL = envOr("MONGO_URL", pairs.DefaultMongoURL)
	}
	if e.RabbitMQURL == "" {
		e.RabbitMQURL = envOr("RABBITMQ_URL", pairs.DefaultRabbitMQURL)
	}
	if len(e.KafkaBrokers) == 0 {
		e.KafkaBrokers = strings.Split(envOr("KAFKA_BROKERS", pairs.DefaultKafkaBrokers), ",")
	}
	if v := os.Getenv("CLUSTER_KAFKA_BROKERS"); len(e.ClusterKafkaBrokers) == 0 && v != "" {
		e.ClusterKafkaBrokers = strings.Split(v, ",")
	}
	if v := strings.TrimSpace(os.Getenv("CLUSTER_RABBITMQ_URLS")); len(e.ClusterRabbitMQURLs) == 0 && v != "" {
		e.ClusterRabbitMQURLs = strings.Split(v, ",")
	}
	if e.ClusterDatabaseURL == "" {
		e.ClusterDatabaseURL = strings.TrimSpace(os.Getenv("CLUSTER_DATABASE_URL"))
	}
	if e.ClusterPGHA == "" {
		e.ClusterPGHA = strings.TrimSpace(os.Getenv("CLUSTER_PG_HA"))
	}
	if e.Root == "" {
		if root, err := launch.Root(); err == nil {
			e.Root = root
		}
	}
	return e
}

// root is e.Root, or the repository root found from the working
// directory when it is empty.
func (e Env) root() (string, error) {
	if e.Root != "" {
		return e.Root, nil
	}
	return launch.Root()
}

// newLauncher makes a temporary directory named by pattern (as
// os.MkdirTemp) for the services' logs and a launcher of the services
// under root that writes them there. The caller removes logDir; it is
// already gone when err is set.
func newLauncher(root, pattern string) (l *launch.Launcher, logDir string, err error) {
	logDir, err = os.MkdirTemp("", pattern)
	if err != nil {
		return nil, "", err
	}
	l, err = launch.New(root, logDir)
	if err != nil {
		_ = os.RemoveAll(logDir)
		return nil, "", err
	}
	return l, logDir, nil
}

// launcher is newLauncher under e's repository root (root).
func (e Env) launcher(pattern string) (l *launch.Launcher, logDir string, err error) {
	root, err := e.root()
	if err != nil {
		return nil, "", err
	}
	return newLauncher(root, pattern)
}

// logf writes one progress line to e.Out.
func (e Env) logf(format string, args ...any) {
	if e.Out != nil {
		fmt.Fprintf(e.Out, format+"\n", args...)
	}
}

// prefixed is e.logf with every line starting "name: ".
func (e Env) prefixed(name string) func(format string, args ...any) {
	return func(format string, args ...any) { e.logf(name+": "+format, args...) }
}

func envOr(k, d string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return d
}

// Select returns the experiments named in only, in Known's order (All's
// when only is empty, which leaves the cluster experiments out), or an
// error naming an unknown name.
func Select(only []string) ([]Experiment, error) {
	if len(only) == 0 {
		return All(), nil
	}
	all := Known()
	known := map[string]bool{}
	for _, x := range all {
		known[x.Name] = true
	}
	for _, n := range only {
		if !known[n] {
			var names []string
			for _, x := range all {
				names = append(names, x.Name)
			}
			return nil, fmt.Errorf("unknown experiment %q (known: %s)", n, strings.Join(names, ", "))
		}
	}
	var out []Experiment
	for _, x := range all {
		if slices.Contains(only, x.Name) {
			out = append(out, x)
		}
	}
	return out, nil
}

// Repeat returns xs n times over, in rounds: each experiment once per
// round, in xs' order, so that a slow drift of the machine spreads over
// every experiment instead of piling on one. A fault measured once says
// little (RabbitMQ's writes came back 0.25 s after one kill of its
// leader and 10.4 s after another here), so the cluster profile's
// experiments run at least 3 times for the cards' ranges.
func Repeat(xs []Experiment, n int) []Experiment {
	var out []Experiment
	for range max(n, 1) {
		out = append(out, xs...)
	}
	return out
}

// Run runs xs in turn at size. An experiment that could not measure is
// recorded with its Error (its AckedLost -1) and the others
// still run; only a cancelled ctx stops the run early. An experiment
// listed more than once (Repeat) records each run with its Round.
func Run(ctx context.Context, env Env, size Size, xs []Experiment) (File, error) {
	env = env.WithDefaults()
	f := File{SchemaVersion: SchemaVersion, Started: time.Now().UTC(), Size: size.String()}
	times, seen := map[string]int{}, map[string]int{}
	for _, x := range xs {
		times[x.Name]++
	}
	for _, x := range xs {
		if err := ctx.Err(); err != nil {
			return f, err
		}
		seen[x.Name]++
		round := 0
		if times[x.Name] > 1 {
			round = seen[x.Name]
			env.logf("experiment %s: run %d of %d", x.Name, round, times[x.Name])
		}
		env.logf("experiment %s: running (%s)", x.Name, size)
		t0 := time.Now()
		r, err := x.Run(ctx, env, size)
		r.Name, r.Round = x.Name, round
		r.DurationS = math.Round(time.Since(t0).Seconds()*10) / 10
		if err != nil {
			r.Error = err.Error()
			r.AckedLost = -1
			env.logf("experiment %s: could not measure: %v", x.Name, err)
		} else {
			env.logf("experiment %s: %s (%.1fs)", x.Name, describe(r, x.Text, true).Figure, r.DurationS)
		}
		f.Results = append(f.Results, r)
	}
	return f, ctx.Err()
}

// The experiments write three kinds of results file, each read by its
// own section of RESULTS.md: the single-node failure modes
// (resultfile.Experiments, "Failure modes"), the documents pair's
// experiments beyond CRUD (resultfile.BeyondCRUD) and the cluster
// profile's (resultfile.Failover, "Replicated and failover"). The
// cluster's run apart from make results (only with the profile up), so
// their file is apart too: a run of them alone does not hide the
// single-node experiments' newest file, nor they its.

// IsBeyondCRUD reports whether the experiment named name is one of
// BeyondCRUD.
func IsBeyondCRUD(name string) bool {
	return slices.ContainsFunc(BeyondCRUD(), func(x Experiment) bool { return x.Name == name })
}

// KindOf is the kind of results file the experiment named name is
// written to.
func KindOf(name string) resultfile.Kind {
	switch {
	case IsCluster(name):
		return resultfile.Failover
	case IsBeyondCRUD(name):
		return resultfile.BeyondCRUD
	}
	return resultfile.Experiments
}

// Kinds are the experiments' kinds of results file, in Groups' order:
// every file the experiments write is of one of them.
func Kinds() []resultfile.Kind {
	return []resultfile.Kind{resultfile.Experiments, resultfile.BeyondCRUD, resultfile.Failover}
}

// Groups divides xs by the results file they write (KindOf), each in
// xs' order, in the order failure modes, beyond CRUD, cluster; empty
// groups are left out. Each group runs and writes a file of its own.
func Groups(xs []Experiment) [][]Experiment {
	var out [][]Experiment
	for _, k := range Kinds() {
		var g []Experiment
		for _, x := range xs {
			if KindOf(x.Name) == k {
				g = append(g, x)
			}
		}
		if len(g) > 0 {
			out = append(out, g)
		}
	}
	return out
}

// IsCluster reports whether the experiment named name is one of Cluster.
func IsCluster(name string) bool {
	return slices.ContainsFunc(Cluster(), func(x Experiment) bool { return x.Name == name })
}

// Write writes f to dir as a file of the KindOf its first result
// (Groups keeps the files' experiments apart), and returns the path.
func Write(dir string, f File) (string, error) {
	k := resultfile.Experiments
	if len(f.Results) > 0 {
		k = KindOf(f.Results[0].Name)
	}
	return resultfile.Write(dir, resultfile.Name(f.Started, k), f)
}

// Load reads the newest dir/*-experiments.json (the single-node
// experiments); nil and no error when there is none.
func Load(dir string) (*File, string, error) { return loadNewest(dir, resultfile.Experiments) }

// Ended is when f's run ended: its start plus its results' durations (the
// experiments run one after another); its start when it has none.
func (f *File) Ended() time.Time {
	end := f.Started
	for _, r := range f.Results {
		end = end.Add(time.Duration(r.DurationS * float64(time.Second)))
	}
	return end
}

// LoadBeyondCRUD reads the newest dir/*-beyond-crud.json (BeyondCRUD's
// results); nil and no error when there is none.
func LoadBeyondCRUD(dir string) (*File, string, error) {
	return loadNewest(dir, resultfile.BeyondCRUD)
}

// LoadCluster reads the newest dir/*-failover.json (the cluster profile's
// experiments); nil and no error when there is none.
func LoadCluster(dir string) (*File, string, error) { return loadNewest(dir, resultfile.Failover) }

// loadNewest reads the newest file of kind k in dir; nil and no error
// when there is none.
func loadNewest(dir string, k resultfile.Kind) (*File, string, error) {
	path := resultfile.Newest(dir, k)
	if path == "" {
		return nil, "", nil
	}
	f, err := Read(path)
	return f, path, err
}

// FileSchema is the versions of File a reader accepts, under
// resultfile's one rule.
var FileSchema = resultfile.Schema{Oldest: legacySchema, Current: SchemaVersion}

// Read reads the experiments results file at path, of any of Kinds,
// refusing unknown fields and versions outside FileSchema.
func Read(path string) (*File, error) {
	var f File
	if err := resultfile.Read(path, &f); err != nil {
		return nil, err
	}
	if err := FileSchema.Check(path, f.SchemaVersion); err != nil {
		return nil, err
	}
	return &f, nil
}

// ClusterPart is one part of RESULTS.md's "Replicated and failover"
// section: some results of one failover file.
type ClusterPart struct {
	// File is the file with its Results narrowed to the part's; Name is
	// its base name in results/.
	File *File
	Name string
	// PGMajor is the PostgreSQL major version of a part of Postgres
	// failover experiments (IsPostgresFailover); 0 for the RabbitMQ and
	// Kafka experiments' part.
	PGMajor int
	// Auto marks a part of the automatic failover experiments (the
	// pg_auto_failover formation, IsAutoFailover), apart from the
	// scripted promotions of the same version.
	Auto bool
}

// Label names a Postgres part: "PostgreSQL 15", "PostgreSQL 15 under
// pg_auto_failover"; "" for the brokers' part.
func (p ClusterPart) Label() string {
	switch {
	case p.PGMajor <= 0:
		return ""
	case p.Auto:
		return fmt.Sprintf("PostgreSQL %d under pg_auto_failover", p.PGMajor)
	}
	return fmt.Sprintf("PostgreSQL %d", p.PGMajor)
}

// IsAutoFailover reports whether the experiment named name is one of
// the automatic failover experiments (pg-auto-kill, pg-auto-cut,
// pg-auto-isolate, pg-auto-standby-cut).
func IsAutoFailover(name string) bool {
	return slices.ContainsFunc(pgAutoExperiments(), func(x Experiment) bool { return x.Name == name })
}

// LoadClusterParts reads every dir/*-failover.json and returns what the
// section shows: the RabbitMQ and Kafka experiments of the newest file
// that holds any of them (as LoadCluster would), then, for each
// PostgreSQL major version, the Postgres failover experiments of the
// newest file that holds any run on it, the oldest version first. So a
// run on 18 does not hide the newest run on 15, nor a run of the brokers'
// experiments either. Empty and no error when there is no file.
func LoadClusterParts(dir string) ([]ClusterPart, error) {
	m := resultfile.Paths(dir, resultfile.Failover)
	var brokers []ClusterPart
	type key struct {
		major int
		auto  bool
	}
	pg := map[key]ClusterPart{}
	for i := len(m) - 1; i >= 0; i-- { // newest first
		f, err := Read(m[i])
		if err != nil {
			return nil, err
		}
		for _, p := range splitClusterFile(f, filepath.Base(m[i])) {
			if _, seen := pg[key{p.PGMajor, p.Auto}]; p.PGMajor > 0 && !seen {
				pg[key{p.PGMajor, p.Auto}] = p
			}
			if p.PGMajor == 0 && len(brokers) == 0 {
				brokers = append(brokers, p)
			}
		}
	}
	keys := slices.SortedFunc(maps.Keys(pg), func(a, b key) int {
		if a.major != b.major {
			return a.major - b.major
		}
		return b2i(a.auto) - b2i(b.auto)
	})
	for _, k := range keys {
		brokers = append(brokers, pg[k])
	}
	return brokers, nil
}

// b2i is 1 for true, 0 for false.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// splitClusterFile divides f's results into its parts: the others, then
// the Postgres failover experiments by major version, the scripted ones
// apart from the automatic ones. A Postgres result whose version is
// unknown (it did not reach the cluster: "not run") is left out: it
// says nothing about either version.
func splitClusterFile(f *File, name string) []ClusterPart {
	type key struct {
		major int
		auto  bool
	}
	byKey := map[key][]Result{}
	for _, r := range f.Results {
		k := key{}
		if IsPostgresFailover(r.Name) {
			if k.major = PGMajor(r); k.major <= 0 {
				continue
			}
			k.auto = IsAutoFailover(r.Name)
		}
		byKey[k] = append(byKey[k], r)
	}
	var parts []ClusterPart
	for _, k := range slices.SortedFunc(maps.Keys(byKey), func(a, b key) int {
		if a.major != b.major {
			return a.major - b.major
		}
		return b2i(a.auto) - b2i(b.auto)
	}) {
		g := *f
		g.Results = byKey[k]
		parts = append(parts, ClusterPart{File: &g, Name: name, PGMajor: k.major, Auto: k.auto})
	}
	return parts
}

// IsPostgresFailover reports whether the experiment named name is one of
// the Postgres failover experiments (pg-switchover, pg-failover-sync,
// pg-failover-async, and the automatic ones: IsAutoFailover).
func IsPostgresFailover(name string) bool {
	return slices.ContainsFunc(pgFailoverExperiments(), func(x Experiment) bool { return x.Name == name })
}

// PGMajor is the PostgreSQL major version a result ran on: its
// server_version_num metric (150018: 15), else the leading number of its
// server_version setting; 0 when it has neither (an experiment that could
// not measure may not).
func PGMajor(r Result) int {
	if n := r.Metrics[MetricServerVersionNum]; n >= 100000 {
		return int(n) / 10000
	}
	return versions.PostgresMajor(r.Settings["server_version"])
}

// Find returns the result named name, if f holds it.
func (f *File) Find(name string) (Result, bool) {
	if f == nil {
		return Result{}, false
	}
	for _, r := range f.Results {
		if r.Name == name {
			return r, true
		}
	}
	return Result{}, false
}
