package scenario

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// DocumentsOptions parameterize the documents scenario.
type DocumentsOptions struct {
	// Users is the size of the generated data set created on both sides.
	Users int
	// Seed makes the data set reproducible.
	Seed uint64
	// SearchRate and Duration drive the containment search point.
	SearchRate float64
	// SearchTimeout bounds each search request (default
	// DefaultSearchTimeout): FerretDB takes seconds per scan.
	SearchTimeout time.Duration
	Duration      time.Duration
	Rounds        int
	// Sizes are the profile sizes of the rewrite points (bytes), and
	// RewriteRates the rate of each (rewrites, then as many neighbour
	// patches, per second).
	Sizes        []int
	RewriteRates []float64
	// RewriteUsers is how many users of each size are rewritten in turn.
	RewriteUsers int
	// LZ4 measures the rewrite points once more on the Postgres side
	// with TOAST_COMPRESSION=lz4 (scenario "documents.rewrite_lz4").
	LZ4 bool
	// SearchCeiling and WriteCeiling run, after the points, the ceiling
	// searches of the containment search (DocumentsSearchCeiling) and of
	// the profile write (DocumentsWriteCeiling) on the data set, with
	// SearchCeilingOpts and WriteCeilingOpts.
	SearchCeiling, WriteCeiling         bool
	SearchCeilingOpts, WriteCeilingOpts CeilingOptions
	// ScaleUsers are the larger data sets, in users, the same ceilings
	// run on after the data set's own (DocumentsScale): each loaded
	// straight into both databases, its indexes rebuilt, timed and
	// sized. Empty: none.
	ScaleUsers []int
}

var (
	cities    = []string{"Lyon", "Paris", "Berlin", "Munich", "Madrid", "Lisbon", "Rome", "Oslo", "Vienna", "Prague", "Warsaw", "Dublin"}
	countries = []string{"FR", "DE", "ES", "PT", "IT", "NO", "AT", "CZ", "PL", "IE"}
	tagWords  = []string{"go", "postgres", "kafka", "rust", "java", "python", "k8s", "linux", "sql", "ml", "web", "ops", "data", "cloud", "mobile", "ui"}
	langs     = []string{"en", "de", "fr", "es", "it", "pt"}
	themes    = []string{"dark", "light", "auto"}
	oses      = []string{"android", "ios", "linux", "windows", "macos"}
	sizes     = []string{"small", "medium", "large"}
	words     = strings.Fields("lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt ut labore et dolore magna aliqua enim ad minim veniam quis nostrud exercitation ullamco laboris nisi aliquip ex ea commodo consequat duis aute irure in reprehenderit voluptate velit esse cillum fugiat nulla pariatur excepteur sint occaecat cupidatat non proident sunt culpa qui officia deserunt mollit anim id est laborum")
)

func text(r *rand.Rand, n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(words[r.IntN(len(words))])
	}
	return b.String()
}

// SeedProfile returns the i-th profile of the data set (about 1 KB).
func SeedProfile(r *rand.Rand) map[string]any {
	tags := map[string]bool{}
	for range 1 + r.IntN(4) {
		tags[tagWords[r.IntN(len(tagWords))]] = true
	}
	tagList := []string{}
	for _, t := range tagWords {
		if tags[t] {
			tagList = append(tagList, t)
		}
	}
	devices := []any{}
	for range r.IntN(3) {
		devices = append(devices, map[string]any{"os": oses[r.IntN(len(oses))], "model": "m" + strconv.Itoa(r.IntN(50))})
	}
	p := map[string]any{
		"address": map[string]any{"city": cities[r.IntN(len(cities))], "country": countries[r.IntN(len(countries))], "zip": fmt.Sprintf("%05d", r.IntN(99999))},
		"tags":    tagList,
		"prefs":   map[string]any{"lang": langs[r.IntN(len(langs))], "newsletter": r.IntN(2) == 0, "theme": themes[r.IntN(len(themes))]},
		"score":   r.IntN(100),
		"devices": devices,
		"bio":     text(r, 40+r.IntN(80)),
	}
	if r.IntN(3) > 0 {
		p["company"] = map[string]any{"name": "c" + strconv.Itoa(r.IntN(500)), "size": sizes[r.IntN(len(sizes))]}
	}
	return p
}

