package scenario

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/versions"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// DocumentsScale is the scenario of the documents pair's data set grown
// to each of DocumentsOptions.ScaleUsers: one point per size, each
// side's figures how long the load and the index builds took and how
// large the table and its indexes are (the Scale* metrics). The ceiling
// searches then run on it under DocumentsScaleCeiling's names.
const DocumentsScale = "documents.scale"

// The documents.scale point's metrics, per side.
const (
	// ScaleLoadS is the seconds the bulk load of the users took (straight
	// into the database, its secondary indexes dropped), the driver's
	// generating them included: a figure of the load, not of the
	// database alone.
	ScaleLoadS = "load_s"
	// ScaleIndexBuildS is the seconds the secondary indexes took to
	// build after the load: the GIN index on Postgres; the unique email
	// and the wildcard indexes on MongoDB (the service's, where its
	// server took them).
	ScaleIndexBuildS = "index_build_s"
	// ScaleSearchIndexMB is the size of the index a containment search
	// uses: the GIN index (jsonb_path_ops) on Postgres, the wildcard
	// index on MongoDB (absent where the server refused it).
	ScaleSearchIndexMB = "search_index_mb"
	// ScaleIndexesMB is every index of the users table or collection.
	ScaleIndexesMB = "indexes_mb"
	// ScaleTableMB is the table's (or collection's) data on disk.
	ScaleTableMB = "table_mb"
	// ScaleOneSearchMS is one containment search's latency on a side
	// whose search ceiling is not searched at this size (FerretDB, which
	// scans every document): the figure that says why.
	ScaleOneSearchMS = "one_search_ms"
)

