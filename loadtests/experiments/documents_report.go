package experiments

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/scenario"
)

// The report's data set: users whose profile has a country (50 codes, the
// first ones commoner), an age (18-80) and a tier (gold 10%, silver 30%,
// bronze 60%), as generated on both sides (Postgres by SQL, MongoDB by
// the driver) with the same distribution.
const (
	reportCountries = 50
	// reportWarmups are the queries run once before each measured set.
	reportWarmups = 1
)

// reportQueries are the measured reports: every user grouped by country
// (counts only, so that FerretDB, which has no $avg, answers it too),
// the same with the average age, and the gold tier's (10%) with the
// average age.
var reportQueries = []struct {
	name string
	body string
}{
	{"counts", `{"group_by":"country","top":10}`},
	{"average", `{"group_by":"country","average":"age","top":10}`},
	{"gold", `{"match":{"tier":"gold"},"group_by":"country","average":"age","top":10}`},
}

// reportPlan is one size's part of the run.
type reportPlan struct {
	users int
	// reps is the most runs of each query; budget bounds them in time
	// (at least 3 run).
	reps   int
	budget time.Duration
	// mongoSkip leaves the MongoDB side out at this size when it is
	// FerretDB, which scans every document (two minutes a report at
	// 1,000,000 users, measured once): its figure would say nothing about
	// MongoDB and cost make results ten minutes.
	mongoSkip bool
}

// reportPlans are the sizes run: 100,000 and 1,000,000 users at Full
// (FerretDB at 100,000 only: see mongoSkip).
func reportPlans(size Size) []reportPlan {
	if size == Small {
		return []reportPlan{{users: 2000, reps: 5, budget: 10 * time.Second}, {users: 6000, reps: 5, budget: 10 * time.Second}}
	}
	return []reportPlan{{users: 100_000, reps: 30, budget: 60 * time.Second}, {users: 1_000_000, reps: 30, budget: 60 * time.Second, mongoSkip: true}}
}

// reportText is documents-report's prose.
var reportText = Text{
	Title:    "Aggregation report over the documents",
	Happens:  "The same report (users grouped by a profile string, counted, the age averaged, the top 10) runs as a MongoDB aggregation pipeline ($match, $group, $sort, $limit) and as one SQL statement over jsonb (GROUP BY profile->>'country'); a report over every user reads every row on either side, the GIN index serves only the filtered report's @> match, and an expression index on profile->>'country' is measured as a variant.",
	UserMust: "Run reports over jsonb with plain SQL, and give a report that must be fast a filter an index can serve or a summary table kept by the writes: neither side makes a grouping over every document cheap.",
	Figure:   reportFigure,
	Notes: func(f *Figures) []string {
		return documentsNotes(f,
			"each figure is the p50 / p99 of POST /users/report through the service, sequential requests after one warm-up, as many as fit the size's time budget (at least 3, at most 30: the count is beside each figure)",
			"data loaded straight into each database (not through the services); the Postgres table's GIN index (jsonb_path_ops) is rebuilt after each load, its build time and size measured; the expression index is built after the first measured set and measured as a variant",
			"FerretDB has no $avg (the reports with an average answer 501 there) and no index its plans use: its figures are of a full scan by the stand-in, not of MongoDB")
	},
}

