package main

import (
	"context"
	"maps"
	"testing"
	"time"

	logc "github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/log"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// target runs no-kafka instances on one schema and one slot for the
// conformance suite and the service's own tests.
type target struct {
	env  map[string]string
	app  *app
	url  string
	halt func() // stops the running instance; nil when none runs
}

// newTarget starts an instance on a fresh schema and slot; extra
// overrides the environment. The slot is dropped when the test ends.
func newTarget(t testing.TB, extra map[string]string) *target {
	t.Helper()
	url := kittest.PostgresURL(t)
	schema := kittest.Schema(t, url)
	slot := kittest.UniqueName(t, "s")
	env := map[string]string{
		"DATABASE_URL": url, "DATABASE_SCHEMA": schema, "SLOT_NAME": slot,
		// Long: the suite's crash test relies on nothing being confirmed
		// before it crashes (keepalive requests still get answers).
		"STANDBY_STATUS_INTERVAL": "1h",
		"LOG_LEVEL":               "warn",
	}
	maps.Copy(env, extra)
	tg := &target{env: env}
	t.Cleanup(func() { dropSlot(t, url, slot) })
	tg.start(t)
	return tg
}

func dropSlot(t testing.TB, url, slot string) {
	pool := kittest.Pool(t, url, "")
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := pool.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1`, slot)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("drop slot %s: %v", slot, err)
			return
		}
		time.Sleep(200 * time.Millisecond) // the walsender is still exiting
	}
}

func (tg *target) start(t testing.TB) {
	t.Helper()
	cfg := kittest.ReadConfig(t, readConfig, tg.env)
	a, err := assemble(kittest.Context(t, time.Minute), cfg, kittest.Logger(cfg))
	if err != nil {
		t.Fatal(err)
	}
	tg.app = a
	tg.url, tg.halt = kittest.Start(t, a.svc)
	// Streaming before the test writes: /readyz and the tests expect it.
	kittest.Eventually(t, 30*time.Second, "the consumer to start streaming", a.consumer.running.Load)
}

func (tg *target) stop(t testing.TB, crash bool) {
	t.Helper()
	if tg.halt == nil {
		return
	}
	if crash {
		tg.app.consumer.Abort()
	}
	tg.halt()
	tg.halt = nil
}

func (tg *target) URL() string { return tg.url }

func (tg *target) Restart(t testing.TB) {
	t.Helper()
	tg.stop(t, false)
	tg.start(t)
}

func (tg *target) Crash(t testing.TB) {
	t.Helper()
	tg.stop(t, true)
	tg.start(t)
}

func TestConformance(t *testing.T) {
	t.Parallel()
	logc.Run(t, func(t testing.TB) logc.Target { return newTarget(t, nil) })
}
