package main

import (
	"errors"
	"fmt"
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
	configtest.PostgresDefaults(t, readConfig, ":8086", "documents", func(c Config) (string, string) { return c.HTTP.Addr, c.Postgres.Schema })
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
	conformance.Run(t, conformance.Features{NestedArrays: true}, func(t testing.TB) conformance.Target {
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