// reportFigure states each size's figures.
func reportFigure(f *Figures) string {
	var parts []string
	for _, n := range []string{"100k", "1m", "2k", "6k"} {
		if !f.Has(reportSide("pg", n).Of(MetricCountsP50MS)) {
			continue
		}
		s := fmt.Sprintf("%s users — Postgres: counts %s, with average %s, gold tier %s; with the expression index: counts %s; GIN index %s MB built in %s s",
			n, reportCell(f, "pg_"+n+"_counts"), reportCell(f, "pg_"+n+"_average"), reportCell(f, "pg_"+n+"_gold"), reportCell(f, "pg_"+n+"_counts_expr"),
			num(f.Num(reportSide("pg", n).Of(MetricGINMB))), num(f.Num(reportSide("pg", n).Of(MetricGINBuildSeconds))))
		if f.Has(reportSide("mongo", n).Of(MetricCountsP50MS)) {
			s += fmt.Sprintf("; %s: counts %s", f.StrOr("mongo_server", "MongoDB side"), reportCell(f, "mongo_"+n+"_counts"))
			switch {
			case f.Has(reportSide("mongo", n).Of(MetricGoldP50MS)) && f.Has(reportSide("mongo", n).Of(MetricAverageP50MS)):
				s += ", with average " + reportCell(f, "mongo_"+n+"_average") + ", gold tier " + reportCell(f, "mongo_"+n+"_gold")
			case f.Has(reportSide("mongo", n).Of(MetricGoldP50MS)):
				s += ", gold tier without the average " + reportCell(f, "mongo_"+n+"_gold") + " (no $avg: 501)"
			}
		} else {
			s += "; MongoDB side: " + f.StrOr("mongo_"+n+"_status", "not measured")
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ". ") + "."
}

// reportCell is "p50 / p99 ms (n runs)" of the metrics under key.
func reportCell(f *Figures, key string) string {
	if !f.Has(SidePrefix(key + "_").Of(MetricP50MS)) {
		return f.StrOr(key+"_status", "not measured")
	}
	return fmt.Sprintf("%s / %s ms (%d runs)", num(f.Num(SidePrefix(key+"_").Of(MetricP50MS))), num(f.Num(SidePrefix(key+"_").Of(MetricP99MS))), f.Int(SidePrefix(key+"_").Of(MetricRuns)))
}

// documentsReport runs reportPlans on both sides.
func documentsReport(ctx context.Context, env Env, size Size) (Result, error) {
	began := time.Now()
	rig, err := newDocRig(ctx, env, "report", 4)
	if err != nil {
		return Result{}, err
	}
	defer rig.Close()
	long := map[string]string{"BACKEND_TIMEOUT": "5m", "WRITE_TIMEOUT": "5m"}
	bases := map[string]string{}
	for _, side := range []string{sidePG, sideMongo} {
		if bases[side], err = rig.start(ctx, side, long); err != nil {
			return Result{}, err
		}
	}
	res := Result{Name: DocumentsReport, AckedLost: -1}
	loaded := map[string]int{}
	for _, p := range reportPlans(size) {
		pg := reportRun{rig: rig, base: bases[sidePG], p: p, have: loaded[sidePG], res: &res}
		if err := pg.measurePG(ctx); err != nil {
			return Result{}, fmt.Errorf("postgres side, %d users: %w", p.users, err)
		}
		loaded[sidePG] = p.users
		if p.mongoSkip && strings.HasPrefix(mongoServer(ctx, rig.db()), "FerretDB") {
			res.setting("mongo_"+scenario.ScaleLabel(p.users)+"_status", "not run at this size on FerretDB, which scans every document for each report (its 100,000-user figure shows the slope) and whose figure would say nothing about MongoDB")
			continue
		}
		mongo := reportRun{rig: rig, base: bases[sideMongo], p: p, have: loaded[sideMongo], res: &res}
		if err := mongo.measureMongo(ctx); err != nil {
			res.setting("mongo_"+scenario.ScaleLabel(p.users)+"_status", "failed: "+err.Error())
		}
		loaded[sideMongo] = p.users
	}
	documentsSettings(ctx, &res, rig)
	res.DurationS = time.Since(began).Seconds()
	return res, nil
}

// reportRun is one side's turn at one size of documents-report: the
// rig (both databases), the side's service (base), the size's plan, the
// users the side already holds (have), and the result it records in.
type reportRun struct {
	// rig holds both sides' databases, loaded directly.
	rig *docRig
	// base is the side's service, which runs the reports.
	base string
	// p is the size measured: its users, repetitions and time budget.
	p reportPlan
	// have is how many users the side already holds (a smaller size's).
	have int
	// res is the result the figures are recorded in.
	res *Result
}

// measurePG loads the Postgres side from have to p.users users, rebuilds
// the GIN index (timed, sized), then measures every query, then the
// counts again with an expression index on profile->>'country'.
func (rr reportRun) measurePG(ctx context.Context) error {
	rig, p, have, res := rr.rig, rr.p, rr.have, rr.res
	k := "pg_" + scenario.ScaleLabel(p.users)
	db := rig.pg.Pool
	began := time.Now()
	// The bulk load skips the change-feed trigger (it would write a
	// change row per user) and the GIN index (built once after).
	for _, sql := range []string{`DROP INDEX IF EXISTS users_profile_path_ops`, `DROP INDEX IF EXISTS users_country_expr`, `ALTER TABLE users DISABLE TRIGGER users_changed`} {
		if _, err := db.Exec(ctx, sql); err != nil {
			return err
		}
	}
	if _, err := db.Exec(ctx, reportInsertSQL, have, p.users); err != nil {
		return fmt.Errorf("load: %w", err)
	}
	if _, err := db.Exec(ctx, `ALTER TABLE users ENABLE TRIGGER users_changed`); err != nil {
		return err
	}
	res.metric(SidePrefix(k+"_").Of(MetricLoadSeconds), time.Since(began).Seconds())
	t := time.Now()
	if _, err := db.Exec(ctx, `CREATE INDEX users_profile_path_ops ON users USING gin (profile jsonb_path_ops)`); err != nil {
		return err
	}
	res.metric(SidePrefix(k+"_").Of(MetricGINBuildSeconds), time.Since(t).Seconds())
	var gin, table int64
	if err := db.QueryRow(ctx, `SELECT pg_relation_size('users_profile_path_ops'), pg_table_size('users')`).Scan(&gin, &table); err != nil {
		return err
	}
	res.metric(SidePrefix(k+"_").Of(MetricGINMB), float64(gin)/(1<<20))
	res.metric(SidePrefix(k+"_").Of(MetricTableMB), float64(table)/(1<<20))
	if _, err := db.Exec(ctx, `ANALYZE users`); err != nil {
		return err
	}
	for _, q := range reportQueries {
		if err := rr.measure(ctx, q.body, k+"_"+q.name); err != nil {
			return err
		}
	}
	t = time.Now()
	if _, err := db.Exec(ctx, `CREATE INDEX users_country_expr ON users ((profile->>'country'))`); err != nil {
		return err
	}
	res.metric(SidePrefix(k+"_").Of(MetricExprBuildSeconds), time.Since(t).Seconds())
	if _, err := db.Exec(ctx, `ANALYZE users`); err != nil {
		return err
	}
	return rr.measure(ctx, reportQueries[0].body, k+"_counts_expr")
}

// reportInsertSQL adds users $1+1 .. $2 with the data set's profiles:
// country c<i> with i = floor(50·u²) (the first codes commoner), age
// 18-80, tier by a uniform draw.
const reportInsertSQL = `INSERT INTO users (id, email, name, plan, profile)
	SELECT gen_random_uuid(), 'r' || i || '@example.com', 'user ' || i, 'free',
	       jsonb_build_object('country', 'c' || floor(50 * r.u * r.u)::int, 'age', 18 + floor(random() * 63)::int,
	                          'tier', CASE WHEN r.t < 0.1 THEN 'gold' WHEN r.t < 0.4 THEN 'silver' ELSE 'bronze' END,
	                          'bio', md5(i::text))
	FROM generate_series($1::int + 1, $2::int) AS i, LATERAL (SELECT random() AS u, random() AS t, i AS j) AS r`

// measureMongo loads the MongoDB side the same way and measures the
// counts (and, where the server averages, every query; on FerretDB the
// gold tier without its average).
func (rr reportRun) measureMongo(ctx context.Context) error {
	rig, p, have, res := rr.rig, rr.p, rr.have, rr.res
	k := "mongo_" + scenario.ScaleLabel(p.users)
	began := time.Now()
	if err := loadMongoUsers(ctx, rig, have, p.users); err != nil {
		return fmt.Errorf("load: %w", err)
	}
	res.metric(SidePrefix(k+"_").Of(MetricLoadSeconds), time.Since(began).Seconds())
	if err := rr.measure(ctx, reportQueries[0].body, k+"_counts"); err != nil {
		return err
	}
	avg := rr.measure(ctx, reportQueries[1].body, k+"_average")
	if avg != nil && strings.Contains(avg.Error(), "501") {
		res.setting(k+"_average_status", "not measured: "+avg.Error())
		return rr.measure(ctx, `{"match":{"tier":"gold"},"group_by":"country","top":10}`, k+"_gold")
	}
	if avg != nil {
		return avg
	}
	return rr.measure(ctx, reportQueries[2].body, k+"_gold")
}

// loadMongoUsers inserts users have+1 .. n in batches of 10,000.
func loadMongoUsers(ctx context.Context, rig *docRig, have, n int) error {
	users := rig.db().Collection("users")
	r := rand.New(rand.NewPCG(uint64(have), uint64(n)))
	now := time.Now().UTC().Truncate(time.Millisecond)
	for lo := have; lo < n; lo += 10_000 {
		var docs []any
		for i := lo + 1; i <= min(lo+10_000, n); i++ {
			u, t := r.Float64(), r.Float64()
			tier := "bronze"
			if t < 0.1 {
				tier = "gold"
			} else if t < 0.4 {
				tier = "silver"
			}
			docs = append(docs, bson.D{{Key: "_id", Value: uuid.NewString()}, {Key: "email", Value: fmt.Sprintf("r%d@example.com", i)},
				{Key: "name", Value: fmt.Sprintf("user %d", i)}, {Key: "plan", Value: "free"},
				{Key: "profile", Value: bson.D{{Key: "country", Value: fmt.Sprintf("c%d", int(reportCountries*u*u))}, {Key: "age", Value: int64(18 + r.IntN(63))},
					{Key: "tier", Value: tier}, {Key: "bio", Value: fmt.Sprintf("%032x", r.Uint64())}}},
				{Key: "created_at", Value: now}, {Key: "updated_at", Value: now}})
		}
		if _, err := users.InsertMany(ctx, docs, options.InsertMany().SetOrdered(false)); err != nil {
			return err
		}
	}
	return nil
}

// reportClient has the reports' timeout: a full scan of 1,000,000
// documents by FerretDB takes about a minute.
var reportClient = &http.Client{Timeout: 5 * time.Minute}

// measure runs the report body against the side's base: a warm-up,
// then up to p.reps runs within p.budget (at least 3), recording p50,
// p99 and the run count under key. A non-200 answer is an error naming
// it.
func (rr reportRun) measure(ctx context.Context, body, key string) error {
	base, p, res := rr.base, rr.p, rr.res
	var ms []float64
	deadline := time.Now().Add(p.budget)
	for i := 0; i < reportWarmups+p.reps; i++ {
		if i >= reportWarmups+3 && time.Now().After(deadline) {
			break
		}
		t := time.Now()
		if err := postReport(ctx, base, body); err != nil {
			return err
		}
		if i >= reportWarmups {
			ms = append(ms, float64(time.Since(t).Microseconds())/1000)
		}
	}
	slices.Sort(ms)
	res.metric(SidePrefix(key+"_").Of(MetricP50MS), feedQuantile(ms, 0.5))
	res.metric(SidePrefix(key+"_").Of(MetricP99MS), feedQuantile(ms, 0.99))
	res.metric(SidePrefix(key+"_").Of(MetricRuns), float64(len(ms)))
	return nil
}

// postReport sends one report and checks it answered 200 with groups.
func postReport(ctx context.Context, base, body string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/users/report", bytes.NewReader([]byte(body)))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := reportClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out struct {
		Groups []json.RawMessage `json:"groups"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &out) != nil || len(out.Groups) == 0 {
		return fmt.Errorf("POST /users/report %s: %d %.200s", body, resp.StatusCode, raw)
	}
	return nil
}

// reportSide starts the aggregation report's figures of side ("pg",
// "mongo") at size users ("1m"): "pg_1m_".
func reportSide(side, size string) SidePrefix { return SidePrefix(side + "_" + size + "_") }
