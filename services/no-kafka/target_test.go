package main

import (
	"context"
	"log/slog"
	"maps"
	"os"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config"
	logc "github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/log"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// target runs no-kafka instances on one schema and one slot for the
// conformance suite and the service's own tests.
type target struct {
	env    map[string]string
	app    *app
	url    string
	cancel context.CancelFunc
	done   chan error
}

// newTarget starts an instance on a fresh schema and slot; extra
// overrides the environment. The slot is dropped when the test ends.
func newTarget(t testing.TB, extra map[string]string) *target {
	t.Helper()
	url := kittest.PostgresURL(t)
	schema := kittest.Schema(t, url)
	slot := kittest.UniqueName(t, "s")
	env := map[string]string{
		"ADDR": "127.0.0.1:0", "DATABASE_URL": url, "DATABASE_SCHEMA": schema, "SLOT_NAME": slot,
		// Long: the suite's crash test relies on nothing being confirmed
		// before it crashes (keepalive requests still get answers).
		"STANDBY_STATUS_INTERVAL": "1h",
		"LOG_LEVEL":               "warn",
	}
	maps.Copy(env, extra)
	tg := &target{env: env}
	t.Cleanup(func() { dropSlot(t, url, slot) })
	tg.start(t)
	t.Cleanup(func() { tg.stop(t, false) })
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
	cfg, err := readConfig(config.FromMap(tg.env))
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	if testing.Verbose() {
		logger = cfg.NewLogger(os.Stderr)
	}
	a, err := assemble(kittest.Context(t, time.Minute), cfg, logger)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.svc.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	tg.app, tg.cancel, tg.done = a, cancel, make(chan error, 1)
	go func() { tg.done <- a.svc.Run(ctx) }()
	tg.url = "http://" + a.svc.Addr().String()
	// Streaming before the test writes: /readyz and the tests expect it.
	deadline := time.Now().Add(30 * time.Second)
	for !a.consumer.running.Load() {
		if time.Now().After(deadline) {
			t.Fatal("the consumer did not start streaming within 30s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (tg *target) stop(t testing.TB, crash bool) {
	t.Helper()
	if tg.cancel == nil {
		return
	}
	if crash {
		tg.app.consumer.Abort()
	}
	tg.cancel()
	tg.cancel = nil
	select {
	case err := <-tg.done:
		if err != nil {
			t.Errorf("shutdown: %v", err)
		}
	case <-time.After(time.Minute):
		t.Errorf("no shutdown within a minute")
	}
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