// ScaleLabel names a data-set size in scenario and point names: "100k",
// "1m", "2500".
func ScaleLabel(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%dm", n/1_000_000)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}

// DocumentsScaleCeiling is the ceiling scenario of op ("search" or
// "write") at n users: "documents.search.100k.ceiling".
func DocumentsScaleCeiling(op string, n int) driver.ScenarioName {
	return CeilingScenarioName(pairs.Documents+"."+op, ScaleLabel(n))
}

// scaleBatch is how many users one COPY or insertMany call of the bulk
// load carries.
const scaleBatch = 5000

// scaleSearchSkipAbove is the size above which a side that scans every
// document for a search (FerretDB) is not searched at all: at 100,000
// users one of its searches takes minutes, and its figure would say
// nothing about MongoDB.
const scaleSearchSkipAbove = 100_000

// scale grows the data set to each of o.ScaleUsers in turn and runs the
// ceilings o asks for on it: the users are loaded straight into each
// database (the service's API would take an hour to create a million),
// the same generated users on both sides, after which each side's
// secondary indexes are rebuilt, timed and sized (the documents.scale
// point). A side whose server scans every document for a search
// (FerretDB) has its search ceiling replaced by one timed search, and
// none above scaleSearchSkipAbove. The loaded users are removed at the
// end.
func (dr documentsRun) scale(ctx context.Context) error {
	s, e, run, o, us, seeded, fresh, tag := dr.s, dr.e, dr.run, dr.o, dr.us, dr.seeded, dr.fresh, dr.tag
	if len(o.ScaleUsers) == 0 || (!o.SearchCeiling && !o.WriteCeiling) {
		return nil
	}
	for _, svc := range s.Pair.Sides() {
		us.trim(ctx, svc, seeded[svc])
	}
	users, closeUsers, err := s.mongoUsers(e, fresh)
	if err != nil {
		return err
	}
	defer closeUsers()
	pg, err := e.connect(ctx)
	if err != nil {
		return err
	}
	defer pg.Close(context.WithoutCancel(ctx))
	schema := e.ServiceVar(pairs.NoMongoDB, "DATABASE_SCHEMA", DefaultSchemas[pairs.NoMongoDB])
	l := &scaleLoader{pg: pg, table: pgx.Identifier{schema, "users"}, users: users, seed: o.Seed, tag: tag, pgSide: s.Pair.A.Name, mongoDropped: len(fresh) > 0,
		have: map[string]int{s.Pair.A.Name: seeded[s.Pair.A.Name], s.Pair.B.Name: seeded[s.Pair.B.Name]}}
	defer l.remove(ctx, e)
	scans := scansEveryDocument(ctx, users)
	opts := o.SearchCeilingOpts
	if !o.SearchCeiling {
		opts = o.WriteCeilingOpts
	}
	inFlight, _, err := e.ceilingInFlight(ctx, run, ceilingScenario{name: CeilingScenarioName(s.Pair.Name, ""), env: fresh}, s.Pair.Services(), opts)
	if err != nil {
		return err
	}
	for _, n := range o.ScaleUsers {
		p := driver.Point{Scenario: DocumentsScale, Name: fmt.Sprintf("%d users", n), Sides: s.Pair.Sides()}
		p.Rounds = []driver.Round{{Order: s.Pair.Sides(), Sides: map[string]*driver.SideResult{}}}
		for _, svc := range s.Pair.Sides() {
			if err := ctx.Err(); err != nil {
				return err
			}
			e.logf("documents at %d users: loading %s", n, svc)
			m, err := l.grow(ctx, svc == s.Pair.A.Name, svc, n)
			if err != nil {
				p.FailSide(svc, fmt.Sprintf("loading %d users failed: %v", n, err))
				continue
			}
			p.Rounds[0].Sides[svc] = &driver.SideResult{Service: svc, StartedAt: time.Now(), Metrics: m}
		}
		err := dr.scaleCeilings(ctx, scaleSet{l: l, inFlight: inFlight, scans: scans}, &p, n)
		driver.Summarize(&p)
		run.Points = append(run.Points, p)
		if err != nil {
			return err
		}
	}
	return nil
}

// scaleSet is what every size of the scale points shares: the loader
// that grows the data set, the in-flight bound each service runs with,
// and the MongoDB side's server when it scans every document for a
// search ("": it does not).
type scaleSet struct {
	l        *scaleLoader
	inFlight map[string]*int
	scans    string
}

// scaleCeilings runs the search and write ceilings at n users on the
// sides of p whose load succeeded. The MongoDB side's search ceiling is
// left out when its server scans every document (ss.scans): one search
// is timed instead, up to scaleSearchSkipAbove users, and recorded in p.
func (dr documentsRun) scaleCeilings(ctx context.Context, ss scaleSet, p *driver.Point, n int) error {
	e, run, s, o := dr.e, dr.run, dr.s, dr.o
	l, inFlight, scans := ss.l, ss.inFlight, ss.scans
	users := l.users
	all := s.ceilingSides(ctx, e, n, users, inFlight)
	var sides []ceilingSide
	for _, side := range all {
		if p.SetupFailed(side.name) {
			// Its searches say why they have no figure.
			st := driver.Failed("not searched: %s", p.Status[side.name].Reason)
			for _, op := range scaleOps(o) {
				run.Ceilings = append(run.Ceilings, driver.Ceiling{Scenario: DocumentsScaleCeiling(op, n), Service: side.name, Status: &st})
			}
			continue
		}
		if side.name == s.Pair.B.Name {
			// The count is proven once, here, under the load's bound, not
			// before every step: FerretDB counts a million documents by
			// reading them, even from metadata (more than 30 s at
			// 1,000,000 users, 7 December 2026), and keeps reading after
			// the client gave up, which made the other side's next step
			// start on a busy machine. The searches and profile writes
			// change no count; each step still proves the machine idle.
			if why := countOnce(ctx, users, n); why != "" {
				st := driver.Status{State: driver.StateInvalid, Reason: "precondition: " + why}
				for _, op := range scaleOps(o) {
					run.Ceilings = append(run.Ceilings, driver.Ceiling{Scenario: DocumentsScaleCeiling(op, n), Service: side.name, Status: &st})
				}
				continue
			}
			side.ready = func(context.Context) string { return "" }
		}
		sides = append(sides, side)
	}
	ids := map[string][]string{}
	for _, side := range sides {
		var err error
		if ids[side.base], err = l.ids(ctx, side.name == s.Pair.A.Name, 10_000); err != nil {
			return err
		}
	}
	if o.SearchCeiling {
		op := s.searchOp(o.SearchTimeout)
		op.Scenario = DocumentsScaleCeiling("search", n)
		searched, skipped := sides, []driver.Ceiling(nil)
		if scans != "" {
			searched = nil
			for _, side := range sides {
				if side.name != s.Pair.B.Name {
					searched = append(searched, side)
					continue
				}
				why := ss.searchSkip(ctx, op, side, p, n)
				st := driver.Status{State: driver.StateSkipped, Reason: why}
				skipped = append(skipped, driver.Ceiling{Scenario: op.Scenario, Service: side.name, Status: &st})
			}
		}
		if len(searched) > 0 {
			if err := e.runOpCeiling(ctx, run, op, searched, o.SearchCeilingOpts); err != nil {
				return err
			}
		}
		run.Ceilings = append(run.Ceilings, skipped...)
	}
	if o.WriteCeiling && len(sides) > 0 {
		op := writeOp(ids)
		op.Scenario = DocumentsScaleCeiling("write", n)
		return e.runOpCeiling(ctx, run, op, sides, o.WriteCeilingOpts)
	}
	return nil
}

// countOnce is why the collection does not hold the n users of the data
// set ("" when it does), counted from its metadata within
// scaleOpTimeout.
func countOnce(ctx context.Context, users *mongo.Collection, n int) string {
	var got int64
	err := withLongTimeout(ctx, func(ctx context.Context) error {
		var err error
		got, err = users.EstimatedDocumentCount(ctx)
		return err
	})
	return usersWhy(got, err, n)
}

// scaleOps are the operations whose ceilings o searches at scale.
func scaleOps(o DocumentsOptions) []string {
	var ops []string
	if o.SearchCeiling {
		ops = append(ops, "search")
	}
	if o.WriteCeiling {
		ops = append(ops, "write")
	}
	return ops
}

// searchSkip is why side's search ceiling at n users is not searched:
// its server (ss.scans) reads every document for a search. Up to
// scaleSearchSkipAbove users one search is timed instead, recorded in p
// as ScaleOneSearchMS.
func (ss scaleSet) searchSkip(ctx context.Context, op CeilingOp, side ceilingSide, p *driver.Point, n int) string {
	why := fmt.Sprintf("%s scans every document for a search", ss.scans)
	if n > scaleSearchSkipAbove {
		return why + fmt.Sprintf(", not even once above %s users: its figure would say nothing about MongoDB", ScaleLabel(scaleSearchSkipAbove))
	}
	t, err := oneSearch(ctx, op, side.base)
	if err != nil {
		return why + fmt.Sprintf("; one search failed: %v", err)
	}
	if sr := p.Rounds[0].Sides[side.name]; sr != nil {
		sr.Metrics[ScaleOneSearchMS] = float64(t.Microseconds()) / 1000
	}
	return why + fmt.Sprintf("; one search took %.1f s", t.Seconds())
}

// oneSearch times one request of op on base, bounded by 10 minutes.
func oneSearch(ctx context.Context, op CeilingOp, base string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	req := op.Requests(base)(0)
	t := time.Now()
	code, b, err := driver.Do(ctx, req.Method, req.URL, req.Body)
	if err == nil && code != 200 {
		err = fmt.Errorf("answered %d %s", code, strings.TrimSpace(string(b)))
	}
	return time.Since(t), err
}

// scansEveryDocument names the MongoDB side's server when it scans every
// document for a containment search whatever its indexes (FerretDB,
// whose plans use no secondary index), "" otherwise.
func scansEveryDocument(ctx context.Context, users *mongo.Collection) string {
	if b, err := versions.MongoBuild(ctx, users.Database()); err == nil && b.Flavor == "FerretDB" {
		return b.Flavor
	}
	return ""
}

// ids are up to limit ids of a side's users (the Postgres side's when
// postgres), for the write ceiling's patches, read on the loader's own
// connection and collection.
func (l *scaleLoader) ids(ctx context.Context, postgres bool, limit int) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if postgres {
		rows, err := l.pg.Query(ctx, "SELECT id::text FROM "+l.table.Sanitize()+" LIMIT $1", limit)
		if err != nil {
			return nil, err
		}
		return pgx.CollectRows(rows, pgx.RowTo[string])
	}
	cur, err := l.users.Find(ctx, bson.D{}, options.Find().SetProjection(bson.D{{Key: "_id", Value: 1}}).SetLimit(int64(limit)))
	if err != nil {
		return nil, err
	}
	defer cur.Close(ctx)
	var out []string
	for cur.Next(ctx) {
		var d struct {
			ID string `bson:"_id"`
		}
		if err := cur.Decode(&d); err != nil {
			return nil, err
		}
		out = append(out, d.ID)
	}
	return out, cur.Err()
}

