package main

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// TestListenThroughPgBouncerFailsTheStart: through pgbouncer in
// transaction mode LISTEN succeeds and then receives nothing, and live
// subscriptions would wait for the fallback poll, silently. The
// listener's probe must refuse the connection, and the start must fail
// naming the cause.
func TestListenThroughPgBouncerFailsTheStart(t *testing.T) {
	t.Parallel()
	url := kittest.PostgresURL(t)
	bouncer := kittest.Server(t, "PGBOUNCER_URL", kittest.DefaultPgBouncerURL)
	cfg := kittest.ReadConfig(t, readConfig, map[string]string{
		"DATABASE_URL": url, "DATABASE_SCHEMA": kittest.Schema(t, url), "DATABASE_LISTEN_URL": bouncer,
	})
	_, st, err := assemble(kittest.Context(t, time.Minute), cfg, slog.New(slog.DiscardHandler))
	if err == nil {
		_ = st.stopListener(kittest.Context(t, 10*time.Second))
		t.Fatal("started with a LISTEN connection through pgbouncer")
	}
	if !strings.Contains(err.Error(), "LISTEN receives no notifications") {
		t.Fatalf("start failed with %v, want the probe's refusal", err)
	}
	t.Logf("refused: %v", err)
}
