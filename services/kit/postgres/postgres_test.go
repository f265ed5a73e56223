package postgres_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config/configtest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pglisten"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/postgres"
)

func TestReadConfig(t *testing.T) {
	t.Parallel()
	read := configtest.Part(func(r *config.Reader) postgres.Config { return postgres.ReadConfig(r, "queue") })
	if c := configtest.Defaults(t, read); c.URL != postgres.DefaultURL || c.Schema != "queue" || c.MaxConns != 16 {
		t.Fatalf("defaults: %+v", c)
	}
	configtest.NamesBadVariables(t, read, map[string]string{"DATABASE_URL": "mysql://x", "DATABASE_SCHEMA": "a;drop", "DATABASE_CONNECT_TIMEOUT": "-1s"},
		"DATABASE_URL", "DATABASE_SCHEMA", "DATABASE_CONNECT_TIMEOUT")
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

// TestPoolsReserveAndClose opens a service's pools on a real server: the
// reserved pools have their own size, Close closes every pool, and a
// reserve that fails closes the pools opened before it.
func TestPoolsReserveAndClose(t *testing.T) {
	t.Parallel()
	url := kittest.PostgresURL(t)
	schema := kittest.Schema(t, url)
	ctx := kittest.Context(t, time.Minute)
	c := postgres.Config{URL: url, Schema: schema, MaxConns: 3, ConnectTimeout: 5 * time.Second}
	fsys := fstest.MapFS{"0001_things.sql": {Data: []byte("-- +goose Up\nCREATE TABLE things (id int);\n-- +goose Down\nDROP TABLE things;\n")}}
	pools, err := postgres.OpenPools(ctx, c, fsys, nil)
	if err != nil {
		t.Fatal(err)
	}
	w, err := pools.Reserve(ctx, "workers", 2)
	if err != nil {
		t.Fatal(err)
	}
	if got := w.Config().MaxConns; got != 2 {
		t.Errorf("reserved pool of %d connections, want 2", got)
	}
	if got := pools.Main.Config().MaxConns; got != 3 {
		t.Errorf("main pool of %d connections, want 3", got)
	}
	if n, err := pools.ReserveNotify(ctx, pglisten.NotifyConfig{Mode: pglisten.ModeCommit}); n != nil || err != nil {
		t.Errorf("ReserveNotify in commit mode = %v, %v; want nil, nil", n, err)
	}
	n, err := pools.ReserveNotify(ctx, pglisten.NotifyConfig{Mode: pglisten.ModeDebounced})
	if err != nil {
		t.Fatal(err)
	}
	if got := n.Config().MaxConns; got != 1 {
		t.Errorf("debounced notify pool of %d connections, want 1", got)
	}
	pools.Close()
	for name, p := range map[string]interface{ Ping(context.Context) error }{"main": pools.Main, "reserved": w, "notify": n} {
		if err := p.Ping(ctx); err == nil {
			t.Errorf("the %s pool answers after Close", name)
		}
	}

	pools, err = postgres.OpenPools(ctx, c, fsys, nil)
	if err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := pools.Reserve(cancelled, "notifier", 1); err == nil || !strings.Contains(err.Error(), "notifier") {
		t.Fatalf("Reserve on a cancelled context = %v, want an error naming the pool", err)
	}
	if err := pools.Main.Ping(ctx); err == nil {
		t.Error("the main pool answers after a failed Reserve")
	}
}
