package scenario

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// TestScaleNames: a size's label and ceiling name read back to the same
// operation and size; other names do not; the sizes must grow.
func TestScaleNames(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		op    string
		n     int
		label string
	}{{"search", 100_000, "100k"}, {"write", 1_000_000, "1m"}, {"search", 2500, "2500"}, {"write", 1_500_000, "1500k"}} {
		if got := ScaleLabel(c.n); got != c.label {
			t.Errorf("ScaleLabel(%d) = %q, want %q", c.n, got, c.label)
		}
		name := DocumentsScaleCeiling(c.op, c.n)
		if want := "documents." + c.op + "." + c.label + ".ceiling"; string(name) != want {
			t.Errorf("DocumentsScaleCeiling = %q, want %q", name, want)
		}
		if op, n, ok := ParseDocumentsScaleCeiling(string(name)); !ok || op != c.op || n != c.n {
			t.Errorf("ParseDocumentsScaleCeiling(%q) = %q %d %v", name, op, n, ok)
		}
	}
	for _, name := range []string{DocumentsSearchCeiling, DocumentsWriteCeiling, "queue.logged.ceiling", "documents.read.100k.ceiling", "documents.search.xk.ceiling", "documents.search.100k"} {
		if _, _, ok := ParseDocumentsScaleCeiling(name); ok {
			t.Errorf("%q read as a scale ceiling", name)
		}
	}
	if err := ValidateScaleUsers(2000, []int{100_000, 1_000_000}); err != nil {
		t.Error(err)
	}
	for _, bad := range [][]int{{2000}, {100_000, 100_000}, {1_000_000, 100_000}, {20_000_000}} {
		if err := ValidateScaleUsers(2000, bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

// TestDocumentsScaleLoadOnTheStack grows a data set of 30 users created
// through the no-mongodb service's API to 1,500 on its Postgres schema,
// and a FerretDB collection with the mongodb service's unique email
// index from empty to the same 1,500: both get the same generated users, the
// indexes come back (the GIN index, the unique index, the change-feed
// trigger enabled), the figures are recorded, the loaded users answer
// the service's search, and remove takes exactly the loaded users away;
// a side whose load failed is not grown again, and remove restores the
// indexes a load drops.
func TestDocumentsScaleLoadOnTheStack(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds no-mongodb and runs it on the stack's Postgres and FerretDB")
	}
	ctx := kittest.Context(t, 5*time.Minute)
	e := startNoMongoDB(t, ctx)
	const seeded, n = 30, 1500
	createTestUsers(t, ctx, e, seeded, "scale.test")
	pg, err := e.connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pg.Close(context.Background()) })
	users := scratchUsers(t, ctx)
	schema := e.ServiceVar(pairs.NoMongoDB, "DATABASE_SCHEMA", "")
	l := &scaleLoader{pg: pg, table: pgx.Identifier{schema, "users"}, users: users, seed: 3, tag: fmt.Sprintf("t%d", time.Now().UnixNano()%1e9),
		pgSide: pairs.NoMongoDB, have: map[string]int{pairs.NoMongoDB: seeded}}
	for _, side := range []struct {
		svc      string
		postgres bool
	}{{pairs.NoMongoDB, true}, {pairs.MongoDB, false}} {
		m, err := l.grow(ctx, side.postgres, side.svc, n)
		if err != nil {
			t.Fatalf("%s: %v", side.svc, err)
		}
		t.Logf("%s: %v", side.svc, m)
		if m[ScaleLoadS] <= 0 || m[ScaleIndexBuildS] <= 0 {
			t.Errorf("%s: figures %v", side.svc, m)
		}
		if side.postgres && (m[ScaleSearchIndexMB] <= 0 || m[ScaleIndexesMB] <= m[ScaleSearchIndexMB] || m[ScaleTableMB] <= 0) {
			t.Errorf("%s: sizes %v", side.svc, m)
		}
	}
	if got, err := e.countRows(ctx, l.table, ""); err != nil || got != n {
		t.Fatalf("Postgres holds %d users (%v), want %d", got, err, n)
	}
	if got, err := users.CountDocuments(ctx, bson.D{}); err != nil || got != n {
		t.Fatalf("FerretDB holds %d users (%v), want %d", got, err, n)
	}
	// The scale ceilings' precondition reads the count from metadata.
	if got, err := users.EstimatedDocumentCount(ctx); err != nil || got != n {
		t.Errorf("FerretDB's estimated count %d (%v), want %d", got, err, n)
	}
	var gin, enabled string
	if err := pg.QueryRow(ctx, `SELECT coalesce((SELECT indexdef FROM pg_indexes WHERE schemaname = $1 AND indexname = $2), ''),
		(SELECT tgenabled::text FROM pg_trigger WHERE tgname = 'users_changed' AND tgrelid = $3::regclass)`,
		schema, searchIndex, l.table.Sanitize()).Scan(&gin, &enabled); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(gin, "jsonb_path_ops") || enabled != "O" {
		t.Errorf("after the load: GIN index %q, change-feed trigger enabled %q (want O)", gin, enabled)
	}
	specs, err := secondaryIndexes(ctx, users)
	if err != nil || len(specs) != 1 || specs[0].name != "users_email_unique" || !specs[0].unique {
		t.Errorf("FerretDB's indexes after the load: %+v, %v", specs, err)
	}
	// The same user on both sides: its email and profile.
	var email string
	var profile []byte
	if err := pg.QueryRow(ctx, "SELECT email, profile::text FROM "+l.table.Sanitize()+" WHERE email LIKE 'scale700-%'").Scan(&email, &profile); err != nil {
		t.Fatal(err)
	}
	var doc bson.M
	if err := users.FindOne(ctx, bson.D{{Key: "email", Value: email}}).Decode(&doc); err != nil {
		t.Fatalf("user %s on FerretDB: %v", email, err)
	}
	var pgProfile, mongoProfile map[string]any
	mj, _ := bson.MarshalExtJSON(doc["profile"], false, false)
	if json.Unmarshal(profile, &pgProfile) != nil || json.Unmarshal(mj, &mongoProfile) != nil || !reflect.DeepEqual(pgProfile, mongoProfile) {
		t.Errorf("user %s differs: Postgres %s, FerretDB %s", email, profile, mj)
	}
	// The loaded users answer the service's search.
	code, body, err := driver.Do(ctx, http.MethodPost, e.URL(pairs.NoMongoDB)+"/users/search", []byte(`{"profile":{"tags":["go"]},"limit":500}`))
	if got := strings.Count(string(body), "@load.test"); err != nil || code != http.StatusOK || got < 50 {
		t.Errorf("search: %d %v, %d loaded users in the answer", code, err, got)
	}
	l.remove(ctx, e)
	if got, err := e.countRows(ctx, l.table, ""); err != nil || got != seeded {
		t.Errorf("after remove, Postgres holds %d users (%v), want the %d seeded", got, err, seeded)
	}
	if got, err := users.CountDocuments(ctx, bson.D{}); err != nil || got != 0 {
		t.Errorf("after remove, FerretDB holds %d users (%v)", got, err)
	}
	if s := scansEveryDocument(ctx, users); s != "FerretDB" {
		t.Errorf("FerretDB not named as scanning every document: %q", s)
	}
	// A load that fails part way: the side is not grown again, and
	// remove restores the indexes a load drops.
	ended, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := l.grow(ended, false, pairs.MongoDB, 2*n); err == nil {
		t.Fatal("a load with an ended context succeeded")
	}
	if _, err := l.grow(ctx, false, pairs.MongoDB, 2*n); err == nil || !strings.Contains(err.Error(), "failed part way") {
		t.Errorf("a side whose load failed was grown again: %v", err)
	}
	if err := users.Indexes().DropOne(ctx, "users_email_unique"); err != nil {
		t.Fatal(err)
	}
	if _, err := pg.Exec(ctx, "DROP INDEX "+pgx.Identifier{schema, searchIndex}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	l.remove(ctx, e)
	if specs, err := secondaryIndexes(ctx, users); err != nil || len(specs) != 1 || !specs[0].unique {
		t.Errorf("FerretDB's indexes after remove: %+v, %v", specs, err)
	}
	var restored bool
	if err := pg.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_indexes WHERE schemaname = $1 AND indexname = $2)", schema, searchIndex).Scan(&restored); err != nil || !restored {
		t.Errorf("the GIN index after remove: %v, %v", restored, err)
	}
}