// scaleLoader loads the generated users straight into each side's store.
type scaleLoader struct {
	pg    *pgx.Conn
	table pgx.Identifier
	users *mongo.Collection
	seed  uint64
	tag   string
	// have is how many users each side holds (the data set's first).
	have map[string]int
	// loaded is whether a side got users of the loader's.
	loaded map[string]bool
	// pgSide names the Postgres side; mongoDropped is set when the
	// MongoDB side's database is the run's own, dropped at its end, so
	// that its loaded users need no deleting.
	pgSide       string
	mongoDropped bool
	// failed says, per side, why its load stopped part way: the side is
	// not grown again (its rows and indexes are not what a larger size
	// would assume), and remove restores its indexes.
	failed map[string]string
	// mongoSpecs are the MongoDB side's secondary indexes as the first
	// load found them: what every load rebuilds and remove restores.
	mongoSpecs []mongoIndex
}

// scaleUser is the i-th loaded user: the same on both sides for the
// same seed (its profile drawn from a generator of its own).
func (l *scaleLoader) scaleUser(i int) (id, email, name, plan string, profile []byte) {
	r := rand.New(rand.NewPCG(l.seed, uint64(i)))
	profile, _ = json.Marshal(SeedProfile(r))
	return uuid.NewString(), fmt.Sprintf("scale%d-%s@load.test", i, l.tag), fmt.Sprintf("user %d", i), []string{"free", "pro", "team"}[i%3], profile
}

