package main

import (
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config/configtest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service/servicetest"
)

func TestConfigDefaultsAndErrors(t *testing.T) {
	t.Parallel()
	configtest.PostgresDefaults(t, readConfig, "127.0.0.1:8082", "queue", func(c Config) (string, string) { return c.HTTP.Addr, c.Postgres.Schema })
}

func TestConfigOldNamesStillWork(t *testing.T) {
	t.Parallel()
	c := configtest.Renamed(t, readConfig, map[string]string{"LISTEN_DATABASE_URL": "postgres://direct:5432/wpe", "BACKEND_TIMEOUT": "3s"},
		"LISTEN_DATABASE_URL", "DATABASE_LISTEN_URL")
	if c.ListenURL != "postgres://direct:5432/wpe" || c.BackendTimeout != 3*time.Second {
		t.Fatalf("ListenURL %q, BackendTimeout %v: want the old name's URL and 3s", c.ListenURL, c.BackendTimeout)
	}
}

func TestStartsMigratesAndServesSharedEndpoints(t *testing.T) {
	t.Parallel()
	url := kittest.PostgresURL(t)
	cfg := kittest.ReadConfig(t, readConfig, map[string]string{"DATABASE_URL": url, "DATABASE_SCHEMA": kittest.Schema(t, url)})
	servicetest.CheckShared(t, build, cfg, info)
}

// TestListenThroughPgBouncerFailsTheStart: the workers' wake-ups would
// never come through pgbouncer (enqueue-to-processed latency would become
// the fallback poll), so the start refuses it.
func TestListenThroughPgBouncerFailsTheStart(t *testing.T) {
	t.Parallel()
	sc := newSchema(t)
	servicetest.RefusesDeafListen(t, build, readConfig, map[string]string{
		"DATABASE_URL": sc.url, "DATABASE_SCHEMA": sc.name, "DATABASE_CONNECT_TIMEOUT": "3s"})
}

// TestConfigClaimLinger: CLAIM_LINGER defaults to the rabbitmq side's
// RECORD_LINGER, 0 turns it off, and a negative or too long wait is
// refused by name.
func TestConfigClaimLinger(t *testing.T) {
	t.Parallel()
	if c := configtest.Defaults(t, readConfig); c.ClaimLinger != time.Millisecond {
		t.Errorf("default CLAIM_LINGER %v, want 1ms", c.ClaimLinger)
	}
	if c := kittest.ReadConfig(t, readConfig, map[string]string{"CLAIM_LINGER": "0"}); c.ClaimLinger != 0 {
		t.Errorf("CLAIM_LINGER=0 read as %v", c.ClaimLinger)
	}
	configtest.NamesBadVariables(t, readConfig, map[string]string{"CLAIM_LINGER": "-1ms"}, "CLAIM_LINGER")
	configtest.NamesBadVariables(t, readConfig, map[string]string{"CLAIM_LINGER": "1s"}, "CLAIM_LINGER")
}

// TestConfigFanout: FANOUT is read into the shared worker settings, and an
// empty subscriber list, a duplicate subscriber or a malformed value
// fails the start naming the variable.
func TestConfigFanout(t *testing.T) {
	t.Parallel()
	configtest.ReadsBack(t, readConfig, configtest.Var[Config]{Name: "FANOUT", Good: "order.placed:email,warehouse", Get: func(c Config) string { return c.Worker.Fanout.String() }, Bad: []string{"order.placed:", "order.placed:email,email", "order.placed=email"}})
}
