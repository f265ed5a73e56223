package main

import (
	"bytes"
	"log/slog"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service"
)

// TestSecondInstanceWaitsAsStandby starts a second instance on the slot
// an active one streams (same schema, same SLOT_NAME): it says once that
// it waits as a standby, keeps retrying without saying it again, and its
// /readyz is a 503 saying so. When the active instance stops, it takes
// over: it streams the slot and is ready.
func TestSecondInstanceWaitsAsStandby(t *testing.T) {
	t.Parallel()
	active := newTarget(t, nil)
	env := maps.Clone(active.Env)
	env["LOG_LEVEL"] = "info"
	cfg := kittest.ReadConfig(t, readConfig, env)
	var logs kittest.LogBuffer
	svc, cons, err := assemble(kittest.Context(t, time.Minute), cfg, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	base := kittest.Serve(t, svc)

	var msg string
	kittest.Eventually(t, 30*time.Second, "the second instance's /readyz to say it is a standby", func() bool {
		status, m := kittest.GetJSON(t, base+"/readyz")
		msg, _ = m["error"].(string)
		return status == http.StatusServiceUnavailable && strings.Contains(msg, "standby: slot "+cfg.Slot+" is active in another process")
	})
	// Let it retry a few times (its backoff starts at 50ms).
	time.Sleep(2 * time.Second)
	if n := strings.Count(logs.String(), "waiting as a standby"); n != 1 {
		t.Errorf("the standby said it waits %d times, want once:\n%s", n, logs.String())
	}
	if n := strings.Count(logs.String(), "replication stream ended"); n != 0 {
		t.Errorf("the standby logged %d stream errors, want none:\n%s", n, logs.String())
	}

	active.Stop()
	kittest.Eventually(t, 60*time.Second, "the standby to take over the slot", cons.running.Load)
	if status, m := kittest.GetJSON(t, base+"/readyz"); status != http.StatusOK {
		t.Errorf("/readyz after the takeover: %d %v", status, m)
	}
	if !strings.Contains(logs.String(), "this instance takes over") {
		t.Errorf("the takeover was not logged:\n%s", logs.String())
	}
}

// TestBusyPortCreatesNothing starts the service's start path (Assemble, as
// main does) on a port that is already taken: it must fail naming ADDR,
// having created neither its schema nor its replication slot.
func TestBusyPortCreatesNothing(t *testing.T) {
	t.Parallel()
	busy := kittest.BusyAddr(t)
	url := kittest.PostgresURL(t)
	schema := kittest.UniqueName(t, "busy")
	slot := kittest.UniqueName(t, "s")
	r := config.FromMap(map[string]string{"ADDR": busy, "DATABASE_URL": url, "DATABASE_SCHEMA": schema, "SLOT_NAME": slot})
	_, err := service.Assemble(kittest.Context(t, time.Minute), service.Process{Vars: r, Stderr: &bytes.Buffer{}}, readConfig, build)
	if err == nil || !strings.Contains(err.Error(), "(ADDR)") {
		t.Fatalf("start on the busy port %s: %v, want an error naming ADDR", busy, err)
	}
	conn := kittest.Conn(t, url)
	var schemas, slots int
	ctx := kittest.Context(t, 10*time.Second)
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_namespace WHERE nspname = $1`, schema).Scan(&schemas); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&slots); err != nil {
		t.Fatal(err)
	}
	if schemas != 0 || slots != 0 {
		t.Errorf("a start that failed on ADDR created %d schemas %s and %d slots %s, want none", schemas, schema, slots, slot)
		t.Cleanup(func() { dropSlot(t, url, slot) })
	}
}