// LargeProfile returns a profile of about size bytes of JSON text: a list
// of sections of prose (compressible like real text). variant changes the
// content.
func LargeProfile(size, variant int) []byte {
	r := rand.New(rand.NewPCG(uint64(size), uint64(variant)))
	var b strings.Builder
	b.WriteString(`{"kind":"large","variant":` + strconv.Itoa(variant) + `,"sections":[`)
	for i := 0; b.Len() < size-200; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":%d,"title":%q,"text":%q}`, i, text(r, 4), text(r, 150))
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// SearchRewriteScenario declares the documents pair's scenario: a
// containment search over a generated data set, then rewrites of a large
// profile against patches of a neighbour column, with the WAL each
// mutation wrote.
type SearchRewriteScenario struct {
	// Pair is the pair driven.
	Pair Pair
	// SearchQueries are the containment queries the search point rotates
	// through.
	SearchQueries []string
	// Defaults are the options the documents command starts from.
	Defaults DocumentsOptions
	// Fresh, when set, is the side whose store the driver gives a
	// database of its own for each run and drops at its end, instead of
	// deleting the users it created one request at a time.
	Fresh *FreshDatabase
}

// FreshDatabase names a service's database setting: the driver starts
// Service with Var set to a name of the run's, then drops that database
// (at URLVar, default DefaultURL) once the run is over. It applies only
// when the driver starts the services; one already running keeps its
// database, and the users created there are deleted through the API.
type FreshDatabase struct {
	Service, Var, URLVar, DefaultURL string
}

// The kinds of the documents pair's points (PairScenarioName): the
// containment search, the rewrite point and, on the Postgres side with
// lz4 TOAST compression, the same rewrite ("documents.rewrite_lz4").
const (
	KindSearch     = "search"
	KindRewrite    = "rewrite"
	KindRewriteLZ4 = "rewrite_lz4"
)

// The rewrite point's two phases: the rewrite of a large profile and the
// patch of a neighbour column (driver.ClientRewrite and
// driver.ClientPatch are their client-side metrics).
const (
	PhaseRewrite = "rewrite"
	PhasePatch   = "patch"
)

// The rewrite point's ratios and WAL, per side: the client-side rewrite
// latency ÷ the patch's at p50 and p99 (MetricCostRatioOf), the same at
// p50 on the server (the /stats latencies), and the WAL bytes per
// operation of each phase (MetricWALPerOpOf).
const (
	MetricCostRatioP50       = driver.Metric(MetricCostRatioOf + "p50")
	MetricCostRatioP99       = driver.Metric(MetricCostRatioOf + "p99")
	MetricServerCostRatioP50 = driver.Metric("server_cost_ratio.p50")
	MetricWALPerRewrite      = driver.Metric(MetricWALPerOpOf + PhaseRewrite)
	MetricWALPerPatch        = driver.Metric(MetricWALPerOpOf + PhasePatch)
)

// DefaultSearchTimeout bounds each search request of the documents
// scenario: FerretDB (the stand-in on the native stack) scans every
// document, 2.5–5 s a search at 2,000 users on this machine, and a search
// the client gives up on still runs inside FerretDB, starving the points
// after it.
const DefaultSearchTimeout = 30 * time.Second

// DocumentsScenario is the documents pair's: eight containment queries
// (nested objects, arrays, several keys, numbers, booleans) at a low rate
// (FerretDB scans every document: at 5/s its scans piled up past the
// client timeout, and the backlog made every later FerretDB request time
// out), then each profile size rewritten and a neighbour column patched at
// the same rate. A side whose users cannot be created is failed with the
// answer it gave, and the other side is still measured.
var DocumentsScenario = SearchRewriteScenario{
	Pair: DocumentsPair,
	SearchQueries: []string{
		`{"address":{"city":"Lyon"}}`,
		`{"tags":["go"]}`,
		`{"tags":["go","postgres"]}`,
		`{"prefs":{"lang":"de","newsletter":true}}`,
		`{"devices":[{"os":"android"}]}`,
		`{"score":42}`,
		`{"company":{"size":"large"}}`,
		`{"address":{"country":"FR"},"prefs":{"theme":"dark"}}`,
	},
	Defaults: DocumentsOptions{Users: 2000, Seed: 1, SearchRate: 0.5, SearchTimeout: DefaultSearchTimeout,
		Sizes: []int{512 << 10, 2 << 20}, RewriteRates: []float64{10, 4}, RewriteUsers: 4, LZ4: true,
		SearchCeiling: true, WriteCeiling: true, SearchCeilingOpts: DocumentsSearchCeilingOpts, WriteCeilingOpts: DocumentsWriteCeilingOpts,
		ScaleUsers: []int{100_000, 1_000_000}},
	// FerretDB deletes one document in about 0.2 s on this machine (the
	// 2 Dec 2026 make results spent two minutes deleting its 2,016 users,
	// and the deletes that timed out left users behind for the next run's
	// scans); a database of the run's own starts empty and drops at once.
	Fresh: &FreshDatabase{Service: pairs.MongoDB, Var: "MONGO_DATABASE", URLVar: "MONGO_URL", DefaultURL: "mongodb://localhost:27017/"},
}

// Validate says what is missing or inconsistent in a declared scenario.
func (s SearchRewriteScenario) Validate() error {
	var errs []error
	if s.Pair.Name == "" || s.Pair.A.Name == "" || s.Pair.B.Name == "" {
		errs = append(errs, fmt.Errorf("pair %q: both sides are required", s.Pair.Name))
	}
	if len(s.SearchQueries) == 0 {
		errs = append(errs, fmt.Errorf("%s: no search query", s.Pair.Name))
	}
	for _, q := range s.SearchQueries {
		if !json.Valid([]byte(q)) {
			errs = append(errs, fmt.Errorf("%s: search query is not JSON: %s", s.Pair.Name, q))
		}
	}
	d := s.Defaults
	if d.Users < 1 || d.SearchRate <= 0 || d.RewriteUsers < 1 || len(d.Sizes) == 0 || len(d.RewriteRates) == 0 {
		errs = append(errs, fmt.Errorf("%s: default users, search rate, sizes, rewrite rates and rewrite users are required", s.Pair.Name))
	}
	errs = append(errs, d.SearchCeilingOpts.validate(DocumentsSearchCeiling), d.WriteCeilingOpts.validate(DocumentsWriteCeiling), ValidateScaleUsers(d.Users, d.ScaleUsers))
	return errors.Join(errs...)
}

// Run runs the scenario with o on e, recording every point in run: the
// containment search on the same generated data set on both sides, then
// for each size a rewrite of the whole profile against a patch of a
// neighbour column, with the WAL each mutation wrote (Postgres side).
func (s SearchRewriteScenario) Run(ctx context.Context, e *Env, run *driver.Run, o DocumentsOptions) error {
	o = s.settings(run, o)
	tag := strings.ToLower(strings.ReplaceAll(run.ID, "-", ""))
	fresh := s.freshEnv(e, run, tag)
	err := e.Ensure(ctx, s.Pair.Services(), fresh, nil)
	if errors.Is(err, ErrExternal) && len(fresh) > 0 {
		// A service of the user's own answers on the port: it keeps
		// its database, and the users created there are deleted.
		e.logf("%s keeps its own database: %v", s.Fresh.Service, err)
		delete(run.Settings, "fresh_database")
		fresh = nil
		err = e.Ensure(ctx, s.Pair.Services(), nil, nil)
	}
	if err != nil {
		return err
	}
	us := &createdUsers{e: e, created: map[string][]string{}}
	// Leave the services' stores as they were: drop the run's own
	// database, delete what was created elsewhere.
	defer func() {
		if len(fresh) > 0 {
			s.dropFresh(ctx, e, run, fresh)
			delete(us.created, s.Fresh.Service)
		}
		us.deleteAll(ctx)
	}()
	sp, err := s.dataSet(ctx, e, us, o, tag)
	if err != nil {
		return err
	}
	seeded := us.counts()
	err = s.search(ctx, e, &sp, o)
	run.Points = append(run.Points, sp)
	if err != nil {
		return err
	}
	dr := documentsRun{s: s, e: e, run: run, o: o, tag: tag, us: us, seeded: seeded, fresh: fresh}
	if err := dr.rewrites(ctx); err != nil {
		return err
	}
	if err := dr.ceilings(ctx); err != nil {
		return err
	}
	return dr.scale(ctx)
}

// documentsRun is a run of the documents scenario once its data set is
// searched: what its rewrites, ceilings and scale points share.
type documentsRun struct {
	s SearchRewriteScenario
	// e is where it runs, run where it records its points, o its options.
	e   *Env
	run *driver.Run
	o   DocumentsOptions
	// tag names what the run creates (from its id).
	tag string
	// us are the users created through the API, seeded each side's
	// count of the data set's among them.
	us     *createdUsers
	seeded map[string]int
	// fresh gives a side a database of the run's own (nil: none).
	fresh map[string]map[string]string
}

// freshEnv is the environment that gives s.Fresh's service a database of
// the run's own (named from tag), recorded in run's settings; nil when
// the scenario has none or the driver does not start the services.
func (s SearchRewriteScenario) freshEnv(e *Env, run *driver.Run, tag string) map[string]map[string]string {
	if s.Fresh == nil || e.Launcher == nil {
		return nil
	}
	name := "wpe_bench_" + tag
	if len(name) > 63 {
		name = name[:63]
	}
	run.Settings["fresh_database"] = s.Fresh.Service + ": " + s.Fresh.Var + "=" + name
	return map[string]map[string]string{s.Fresh.Service: {s.Fresh.Var: name}}
}

// dropFresh stops s.Fresh's service and drops the run's database,
// within a minute even when ctx has ended; a failure is a note of run's.
func (s SearchRewriteScenario) dropFresh(ctx context.Context, e *Env, run *driver.Run, fresh map[string]map[string]string) {
	name := fresh[s.Fresh.Service][s.Fresh.Var]
	_ = e.Launcher.Stop(s.Fresh.Service, 30*time.Second)
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	url := e.ServiceVar(s.Fresh.Service, s.Fresh.URLVar, s.Fresh.DefaultURL)
	client, err := mongo.Connect(options.Client().ApplyURI(url).SetTimeout(30 * time.Second))
	if err == nil {
		err = client.Database(name).Drop(cctx)
		_ = client.Disconnect(cctx)
	}
	if err != nil {
		run.Note("%s's database %s of this run was not dropped: %v", s.Fresh.Service, name, err)
		e.logf("dropping database %s: %v", name, err)
		return
	}
	e.logf("dropped %s's database %s", s.Fresh.Service, name)
}

// settings records o in run's settings and returns o with its search
// timeout defaulted.
func (s SearchRewriteScenario) settings(run *driver.Run, o DocumentsOptions) DocumentsOptions {
	run.Settings["users"] = o.Users
	run.Settings["seed"] = o.Seed
	run.Settings["search_rate"] = o.SearchRate
	if o.SearchTimeout <= 0 {
		o.SearchTimeout = DefaultSearchTimeout
	}
	run.Settings["search_timeout_s"] = o.SearchTimeout.Seconds()
	run.Settings["duration_s"] = o.Duration.Seconds()
	run.Settings["rounds"] = o.Rounds
	run.Settings["sizes"] = o.Sizes
	run.Settings["rewrite_rates"] = o.RewriteRates
	run.Settings["rewrite_users"] = o.RewriteUsers
	run.Settings["toast_compression"] = "pglz"
	run.Settings["lz4_variant"] = o.LZ4
	run.Settings["search_queries"] = s.SearchQueries
	run.Settings["search_ceiling"] = o.SearchCeiling
	run.Settings["write_ceiling"] = o.WriteCeiling
	run.Settings["scale_users"] = o.ScaleUsers
	return o
}

// createdUsers are the users the scenario created, by service, deleted
// at its end.
type createdUsers struct {
	e       *Env
	mu      sync.Mutex
	created map[string][]string
}

// create creates n users on svc, in parallel, with body(i) each, and
// returns their ids (in order; "" for one not created).
func (us *createdUsers) create(ctx context.Context, svc string, n int, body func(i int) []byte) ([]string, error) {
	ids := make([]string, n)
	err := parallel(ctx, n, 8, func(i int) error {
		code, b, err := driver.Do(ctx, http.MethodPost, us.e.URL(svc)+"/users", body(i))
		if err != nil {
			return err
		}
		if code != http.StatusCreated {
			return fmt.Errorf("%s POST /users: %d %s", svc, code, b)
		}
		var u struct{ ID string }
		if err := json.Unmarshal(b, &u); err != nil {
			return err
		}
		ids[i] = u.ID
		return nil
	})
	us.mu.Lock()
	for _, id := range ids {
		if id != "" {
			us.created[svc] = append(us.created[svc], id)
		}
	}
	us.mu.Unlock()
	return ids, err
}

// counts is how many users were created on each service so far.
func (us *createdUsers) counts() map[string]int {
	us.mu.Lock()
	defer us.mu.Unlock()
	out := map[string]int{}
	for svc, ids := range us.created {
		out[svc] = len(ids)
	}
	return out
}

// deleteAll deletes every user created, within 2 minutes even when ctx
// has ended.
func (us *createdUsers) deleteAll(ctx context.Context) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	for svc, ids := range us.created {
		us.e.logf("deleting %d users from %s", len(ids), svc)
		parallel(cctx, len(ids), 8, func(i int) error {
			_, _, err := driver.Do(cctx, http.MethodDelete, us.e.URL(svc)+"/users/"+ids[i], nil)
			return err
		})
	}
}

