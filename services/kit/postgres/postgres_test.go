package postgres_test

import (
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/postgres"
)

func TestReadConfig(t *testing.T) {
	t.Parallel()
	r := config.FromMap(nil)
	c := postgres.ReadConfig(r, "queue")
	if r.Err() != nil || c.URL != postgres.DefaultURL || c.Schema != "queue" || c.MaxConns != 16 {
		t.Fatalf("defaults: %+v %v", c, r.Err())
	}
	r = config.FromMap(map[string]string{"DATABASE_URL": "mysql://x", "DATABASE_SCHEMA": "a;drop", "DATABASE_CONNECT_TIMEOUT": "-1s"})
	postgres.ReadConfig(r, "queue")
	for _, n := range []string{"DATABASE_URL:", "DATABASE_SCHEMA:", "DATABASE_CONNECT_TIMEOUT:"} {
		if r.Err() == nil || !strings.Contains(r.Err().Error(), n) {
			t.Errorf("error does not name %s: %v", n, r.Err())
		}
	}
}

// TestOpenUsesTheSchemaAndMigratesConcurrently opens several pools on one
// new schema at once, as instances starting together would, and migrates
// from each: the schema is created once, the migration applied once, and
// unqualified names resolve in the schema.
func TestOpenUsesTheSchemaAndMigratesConcurrently(t *testing.T) {
	t.Parallel()
	url := kittest.PostgresURL(t)
	schema := kittest.UniqueName(t, "t")
	ctx := kittest.Context(t, time.Minute)
	fsys := fstest.MapFS{"0001_things.sql": {Data: []byte(
		"-- +goose Up\nCREATE TABLE IF NOT EXISTS things (id int PRIMARY KEY);\nINSERT INTO things VALUES (1);\n-- +goose Down\nDROP TABLE IF EXISTS things;\n")}}
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() {
			pool, err := postgres.OpenMigrated(ctx, postgres.Config{URL: url, Schema: schema, MaxConns: 2, ConnectTimeout: 5 * time.Second}, fsys, nil)
			if err == nil {
				pool.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	admin := kittest.Pool(t, url, "")
	t.Cleanup(func() { _, _ = admin.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE") })
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	var rows int
	if err := admin.QueryRow(ctx, "SELECT count(*) FROM "+schema+".things").Scan(&rows); err != nil || rows != 1 {
		t.Fatalf("the migration ran %d times (%v), want once", rows, err)
	}
}

func TestOpenFailsClearlyWhenUnreachable(t *testing.T) {
	t.Parallel()
	_, err := postgres.Open(kittest.Context(t, 10*time.Second), postgres.Config{
		URL: "postgres://postgres@127.0.0.1:1/wpe?sslmode=disable", Schema: "x", ConnectTimeout: time.Second})
	if err == nil || !strings.Contains(err.Error(), "DATABASE_URL") {
		t.Fatalf("Open = %v, want an error naming DATABASE_URL", err)
	}
}