// grow loads svc (the Postgres side when postgres) from the users it
// holds to n, its secondary indexes dropped first and rebuilt after,
// and returns the documents.scale figures.
//
// A load that fails leaves the side as it stopped (some rows in, an
// index perhaps missing): the side is marked failed and every later
// grow of it fails at once, saying so, instead of loading onto rows
// that are not the size it would record.
func (l *scaleLoader) grow(ctx context.Context, postgres bool, svc string, n int) (map[driver.Metric]float64, error) {
	if l.loaded == nil {
		l.loaded, l.failed = map[string]bool{}, map[string]string{}
	}
	if why := l.failed[svc]; why != "" {
		return nil, fmt.Errorf("not loaded: %s", why)
	}
	l.loaded[svc] = true
	from := l.have[svc]
	var m map[driver.Metric]float64
	var err error
	if postgres {
		m, err = l.growPostgres(ctx, from, n)
	} else {
		m, err = l.growMongo(ctx, from, n)
	}
	if err != nil {
		l.failed[svc] = fmt.Sprintf("the load to %d users failed part way", n)
		return nil, err
	}
	l.have[svc] = n
	return m, nil
}

// searchIndex is the GIN index the containment search uses, as the
// documents migrations create it.
const searchIndex = "users_profile_path_ops"

// searchIndexDDL is the statement create ("CREATE INDEX", "CREATE INDEX
// IF NOT EXISTS") of the loader's table's searchIndex, defined as the
// documents migrations define it (0001_users.sql).
func (l *scaleLoader) searchIndexDDL(create string) string {
	return create + " " + searchIndex + " ON " + l.table.Sanitize() + " USING gin (profile jsonb_path_ops)"
}