// dataSet creates the same users, generated from one seed, on both sides,
// and returns the search point, whose setup records a side that failed.
func (s SearchRewriteScenario) dataSet(ctx context.Context, e *Env, us *createdUsers, o DocumentsOptions, tag string) (driver.Point, error) {
	bodies := make([][]byte, o.Users)
	r := rand.New(rand.NewPCG(o.Seed, 7))
	for i := range bodies {
		bodies[i], _ = json.Marshal(map[string]any{
			"email": fmt.Sprintf("u%d-%s@load.test", i, tag), "name": "user " + strconv.Itoa(i),
			"plan": []string{"free", "pro", "team"}[i%3], "profile": SeedProfile(r),
		})
	}
	sp := driver.Point{Scenario: PairScenarioName(s.Pair.Name, KindSearch), Name: fmt.Sprintf("%d users", o.Users), Rate: o.SearchRate, DurationS: o.Duration.Seconds(), Sides: s.Pair.Sides()}
	err := setupSides(ctx, &sp, fmt.Sprintf("creating its %d users", o.Users), func(svc string) error {
		t0 := time.Now()
		_, err := us.create(ctx, svc, o.Users, func(i int) []byte { return bodies[i] })
		if err == nil {
			e.logf("created %d users on %s in %s", o.Users, svc, time.Since(t0).Round(time.Millisecond))
		}
		return err
	})
	return sp, err
}

