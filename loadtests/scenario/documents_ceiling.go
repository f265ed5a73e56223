package scenario

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/cost"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/documents"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// The documents pair's ceiling searches (after its points, on its data
// set): containment searches per second and profile writes per second.
const (
	DocumentsSearchCeiling = "documents.search.ceiling"
	DocumentsWriteCeiling  = "documents.write.ceiling"
)

// The documents ceilings' declared ladders: the search from 100/s and
// the write from 200/s, √2 apart, up to 13,000/s and 26,000/s. Postgres
// answers a GIN-indexed containment search or a one-row jsonb update in
// about a millisecond, so its ceiling lies in the thousands, reached in
// about ten steps; FerretDB scans every document per search (seconds at
// 2,000 users) and fails the first step, then halves four times
// (CeilingOptions), and its later searches try the lowest rate once
// (warmStart).
var (
	DocumentsSearchCeilingOpts = CeilingOptions{Start: 100, Factor: math.Sqrt2, Max: 13000, Bisect: CeilingBisect,
		Warmup: CeilingWarmup, Step: CeilingStep, Rounds: CeilingRounds, P99: CeilingP99}
	DocumentsWriteCeilingOpts = CeilingOptions{Start: 200, Factor: math.Sqrt2, Max: 26000, Bisect: CeilingBisect,
		Warmup: CeilingWarmup, Step: CeilingStep, Rounds: CeilingRounds, P99: CeilingP99}
)

// mongoDefaultDatabase is the mongodb service's MONGO_DATABASE default
// (services/mongodb's DefaultDatabase): its users when the driver did not
// give it a database of the run's own.
const mongoDefaultDatabase = "wpe"

// searchOp is the containment search's operation: POST /users/search
// with each query of s in turn (as the search point sends them), bounded
// by timeout. FerretDB keeps scanning after a client gives up, for at
// most the mongodb service's BACKEND_TIMEOUT (its driver sends it as
// maxTimeMS, which FerretDB honours): the next step waits for FerretDB
// to be quiet.
func (s SearchRewriteScenario) searchOp(timeout time.Duration) CeilingOp {
	queries := make([][]byte, len(s.SearchQueries))
	for i, q := range s.SearchQueries {
		queries[i] = []byte(`{"profile":` + q + `,"limit":50}`)
	}
	return CeilingOp{Scenario: DocumentsSearchCeiling, Latency: documents.StatSearch, Timeout: timeout,
		Requests: func(base string) func(uint64) driver.Request {
			return func(n uint64) driver.Request {
				return driver.Request{Method: http.MethodPost, URL: base + "/users/search", Body: queries[n%uint64(len(queries))]}
			}
		}}
}

// writeOp is the profile write's operation: PATCH /users/{id}/profile, a
// merge of one key ("score", which the data set's profiles hold) into the
// profile of each user of ids in turn. ids depend on the side (its
// users' ids), so Requests finds them by base.
func writeOp(ids map[string][]string) CeilingOp {
	return CeilingOp{Scenario: DocumentsWriteCeiling, Latency: documents.StatPatchProfile,
		Requests: func(base string) func(uint64) driver.Request {
			us := ids[base]
			return func(n uint64) driver.Request {
				if len(us) == 0 {
					return driver.Request{Method: http.MethodPatch, URL: base + "/users/none/profile", Body: []byte(`{}`)}
				}
				return driver.Request{Method: http.MethodPatch, URL: base + "/users/" + us[n%uint64(len(us))] + "/profile",
					Body: []byte(`{"score":` + strconv.FormatUint(n%100, 10) + `}`)}
			}
		}}
}

// usersWhy says what is wrong with a side's count of users against the
// data set's want ("" when it holds exactly want).
func usersWhy(got int64, err error, want int) string {
	switch {
	case err != nil:
		return fmt.Sprintf("users not counted: %v", err)
	case got != int64(want):
		return fmt.Sprintf("holds %d users, not the %d of the data set", got, want)
	}
	return ""
}

// countPostgresUsers counts the users table of the no-mongodb side's
// schema.
func (e *Env) countPostgresUsers(ctx context.Context) (int64, error) {
	schema := e.ServiceVar(pairs.NoMongoDB, "DATABASE_SCHEMA", DefaultSchemas[pairs.NoMongoDB])
	return e.countRows(ctx, pgx.Identifier{schema, "users"}, "")
}

// mongoUsers opens the mongodb side's users collection: in the run's own
// database (fresh), else the service's. close disconnects.
func (s SearchRewriteScenario) mongoUsers(e *Env, fresh map[string]map[string]string) (users *mongo.Collection, close func(), err error) {
	f := s.Fresh
	name := fresh[f.Service][f.Var]
	if name == "" {
		name = e.ServiceVar(f.Service, f.Var, mongoDefaultDatabase)
	}
	client, err := mongo.Connect(options.Client().ApplyURI(e.ServiceVar(f.Service, f.URLVar, f.DefaultURL)).SetTimeout(30 * time.Second))
	if err != nil {
		return nil, nil, err
	}
	return client.Database(name).Collection("users"), func() { _ = client.Disconnect(context.Background()) }, nil
}