// growPostgres: the GIN index dropped and the change-feed trigger
// disabled (a bulk load would write a change row per user), users from+1
// .. n copied in, then the index built (timed), the table vacuumed and
// analysed, a checkpoint taken, its sizes read.
func (l *scaleLoader) growPostgres(ctx context.Context, from, n int) (map[driver.Metric]float64, error) {
	t := l.table.Sanitize()
	schema := pgx.Identifier{l.table[0]}.Sanitize()
	exec := func(sql string) error { _, err := l.pg.Exec(ctx, sql); return err }
	if err := exec("DROP INDEX IF EXISTS " + schema + "." + searchIndex); err != nil {
		return nil, err
	}
	began := time.Now()
	i := from
	err := l.withoutChangeTrigger(ctx, func() error {
		_, err := l.pg.CopyFrom(ctx, l.table, []string{"id", "email", "name", "plan", "profile"}, pgx.CopyFromFunc(func() ([]any, error) {
			if i >= n {
				return nil, nil
			}
			i++
			id, email, name, plan, profile := l.scaleUser(i)
			return []any{id, email, name, plan, string(profile)}, nil
		}))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("copy: %w", err)
	}
	m := map[driver.Metric]float64{ScaleLoadS: time.Since(began).Seconds()}
	began = time.Now()
	if err := exec(l.searchIndexDDL("CREATE INDEX")); err != nil {
		return nil, err
	}
	m[ScaleIndexBuildS] = time.Since(began).Seconds()
	if err := exec("VACUUM ANALYZE " + t); err != nil {
		return nil, err
	}
	// The load leaves the table's pages dirty in shared buffers; the
	// checkpoint that writes them would otherwise run into the ceilings
	// measured next, or not, depending on how long the other side's load
	// took. Taken now, every size starts from the same state. (Suspected,
	// not proven, in one gap: on 7 December 2026 the 1,000,000-user
	// search ceiling was 170/s right after the load and 400/s in a run
	// where FerretDB's 4-minute load came in between.)
	if err := exec("CHECKPOINT"); err != nil {
		return nil, fmt.Errorf("checkpoint after the load (needs superuser or pg_checkpoint): %w", err)
	}
	var gin, all, table int64
	if err := l.pg.QueryRow(ctx, "SELECT pg_relation_size($1::regclass), pg_indexes_size($2::regclass), pg_table_size($2::regclass)",
		schema+"."+searchIndex, t).Scan(&gin, &all, &table); err != nil {
		return nil, err
	}
	m[ScaleSearchIndexMB], m[ScaleIndexesMB], m[ScaleTableMB] = mb(gin), mb(all), mb(table)
	return m, nil
}

// growMongo: the collection's secondary indexes dropped (their specs
// kept), users from+1 .. n inserted in batches, the indexes created again
// (timed), the sizes read from collStats.
func (l *scaleLoader) growMongo(ctx context.Context, from, n int) (map[driver.Metric]float64, error) {
	present, err := secondaryIndexes(ctx, l.users)
	if err != nil {
		return nil, err
	}
	if l.mongoSpecs == nil {
		l.mongoSpecs = present
	}
	specs := l.mongoSpecs
	for _, ix := range present {
		if err := whileLocked(ctx, func(ctx context.Context) error {
			err := l.users.Indexes().DropOne(ctx, ix.name)
			var se mongo.ServerError
			if errors.As(err, &se) && se.HasErrorCode(indexNotFound) {
				return nil // a try the lock reported failed did drop it
			}
			return err
		}); err != nil {
			return nil, fmt.Errorf("drop index %s: %w", ix.name, err)
		}
	}
	began := time.Now()
	now := time.Now().UTC().Truncate(time.Millisecond)
	for lo := from; lo < n; lo += scaleBatch {
		docs := make([]any, 0, scaleBatch)
		for i := lo + 1; i <= min(lo+scaleBatch, n); i++ {
			id, email, name, plan, profile := l.scaleUser(i)
			var p bson.D
			if err := bson.UnmarshalExtJSON(profile, false, &p); err != nil {
				return nil, err
			}
			docs = append(docs, bson.D{{Key: "_id", Value: id}, {Key: "email", Value: email}, {Key: "name", Value: name}, {Key: "plan", Value: plan},
				{Key: "profile", Value: p}, {Key: "created_at", Value: now}, {Key: "updated_at", Value: now}})
		}
		if err := withLongTimeout(ctx, func(ctx context.Context) error {
			_, err := l.users.InsertMany(ctx, docs, options.InsertMany().SetOrdered(false))
			return err
		}); err != nil {
			return nil, fmt.Errorf("insert: %w", err)
		}
	}
	m := map[driver.Metric]float64{ScaleLoadS: time.Since(began).Seconds()}
	began = time.Now()
	if err := whileLocked(ctx, func(ctx context.Context) error { return createIndexes(ctx, l.users, specs) }); err != nil {
		return nil, fmt.Errorf("create indexes: %w", err)
	}
	m[ScaleIndexBuildS] = time.Since(began).Seconds()
	var st struct {
		Size           int64            `bson:"size"`
		StorageSize    int64            `bson:"storageSize"`
		TotalIndexSize int64            `bson:"totalIndexSize"`
		IndexSizes     map[string]int64 `bson:"indexSizes"`
	}
	if err := l.users.Database().RunCommand(ctx, bson.D{{Key: "collStats", Value: l.users.Name()}}).Decode(&st); err != nil {
		return m, nil // the sizes stay unmeasured: the report says so
	}
	m[ScaleTableMB], m[ScaleIndexesMB] = mb(max(st.StorageSize, st.Size)), mb(st.TotalIndexSize)
	for name, size := range st.IndexSizes {
		if strings.Contains(name, "wildcard") {
			m[ScaleSearchIndexMB] = mb(size)
		}
	}
	return m, nil
}

// scaleOpTimeout bounds one insertMany or index build of the load: the
// client's own 30 s timeout (mongoUsers) was too short for FerretDB to
// index a million documents (7 December 2026); a context deadline takes
// its place.
const scaleOpTimeout = 30 * time.Minute

// withLongTimeout runs op under ctx bounded by scaleOpTimeout.
func withLongTimeout(ctx context.Context, op func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, scaleOpTimeout)
	defer cancel()
	return op(ctx)
}