// search measures the containment search point sp on both sides.
func (s SearchRewriteScenario) search(ctx context.Context, e *Env, sp *driver.Point, o DocumentsOptions) error {
	e.logf("documents search: %g/s for %s (timeout %s), %d rounds", o.SearchRate, o.Duration, o.SearchTimeout, o.Rounds)
	queries := make([][]byte, len(s.SearchQueries))
	for i, q := range s.SearchQueries {
		queries[i] = []byte(`{"profile":` + q + `,"limit":50}`)
	}
	return driver.RunPoint(ctx, sp, o.Rounds, func(ctx context.Context, svc string, _ int) (*driver.SideResult, error) {
		res := &driver.SideResult{Metrics: map[driver.Metric]float64{}}
		base := e.URL(svc)
		if err := driver.ResetStats(ctx, base); err != nil {
			return res, err
		}
		c := driver.Attack(ctx, driver.AttackSpec{
			Name: fmt.Sprintf("%-12s search %g/s", svc, o.SearchRate), Rate: o.SearchRate, Duration: o.Duration,
			MaxWorkers: e.MaxWorkers, Progress: e.Progress, Timeout: o.SearchTimeout,
			Next: func(n uint64) driver.Request {
				return driver.Request{Method: http.MethodPost, URL: base + "/users/search", Body: queries[n%uint64(len(queries))]}
			},
		})
		res.Phases = append(res.Phases, driver.Phase{Name: "search", Client: c})
		driver.FlattenClient(res.Metrics, driver.ClientPrefix, c)
		st, err := driver.GetStats(ctx, base)
		res.Stats = st
		driver.FlattenServer(res.Metrics, st)
		return res, err
	})
}

