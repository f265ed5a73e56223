package migrations_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/migrations"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/postgres"
)

// TestFoldersArePairs: every folder of migrations is a pair of the pair
// table, so Pairs (which reads the table) migrates every one of them.
func TestFoldersArePairs(t *testing.T) {
	t.Parallel()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, e := range entries {
		if sql, _ := filepath.Glob(filepath.Join(e.Name(), "*.sql")); e.IsDir() && len(sql) > 0 {
			dirs = append(dirs, e.Name())
		}
	}
	got := slices.Sorted(slices.Values(migrations.Pairs()))
	if !slices.Equal(got, dirs) {
		t.Errorf("Pairs() = %v, folders of migrations %v: a folder named after no pair of services/kit/pairs is never migrated", got, dirs)
	}
}

// TestFilesFollowTheRules checks every file without a database: numbered
// names, both goose sections, and re-runnable CREATEs.
func TestFilesFollowTheRules(t *testing.T) {
	t.Parallel()
	name := regexp.MustCompile(`^\d{4}_[a-z0-9_]+\.sql$`)
	create := regexp.MustCompile(`(?i)\bCREATE\s+(UNIQUE\s+)?(TABLE|INDEX|SCHEMA|FUNCTION|TYPE|SEQUENCE)\s+`)
	for _, pair := range migrations.Pairs() {
		fsys := migrations.MustFS(pair)
		entries, err := fs.ReadDir(fsys, ".")
		if err != nil || len(entries) == 0 {
			t.Fatalf("%s: no migrations (%v)", pair, err)
		}
		for _, e := range entries {
			if !name.MatchString(e.Name()) {
				t.Errorf("%s/%s: name must be NNNN_snake_case.sql", pair, e.Name())
			}
			b, _ := fs.ReadFile(fsys, e.Name())
			sql := string(b)
			if !strings.Contains(sql, "-- +goose Up") || !strings.Contains(sql, "-- +goose Down") {
				t.Errorf("%s/%s: needs both -- +goose Up and -- +goose Down", pair, e.Name())
			}
			for _, loc := range create.FindAllStringIndex(sql, -1) {
				rest := sql[loc[1]:]
				if !strings.HasPrefix(strings.ToUpper(rest), "IF NOT EXISTS") && !strings.Contains(sql[loc[0]:loc[1]], "FUNCTION") {
					t.Errorf("%s/%s: %q is not re-runnable: use IF NOT EXISTS", pair, e.Name(), strings.TrimSpace(sql[loc[0]:loc[1]]))
				}
			}
		}
	}
	if _, err := migrations.FS("nope"); err == nil {
		t.Error("FS accepted an unknown pair")
	}
}

// TestUpDownUp applies each pair's migrations in a fresh schema, applies
// them again (nothing to do), rolls everything back (the tables are gone)
// and applies them once more: reversible and idempotent on a real server.
func TestUpDownUp(t *testing.T) {
	t.Parallel()
	url := kittest.PostgresURL(t)
	for _, pair := range migrations.Pairs() {
		t.Run(pair, func(t *testing.T) {
			t.Parallel()
			ctx := kittest.Context(t, time.Minute)
			schema := kittest.Schema(t, url)
			pool := kittest.Pool(t, url, schema)
			fsys := migrations.MustFS(pair)
			tables := func() int {
				var n int
				if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = $1 AND tablename <> 'goose_db_version'`, schema).Scan(&n); err != nil {
					t.Fatal(err)
				}
				return n
			}
			for range 2 {
				if err := postgres.Migrate(ctx, pool, fsys, nil); err != nil {
					t.Fatalf("up: %v", err)
				}
			}
			if tables() == 0 {
				t.Fatal("up created no table")
			}
			if err := postgres.MigrateDown(ctx, pool, fsys); err != nil {
				t.Fatalf("down: %v", err)
			}
			if n := tables(); n != 0 {
				t.Fatalf("down left %d tables", n)
			}
			if err := postgres.Migrate(ctx, pool, fsys, nil); err != nil {
				t.Fatalf("up again: %v", err)
			}
			st, err := postgres.Status(context.Background(), pool, fsys)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range st {
				if s.AppliedAt.IsZero() {
					t.Errorf("%s pending after up", s.Source.Path)
				}
			}
		})
	}
}