// indexNotFound is MongoDB's IndexNotFound error code.
const indexNotFound = 27

// whileLocked runs op, and again while it fails because FerretDB's
// SQLite database was locked by another writer ("database is locked",
// SQLITE_BUSY: FerretDB still working off the step before, 7 December
// 2026), 1 s apart, then 2, 4, up to 10 s, until ctx ends or
// scaleOpTimeout has passed (the bound withLongTimeout gives the load's
// other operations): a lock is the server busy, not the load failing.
// op must be safe to repeat.
func whileLocked(ctx context.Context, op func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, scaleOpTimeout)
	defer cancel()
	wait := time.Second
	for {
		err := op(ctx)
		if err == nil || !dbLocked(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (still locked when the time ran out)", err)
		case <-time.After(wait):
		}
		wait = min(2*wait, 10*time.Second)
	}
}

// dbLocked reports whether err is FerretDB's answer to a write its
// SQLite database refused under another writer's lock.
func dbLocked(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "database is locked") || strings.Contains(err.Error(), "SQLITE_BUSY"))
}

// mongoIndex is one secondary index's spec, as listIndexes gives it.
type mongoIndex struct {
	name   string
	keys   bson.D
	unique bool
}

// createIndexes creates specs on c (none: nothing to do); an index that
// exists with the same keys and options is left as it is.
func createIndexes(ctx context.Context, c *mongo.Collection, specs []mongoIndex) error {
	var models []mongo.IndexModel
	for _, ix := range specs {
		models = append(models, mongo.IndexModel{Keys: ix.keys, Options: options.Index().SetName(ix.name).SetUnique(ix.unique)})
	}
	if len(models) == 0 {
		return nil
	}
	_, err := c.Indexes().CreateMany(ctx, models)
	return err
}

// secondaryIndexes are the collection's indexes but _id's.
func secondaryIndexes(ctx context.Context, c *mongo.Collection) ([]mongoIndex, error) {
	cur, err := c.Indexes().List(ctx)
	if err != nil {
		return nil, err
	}
	defer cur.Close(ctx)
	var out []mongoIndex
	for cur.Next(ctx) {
		var ix struct {
			Name   string `bson:"name"`
			Key    bson.D `bson:"key"`
			Unique bool   `bson:"unique"`
		}
		if err := cur.Decode(&ix); err != nil {
			return nil, err
		}
		if ix.Name != "_id_" {
			out = append(out, mongoIndex{name: ix.Name, keys: ix.Key, unique: ix.Unique})
		}
	}
	return out, cur.Err()
}