// walNotes says what the WAL bytes of run's phases (newWALMeter) count,
// when a phase has some.
func walNotes(run *driver.Run) []string {
	for _, p := range run.Points {
		for _, rd := range p.Rounds {
			for _, sr := range rd.Sides {
				for i := 0; sr != nil && i < len(sr.Phases); i++ {
					if sr.Phases[i].WALBytes != nil {
						return []string{"WAL bytes are pg_current_wal_lsn() deltas over each phase: cluster-wide, so other activity on the server counts too (the MongoDB side's figure is that background)"}
					}
				}
			}
		}
	}
	return nil
}

// rewrites measures a rewrite of a large profile against a patch of a
// neighbour column at every size, with the WAL each phase wrote, then,
// with o.LZ4, the same on the Postgres side alone restarted with lz4
// TOAST compression (fresh users written with it), and back to its
// default for what runs next.
func (dr documentsRun) rewrites(ctx context.Context) error {
	e, run, o, tag, create := dr.e, dr.run, dr.o, dr.tag, dr.us.create
	pair := dr.s.Pair
	wal := newWALMeter(ctx, e.PostgresURL)
	if wal == nil {
		run.Note("WAL per mutation not measured: cannot connect to Postgres at %s", redact(e.PostgresURL))
	} else {
		defer wal.Close(context.Background())
	}
	rw := &rewriter{e: e, o: o, wal: wal, tag: tag, create: create}
	if err := rw.points(ctx, run, PairScenarioName(pair.Name, KindRewrite), pair.Sides()); err != nil || !o.LZ4 {
		return err
	}
	lz4 := map[string]map[string]string{pair.A.Name: {"TOAST_COMPRESSION": "lz4"}}
	if err := e.Ensure(ctx, []Service{pair.A}, lz4, nil); err != nil {
		run.Note("lz4 rewrite points not measured: %v", err)
		return nil
	}
	defer func() {
		if err := e.Ensure(context.WithoutCancel(ctx), []Service{pair.A}, nil, nil); err != nil {
			e.logf("restarting %s with its default TOAST compression: %v", pair.A.Name, err)
		}
	}()
	// The Postgres side only: the lz4 points compare it with its own pglz
	// points above, and the MongoDB side, unchanged, would be measured
	// again (about two minutes of make results for figures that say
	// nothing about lz4).
	rw.skip = map[string]string{pair.B.Name: "TOAST_COMPRESSION is a Postgres setting: this side is unchanged, its figures are the rewrite points above"}
	return rw.points(ctx, run, PairScenarioName(pair.Name, KindRewriteLZ4), pair.Sides())
}