// scratchUsers is a users collection with the mongodb service's unique
// email index, in a database of the test's own on the stack's MongoDB
// side (FerretDB), dropped when the test ends.
func scratchUsers(t testing.TB, ctx context.Context) *mongo.Collection {
	t.Helper()
	client, err := mongo.Connect(options.Client().ApplyURI(kittest.Server(t, "MONGO_URL", kittest.DefaultMongoURL)).SetTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	db := client.Database(strings.ReplaceAll(kittest.UniqueName(t, "scale"), "-", "_"))
	t.Cleanup(func() {
		_ = db.Drop(context.Background())
		_ = client.Disconnect(context.Background())
	})
	users := db.Collection("users")
	if _, err := users.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "email", Value: 1}},
		Options: options.Index().SetName("users_email_unique").SetUnique(true)}); err != nil {
		t.Fatal(err)
	}
	return users
}

// TestWhileLockedRetriesOnlyALock: an operation refused by FerretDB's
// locked database is tried again until it succeeds; any other error ends
// it at once; a lock that outlasts ctx fails saying so.
func TestWhileLockedRetriesOnlyALock(t *testing.T) {
	t.Parallel()
	locked := errors.New("(InternalError) [registry.go:554 metadata.(*Registry).indexesDrop] database is locked (517)")
	tries := 0
	err := whileLocked(t.Context(), func(context.Context) error {
		if tries++; tries < 2 {
			return locked
		}
		return nil
	})
	if err != nil || tries != 2 {
		t.Errorf("a lock then success: %v after %d tries, want nil after 2", err, tries)
	}
	tries = 0
	other := errors.New("duplicate key")
	if err := whileLocked(t.Context(), func(context.Context) error { tries++; return other }); !errors.Is(err, other) || tries != 1 {
		t.Errorf("another error: %v after %d tries, want it after 1", err, tries)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if err := whileLocked(ctx, func(context.Context) error { return locked }); !errors.Is(err, locked) || !strings.Contains(err.Error(), "still locked") {
		t.Errorf("a lock past ctx: %v, want it saying it was still locked", err)
	}
}
