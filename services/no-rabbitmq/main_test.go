package main

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

func TestConfigDefaultsAndErrors(t *testing.T) {
	t.Parallel()
	c, err := readConfig(config.FromMap(nil))
	if err != nil || c.HTTP.Addr != ":8082" || c.Postgres.Schema != "queue" {
		t.Fatalf("defaults: %+v, %v", c, err)
	}
	_, err = readConfig(config.FromMap(map[string]string{"ADDR": "8082", "DATABASE_MAX_CONNS": "0", "DATABASE_SCHEMA": "Bad-Name"}))
	for _, name := range []string{"ADDR:", "DATABASE_MAX_CONNS:", "DATABASE_SCHEMA:"} {
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("error does not name %s: %v", name, err)
		}
	}
}

func TestConfigOldNamesStillWork(t *testing.T) {
	t.Parallel()
	r := config.FromMap(map[string]string{"LISTEN_DATABASE_URL": "postgres://direct:5432/wpe", "BACKEND_TIMEOUT": "3s"})
	c, err := readConfig(r)
	if err != nil || c.ListenURL != "postgres://direct:5432/wpe" || c.BackendTimeout != 3*time.Second {
		t.Fatalf("ListenURL %q, BackendTimeout %v, err %v: want the old name's URL and 3s", c.ListenURL, c.BackendTimeout, err)
	}
	d := r.Deprecations()
	if len(d) != 1 || d[0].Old != "LISTEN_DATABASE_URL" || d[0].New != "DATABASE_LISTEN_URL" {
		t.Errorf("Deprecations = %v, want one for LISTEN_DATABASE_URL", d)
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