// points measures scenario's rewrite point at every size into run,
// stopping at the first error.
func (rw *rewriter) points(ctx context.Context, run *driver.Run, scenario driver.ScenarioName, sides []string) error {
	for si, size := range rw.o.Sizes {
		p, err := rw.point(ctx, scenario, sides, si, size)
		run.Points = append(run.Points, p)
		if err != nil {
			return err
		}
	}
	return nil
}

// rewriter runs the rewrite points: a rewrite of a large profile versus a
// patch of a neighbour column, with the WAL each phase wrote.
type rewriter struct {
	e      *Env
	o      DocumentsOptions
	wal    *walMeter
	tag    string
	create func(ctx context.Context, svc string, n int, body func(i int) []byte) ([]string, error)
	// skip are the sides the points leave out by design, with the reason
	// (driver.Point.SkipSide).
	skip map[string]string
}

// point measures the sizes[si] point of scenario on sides.
func (rw *rewriter) point(ctx context.Context, scenario driver.ScenarioName, sides []string, si, size int) (driver.Point, error) {
	e, o, wal, tag, create := rw.e, rw.o, rw.wal, rw.tag+strings.ReplaceAll(string(scenario), ".", ""), rw.create
	rate := o.RewriteRates[min(si, len(o.RewriteRates)-1)]
	variants := [][]byte{LargeProfile(size, 1), LargeProfile(size, 2)}
	label := sizeLabel(size)
	p := driver.Point{Scenario: scenario, Name: label, Rate: rate, DurationS: o.Duration.Seconds(), Sides: sides}
	for side, why := range rw.skip {
		p.SkipSide(side, why)
	}
	ids := map[string][]string{}
	if err := setupSides(ctx, &p, fmt.Sprintf("creating its %d users with a %s profile", o.RewriteUsers, label), func(svc string) error {
		got, err := create(ctx, svc, o.RewriteUsers, func(i int) []byte {
			b, _ := json.Marshal(map[string]any{"email": fmt.Sprintf("big%d-%d-%s@load.test", size, i, tag), "name": "big", "plan": "pro", "profile": json.RawMessage(variants[0])})
			return b
		})
		ids[svc] = got
		return err
	}); err != nil {
		return p, err
	}
	e.logf("%s %s: %g/s rewrites then %g/s patches for %s each, %d rounds", scenario, label, rate, rate, o.Duration, o.Rounds)
	err := driver.RunPoint(ctx, &p, o.Rounds, func(ctx context.Context, svc string, _ int) (*driver.SideResult, error) {
		res := &driver.SideResult{Metrics: map[driver.Metric]float64{}}
		base := e.URL(svc)
		if err := driver.ResetStats(ctx, base); err != nil {
			return res, err
		}
		us := ids[svc]
		phases := []struct {
			name string
			req  func(n uint64) driver.Request
		}{
			{PhaseRewrite, func(n uint64) driver.Request {
				return driver.Request{Method: http.MethodPut, URL: base + "/users/" + us[n%uint64(len(us))] + "/profile", Body: variants[(n/uint64(len(us))+1)%2]}
			}},
			{PhasePatch, func(n uint64) driver.Request {
				return driver.Request{Method: http.MethodPatch, URL: base + "/users/" + us[n%uint64(len(us))], Body: []byte(`{"name":"n` + strconv.FormatUint(n, 10) + `"}`)}
			}},
		}
		for _, ph := range phases {
			before := wal.LSN(ctx)
			c := driver.Attack(ctx, driver.AttackSpec{
				Name: fmt.Sprintf("%-12s %s %s %g/s", svc, ph.name, label, rate), Rate: rate, Duration: o.Duration,
				MaxWorkers: e.MaxWorkers, Progress: e.Progress, Timeout: 30 * time.Second, Next: ph.req,
			})
			phase := driver.Phase{Name: ph.name, Client: c}
			if after := wal.LSN(ctx); before >= 0 && after >= before {
				d := after - before
				phase.WALBytes = &d
				if c.OK > 0 {
					res.Metrics[MetricWALPerOpOf.Of(ph.name)] = math.Round(float64(d) / float64(c.OK))
				}
			}
			res.Phases = append(res.Phases, phase)
			driver.FlattenClient(res.Metrics, driver.ClientPhase(ph.name), c)
		}
		m := res.Metrics
		for _, q := range []struct {
			suffix string
			ratio  driver.Metric
		}{{driver.SuffixP50, MetricCostRatioP50}, {driver.SuffixP99, MetricCostRatioP99}} {
			if v := driver.Ratio(m[driver.ClientRewrite.Key(q.suffix)], m[driver.ClientPatch.Key(q.suffix)]); !math.IsNaN(v) {
				m[q.ratio] = v
			}
		}
		st, err := driver.GetStats(ctx, base)
		res.Stats = st
		driver.FlattenServer(m, st)
		if v := driver.Ratio(m[driver.ServerReplaceProfileP50], m[driver.ServerPatchFieldsP50]); !math.IsNaN(v) {
			m[MetricServerCostRatioP50] = v
		}
		return res, err
	})
	return p, err
}