// withoutChangeTrigger runs fn with the users table's change-feed
// trigger disabled (the loader's rows are no user's changes), enabling
// it again whatever fn returned.
func (l *scaleLoader) withoutChangeTrigger(ctx context.Context, fn func() error) error {
	t := l.table.Sanitize()
	if _, err := l.pg.Exec(ctx, "ALTER TABLE "+t+" DISABLE TRIGGER users_changed"); err != nil {
		return err
	}
	err := fn()
	if _, eerr := l.pg.Exec(ctx, "ALTER TABLE "+t+" ENABLE TRIGGER users_changed"); err == nil {
		err = eerr
	}
	return err
}

// remove deletes the loaded users from each side that got some, within
// 5 minutes even when ctx has ended, and restores the indexes a failed
// load may have left dropped: on Postgres with the change-feed trigger
// disabled (the rows are the loader's, no change of a user's), then the
// GIN index created if missing and the table vacuumed; on MongoDB by
// their emails' pattern, then the secondary indexes created again.
func (l *scaleLoader) remove(ctx context.Context, e *Env) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
	defer cancel()
	pattern := "scale%-" + l.tag + "@load.test"
	for svc := range l.loaded {
		var err error
		switch {
		case svc == l.pgSide:
			t := l.table.Sanitize()
			err = l.withoutChangeTrigger(ctx, func() error {
				_, err := l.pg.Exec(ctx, "DELETE FROM "+t+" WHERE email LIKE $1", pattern)
				return err
			})
			if err == nil {
				_, err = l.pg.Exec(ctx, l.searchIndexDDL("CREATE INDEX IF NOT EXISTS"))
			}
			if err == nil {
				_, err = l.pg.Exec(ctx, "VACUUM "+t)
			}
		case !l.mongoDropped:
			_, err = l.users.DeleteMany(ctx, bson.D{{Key: "email", Value: bson.D{{Key: "$regex", Value: "^scale[0-9]+-" + l.tag + "@load\\.test$"}}}})
			if err == nil {
				err = createIndexes(ctx, l.users, l.mongoSpecs)
			}
		}
		if err != nil {
			e.logf("removing the users loaded on %s: %v", svc, err)
		}
	}
}

// mb is bytes in MiB.
func mb(b int64) float64 { return float64(b) / (1 << 20) }

// ValidateScaleUsers says what is wrong with scale, the sizes of
// DocumentsOptions.ScaleUsers, for a data set of users: each larger than
// the one before it (the first than users), at most 10,000,000.
func ValidateScaleUsers(users int, scale []int) error {
	last := users
	for _, n := range scale {
		switch {
		case n <= last:
			return fmt.Errorf("scale users %d: each size must exceed the one before it (the first the data set's %d users)", n, users)
		case n > 10_000_000:
			return fmt.Errorf("scale users %d: at most 10,000,000", n)
		}
		last = n
	}
	return nil
}

// ParseDocumentsScaleCeiling reads a DocumentsScaleCeiling name back:
// its operation and size, ok false for any other name.
func ParseDocumentsScaleCeiling(name string) (op string, n int, ok bool) {
	rest, found := strings.CutPrefix(name, pairs.Documents+".")
	if !found {
		return "", 0, false
	}
	rest, found = strings.CutSuffix(rest, ".ceiling")
	if !found {
		return "", 0, false
	}
	op, label, found := strings.Cut(rest, ".")
	if !found || (op != "search" && op != "write") {
		return "", 0, false
	}
	mult := 1
	switch {
	case strings.HasSuffix(label, "m"):
		label, mult = strings.TrimSuffix(label, "m"), 1_000_000
	case strings.HasSuffix(label, "k"):
		label, mult = strings.TrimSuffix(label, "k"), 1000
	}
	v, err := strconv.Atoi(label)
	if err != nil || v <= 0 {
		return "", 0, false
	}
	return op, v * mult, true
}
