package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config/configtest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/documents/conformance"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service/servicetest"
)

func TestConfigDefaultsAndErrors(t *testing.T) {
	t.Parallel()
	configtest.PostgresDefaults(t, readConfig, "127.0.0.1:8086", "documents", func(c Config) (string, string) { return c.HTTP.Addr, c.Postgres.Schema })
}

func TestConfigOldTimeoutNameStillWorks(t *testing.T) {
	t.Parallel()
	configtest.RenamedDuration(t, readConfig, "DATABASE_TIMEOUT", "BACKEND_TIMEOUT", func(c Config) time.Duration { return c.BackendTimeout })
}

func TestStartsMigratesAndServesSharedEndpoints(t *testing.T) {
	t.Parallel()
	servicetest.CheckShared(t, build, schemaConfig(t), info)
}

// schemaConfig is the service's Config on a schema of the test's own.
func schemaConfig(t testing.TB) Config {
	t.Helper()
	url := kittest.PostgresURL(t)
	// A page bound below a third of BODY_LIMIT, for the suite's users
	// larger than a page.
	return kittest.ReadConfig(t, readConfig, map[string]string{"DATABASE_URL": url, "DATABASE_SCHEMA": kittest.Schema(t, url), "SEARCH_MAX_BYTES": "1MiB"})
}

// TestConformance runs the documents pair's one suite against this
// service, on a schema of its own.
func TestConformance(t *testing.T) {
	t.Parallel()
	conformance.Run(t, conformance.Features{NestedArrays: true, ReportAverage: true, ChangeStreams: true}, func(t testing.TB) conformance.Target {
		cfg := schemaConfig(t)
		return conformance.StartServiceTarget(t, build, cfg, cfg.HTTP.BodyLimit, cfg.SearchMaxBytes)
	})
}

// TestMapErrDataAndSizeErrors: what Postgres refuses as a value is a 400
// (the backstop behind the shared validation), a jsonb past its size limit
// a 422 as on the MongoDB side; neither is a 500. The errors are built
// here: producing a 255 MiB jsonb in a test is not cheap.
func TestMapErrDataAndSizeErrors(t *testing.T) {
	t.Parallel()
	for code, want := range map[string]int{"22P05": 400, "22003": 400, "54000": 422} {
		var he *httpapi.Error
		got := mapErr(fmt.Errorf("update: %w", &pgconn.PgError{Code: code, Message: "refused"}), "id")
		if !errors.As(got, &he) || he.Status != want {
			t.Errorf("SQLSTATE %s: %v, want %d", code, got, want)
		}
	}
}

// TestToastCompression: TOAST_COMPRESSION reaches the server, so a large
// profile written through the service is stored compressed with it; a
// value outside pglz and lz4 is refused by name.
func TestToastCompression(t *testing.T) {
	t.Parallel()
	configtest.NamesBadVariables(t, readConfig, map[string]string{"TOAST_COMPRESSION": "zstd"}, "TOAST_COMPRESSION")
	for _, method := range []string{"pglz", "lz4"} {
		t.Run(method, func(t *testing.T) {
			t.Parallel()
			cfg := schemaConfig(t)
			if !toastMethodBuiltIn(t, cfg.Postgres.URL, method) {
				t.Skipf("this PostgreSQL is built without %s (default_toast_compression does not accept it; PostgreSQL 18.4 from npm, in the cluster profile, is one)", method)
			}
			cfg.ToastCompression = method
			cfg.Postgres.Params = map[string]string{"default_toast_compression": method}
			r := servicetest.Start(t, build, cfg)
			// Compressible text well over the ~2 kB TOAST threshold.
			profile := map[string]any{"bio": strings.Repeat("where postgres ends ", 5000)}
			var u struct{ ID string }
			if status, b := kittest.Do(t, "POST", r.URL()+"/users", map[string]any{"email": method + "@toast.test", "name": "t", "plan": "free", "profile": profile}, &u); status != 201 {
				t.Fatalf("create: %d %s", status, b)
			}
			var got string
			db := kittest.Pool(t, cfg.Postgres.URL, cfg.Postgres.Schema)
			if err := db.QueryRow(kittest.Context(t, 10*time.Second), "SELECT pg_column_compression(profile) FROM users WHERE id = $1", u.ID).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != method {
				t.Errorf("profile stored with %q, want %q", got, method)
			}
		})
	}
}

// toastMethodBuiltIn reports whether the server at url accepts method as
// default_toast_compression (lz4 needs a server built --with-lz4).
func toastMethodBuiltIn(t testing.TB, url, method string) bool {
	t.Helper()
	var ok bool
	db := kittest.Pool(t, url, "")
	if err := db.QueryRow(kittest.Context(t, 10*time.Second),
		"SELECT $1 = ANY(enumvals) FROM pg_settings WHERE name = 'default_toast_compression'", method).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok
}

// TestSearchCanWalkThePrimaryKey: the search's keyset order is the primary
// key's, so with sorting ruled out the planner answers it by walking
// users_pkey. Ordered by the output column id::text (a bare "ORDER BY id"
// under "SELECT id::text"), a sort was unavoidable.
func TestSearchCanWalkThePrimaryKey(t *testing.T) {
	t.Parallel()
	cfg := schemaConfig(t)
	servicetest.Start(t, build, cfg) // migrates the schema
	db := kittest.Pool(t, cfg.Postgres.URL, cfg.Postgres.Schema)
	ctx := kittest.Context(t, 10*time.Second)
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, "SET LOCAL enable_sort = off"); err != nil {
		t.Fatal(err)
	}
	rows, err := tx.Query(ctx, "EXPLAIN "+searchSQL, `{"plan":"pro"}`, "00000000-0000-0000-0000-000000000000", 10)
	if err != nil {
		t.Fatal(err)
	}
	var plan []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, line)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	text := strings.Join(plan, "\n")
	if strings.Contains(text, "Sort") || !strings.Contains(text, "users_pkey") {
		t.Fatalf("search plan with enable_sort off:\n%s\nwant a walk of users_pkey and no sort", text)
	}
}