// setupSides runs setup (creating the users a point needs) on each side
// of p. A side whose setup fails is failed in p with what, the error and
// the answer its service gave (Point.FailSide), and is not measured; the
// other sides still are. A side already failed or skipped (Point.SkipSide)
// is left alone. Only a cancelled ctx is returned: the run goes on.
func setupSides(ctx context.Context, p *driver.Point, what string, setup func(svc string) error) error {
	for _, svc := range p.Sides {
		if err := ctx.Err(); err != nil {
			return err
		}
		if p.SetupFailed(svc) {
			continue
		}
		if err := setup(svc); err != nil {
			if cerr := ctx.Err(); cerr != nil {
				return cerr
			}
			p.FailSide(svc, fmt.Sprintf("%s failed: %v", what, err))
		}
	}
	return nil
}

func sizeLabel(n int) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%dMB", n>>20)
	}
	return fmt.Sprintf("%dKB", n>>10)
}

// parallel runs fn(0..n-1) on workers goroutines and returns the first
// error.
func parallel(ctx context.Context, n, workers int, fn func(i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				if err := fn(i); err != nil {
					cancel(err)
				}
			}
		})
	}
feed:
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	return context.Cause(ctx)
}

// walMeter reads pg_current_wal_lsn() over one connection.
type walMeter struct{ conn *pgx.Conn }

// newWALMeter connects to url, or returns nil when it cannot.
func newWALMeter(ctx context.Context, url string) *walMeter {
	if url == "" {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(cctx, url)
	if err != nil {
		return nil
	}
	return &walMeter{conn: conn}
}

// LSN returns the current WAL position in bytes, or -1.
func (w *walMeter) LSN(ctx context.Context) int64 {
	if w == nil {
		return -1
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var n int64
	if err := w.conn.QueryRow(ctx, "SELECT (pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint").Scan(&n); err != nil {
		return -1
	}
	return n
}

// Close closes the connection.
func (w *walMeter) Close(ctx context.Context) {
	if w != nil {
		_ = w.conn.Close(ctx)
	}
}

// redact hides a URL's password.
func redact(u string) string {
	if at := strings.LastIndex(u, "@"); at > 0 {
		if i := strings.Index(u, "://"); i > 0 && i < at {
			return u[:i+3] + "…" + u[at:]
		}
	}
	return u
}