// ceilings runs the search and write ceilings o asks for, after the
// points, on the data set: the users the rewrite points added are
// deleted first (seeded: each side's count of the data set's), so that
// each side holds o.Users users, and the services run with the search's
// in-flight bound. Every step proves its start: the users counted, the
// pair's own processes quiet (both services and FerretDB), a probe
// answered.
func (dr documentsRun) ceilings(ctx context.Context) error {
	s, e, run, o, us, seeded, fresh := dr.s, dr.e, dr.run, dr.o, dr.us, dr.seeded, dr.fresh
	var ops []CeilingOp
	var opts []CeilingOptions
	if o.SearchCeiling {
		ops, opts = append(ops, s.searchOp(o.SearchTimeout)), append(opts, o.SearchCeilingOpts)
	}
	ids := map[string][]string{}
	if o.WriteCeiling {
		ops, opts = append(ops, writeOp(ids)), append(opts, o.WriteCeilingOpts)
	}
	if len(ops) == 0 {
		return nil
	}
	for _, svc := range s.Pair.Sides() {
		us.trim(ctx, svc, seeded[svc])
		ids[e.URL(svc)] = us.seeds(svc, seeded[svc])
	}
	inFlight, _, err := e.ceilingInFlight(ctx, run, ceilingScenario{name: CeilingScenarioName(s.Pair.Name, ""), env: fresh}, s.Pair.Services(), opts[0])
	if err != nil {
		return err
	}
	users, closeUsers, err := s.mongoUsers(e, fresh)
	if err != nil {
		return err
	}
	defer closeUsers()
	sides := s.ceilingSides(ctx, e, o.Users, users, inFlight)
	for i, op := range ops {
		if err := e.runOpCeiling(ctx, run, op, sides, opts[i]); err != nil {
			return err
		}
	}
	return nil
}

// ceilingSides are the documents pair's sides for its ceiling searches:
// each counts its users against want, with CPU groups of its service,
// Postgres and FerretDB, and the pair's own processes (both services,
// FerretDB) to be quiet.
func (s SearchRewriteScenario) ceilingSides(ctx context.Context, e *Env, want int, users *mongo.Collection, inFlight map[string]*int) []ceilingSide {
	ferret := cost.FerretDB(e.stackDir())
	quiet := e.ownQuiet(s.Pair.Services(), ferret)
	a := e.documentsPostgresSide(ctx, s.Pair.A, want, quiet, ferret)
	b := ceilingSide{name: s.Pair.B.Name, base: e.URL(s.Pair.B.Name), costs: e.sideCosts(ctx, s.Pair.B, ferret), quiet: quiet,
		ready: func(ctx context.Context) string {
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			n, err := users.CountDocuments(cctx, bson.D{})
			return usersWhy(n, err, want)
		}}
	a.inFlight, b.inFlight = inFlight[a.name], inFlight[b.name]
	return []ceilingSide{a, b}
}

// documentsPostgresSide is the Postgres side svc of the documents
// ceilings: its users table counted against want (countPostgresUsers),
// CPU groups of its service, Postgres and specialists, quiet the groups
// given.
func (e *Env) documentsPostgresSide(ctx context.Context, svc Service, want int, quiet cost.Set, specialists ...cost.Group) ceilingSide {
	return ceilingSide{name: svc.Name, base: e.URL(svc.Name), costs: e.sideCosts(ctx, svc, specialists...), quiet: quiet,
		ready: func(ctx context.Context) string { n, err := e.countPostgresUsers(ctx); return usersWhy(n, err, want) }}
}

// trim deletes the users created on svc after its first n (the data
// set's), through the API, and forgets them.
func (us *createdUsers) trim(ctx context.Context, svc string, n int) {
	us.mu.Lock()
	ids := us.created[svc]
	if n >= len(ids) {
		us.mu.Unlock()
		return
	}
	extra := append([]string(nil), ids[n:]...)
	us.created[svc] = ids[:n]
	us.mu.Unlock()
	us.e.logf("deleting the %d users the rewrite points added on %s", len(extra), svc)
	_ = parallel(ctx, len(extra), 8, func(i int) error {
		code, _, err := driver.Do(ctx, http.MethodDelete, us.e.URL(svc)+"/users/"+extra[i], nil)
		if err == nil && code >= 300 && code != http.StatusNotFound {
			err = fmt.Errorf("DELETE answered %d", code)
		}
		if err != nil {
			// Still there: deleted at the run's end, and counted by
			// the ceiling steps' precondition.
			us.mu.Lock()
			us.created[svc] = append(us.created[svc], extra[i])
			us.mu.Unlock()
		}
		return nil
	})
}

// seeds are the ids of the first n users created on svc.
func (us *createdUsers) seeds(svc string, n int) []string {
	us.mu.Lock()
	defer us.mu.Unlock()
	return append([]string(nil), us.created[svc][:min(n, len(us.created[svc]))]...)
}
