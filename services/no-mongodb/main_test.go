package main

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/documents/conformance"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service"
)

func TestConfigDefaultsAndErrors(t *testing.T) {
	t.Parallel()
	c, err := readConfig(config.FromMap(nil))
	if err != nil || c.HTTP.Addr != ":8086" || c.Postgres.Schema != "documents" {
		t.Fatalf("defaults: %+v, %v", c, err)
	}
	_, err = readConfig(config.FromMap(map[string]string{"ADDR": "8086", "DATABASE_MAX_CONNS": "0", "DATABASE_SCHEMA": "Bad-Name"}))
	for _, name := range []string{"ADDR:", "DATABASE_MAX_CONNS:", "DATABASE_SCHEMA:"} {
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("error does not name %s: %v", name, err)
		}
	}
}

func TestConfigOldTimeoutNameStillWorks(t *testing.T) {
	t.Parallel()
	r := config.FromMap(map[string]string{"DATABASE_TIMEOUT": "3s"})
	c, err := readConfig(r)
	if err != nil || c.BackendTimeout != 3*time.Second {
		t.Fatalf("BackendTimeout %v, err %v: want 3s from DATABASE_TIMEOUT", c.BackendTimeout, err)
	}
	if d := r.Deprecations(); len(d) != 1 || d[0].Old != "DATABASE_TIMEOUT" || d[0].New != "BACKEND_TIMEOUT" {
		t.Errorf("Deprecations = %v, want one for DATABASE_TIMEOUT", d)
	}
	_, err = readConfig(config.FromMap(map[string]string{"DATABASE_TIMEOUT": "0s"}))
	if err == nil || !strings.Contains(err.Error(), "BACKEND_TIMEOUT (set as DATABASE_TIMEOUT):") {
		t.Errorf("error does not name both names: %v", err)
	}
}

func TestStartsMigratesAndServesSharedEndpoints(t *testing.T) {
	t.Parallel()
	url := kittest.PostgresURL(t)
	cfg := kittest.ReadConfig(t, readConfig, map[string]string{
		"DATABASE_URL": url, "DATABASE_SCHEMA": kittest.Schema(t, url),
	})
	svc, err := build(kittest.Context(t, 30*time.Second), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	kittest.CheckShared(t, kittest.Serve(t, svc), info.Service, info.Pair, info.Backend)
}

// TestConformance runs the documents pair's one suite against this
// service, on a schema of its own.
func TestConformance(t *testing.T) {
	t.Parallel()
	conformance.Run(t, conformance.Features{NestedArrays: true}, func(t testing.TB) conformance.Target {
		url := kittest.PostgresURL(t)
		cfg := kittest.ReadConfig(t, readConfig, map[string]string{
			"DATABASE_URL": url, "DATABASE_SCHEMA": kittest.Schema(t, url),
		})
		return &target{cfg: cfg, Instance: kittest.StartInstance(t, func(t testing.TB) (struct{}, *service.Service) {
			svc, err := build(kittest.Context(t, 60*time.Second), cfg, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			return struct{}{}, svc
		})}
	})
}

// target implements conformance.Target on one schema.
type target struct {
	cfg Config
	*kittest.Instance[struct{}]
}

func (tg *target) BodyLimit() int64 { return tg.cfg.HTTP.BodyLimit }

// Crash is a Restart: a write is answered once Postgres committed it, so
// the process holds nothing a crash could lose.
func (tg *target) Crash(t testing.TB) { tg.Restart(t) }

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
