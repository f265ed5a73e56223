package eventstore

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// TestCompareEngineIsAPostgresSide: no-kurrentdb run against another
// PostgreSQL version is a Postgres side of its own, with its own server.
func TestCompareEngineIsAPostgresSide(t *testing.T) {
	t.Parallel()
	name := CompareName("18")
	if name != "no-kurrentdb-pg18" || !IsCompareName(name) || IsCompareName(pairs.NoKurrentDB) || IsCompareName(compareNamePrefix) {
		t.Fatalf("CompareName(18) = %q", name)
	}
	es := defaultEngines("no-kurrentdb=http://a,"+name+"=http://b/", 8)
	if len(es) != 2 || es[1].Backend != "postgres" || es[1].URL != "http://b" {
		t.Fatalf("engines %+v", es)
	}
	o := Options{DatabaseURL: "postgres://stack", EngineDatabaseURLs: map[string]string{name: "postgres://private"}}
	if pgURL(o, es[0]) != "postgres://stack" || pgURL(o, es[1]) != "postgres://private" {
		t.Errorf("servers %q %q", pgURL(o, es[0]), pgURL(o, es[1]))
	}
}

// TestPostgresVersionsOnRealPostgres: a bench run records the server's
// version and settings, each Postgres side's own version, and labels the
// sides with their versions when there are two (both on the stack's
// server here).
func TestPostgresVersionsOnRealPostgres(t *testing.T) {
	ctx, dbURL := realPostgres(t)
	name := CompareName("15")
	engines := defaultEngines("no-kurrentdb=http://a,"+name+"=http://b,kafka-eventstore=http://c", 8)
	for _, e := range engines {
		e.Up = true
	}
	run := driver.NewRun("eventstore-test", nil, time.Now())
	postgresVersions(ctx, run, Options{DatabaseURL: dbURL, EngineDatabaseURLs: map[string]string{name: dbURL}}, engines)
	if run.Versions.Postgres == "" || len(run.Versions.PostgresSettings) == 0 {
		t.Errorf("versions %+v", run.Versions)
	}
	v := strings.Fields(run.Versions.Postgres)[0]
	if engines[0].ServerVersion != run.Versions.Postgres || engines[0].Label != "PostgreSQL "+v+" (the stack's)" || engines[1].Label != "PostgreSQL "+v+" (a private server)" {
		t.Errorf("postgres sides %+v %+v", *engines[0], *engines[1])
	}
	if engines[2].ServerVersion != "" || engines[2].Label != ReferenceLabel {
		t.Errorf("kafka side %+v", *engines[2])
	}
	// One Postgres side alone keeps its unlabelled rows.
	one := defaultEngines("no-kurrentdb=http://a", 8)
	one[0].Up = true
	postgresVersions(ctx, driver.NewRun("eventstore-test", nil, time.Now()), Options{DatabaseURL: dbURL}, one)
	if one[0].Label != "" || one[0].ServerVersion == "" {
		t.Errorf("alone %+v", *one[0])
	}
}

// TestCompareStoreIsFresh: a store created empty for the run says so,
// and the run's starting state is never a compared side's.
func TestCompareStoreIsFresh(t *testing.T) {
	t.Parallel()
	name := CompareName("18")
	engines := defaultEngines("no-kurrentdb=http://a,"+name+"=http://b", 8)
	for _, e := range engines {
		e.Why = "probe refused"
	}
	run := driver.NewRun("eventstore-test", nil, time.Now())
	o := Options{Schema: "eventstore", FreshEngines: []string{name}}
	recordStart(context.Background(), run, o, engines)
	st := run.Settings["store_state"].([]StoreState)
	if len(st) != 2 || st[0].Mode != StoreKept || st[1].Mode != StoreFresh {
		t.Errorf("store states %+v", st)
	}
	if run.StartState != nil {
		t.Errorf("start state %+v from sides that did not answer", run.StartState)
	}
	if testing.Short() {
		return
	}
	// A compared side that answers (its table missing here) is still not
	// the run's starting state.
	engines[1].Up = true
	run = driver.NewRun("eventstore-test", nil, time.Now())
	o.Schema, o.EngineDatabaseURLs = "es_compare_missing", map[string]string{name: envOr("DATABASE_URL", pairs.DefaultPostgresURL)}
	recordStart(context.Background(), run, o, engines[1:])
	if st := run.Settings["store_state"].([]StoreState); st[0].Store == "" || st[0].Error == "" || run.StartState != nil {
		t.Errorf("store state %+v, start state %+v", st[0], run.StartState)
	}
}
