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
	if err != nil || c.HTTP.Addr != ":8085" || c.MongoURL != kittest.DefaultMongoURL || c.HTTP.BodyLimit != 4<<20 {
		t.Fatalf("defaults: %+v, %v", c, err)
	}
	_, err = readConfig(config.FromMap(map[string]string{"MONGO_URL": "postgres://x", "MONGO_MAX_POOL_SIZE": "0"}))
	for _, name := range []string{"MONGO_URL:", "MONGO_MAX_POOL_SIZE:"} {
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("error does not name %s: %v", name, err)
		}
	}
}

// TestStartsAndServesSharedEndpoints runs against MONGO_URL: real MongoDB
// under compose, FerretDB on the native stack.
func TestStartsAndServesSharedEndpoints(t *testing.T) {
	t.Parallel()
	cfg, err := readConfig(config.FromMap(map[string]string{
		"ADDR": "127.0.0.1:0", "MONGO_URL": kittest.Server(t, "MONGO_URL", kittest.DefaultMongoURL),
		"MONGO_DATABASE": kittest.UniqueName(t, "t"),
	}))
	if err != nil {
		t.Fatal(err)
	}
	svc, err := build(kittest.Context(t, 30*time.Second), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	kittest.CheckShared(t, kittest.Serve(t, svc), info.Service, info.Pair, info.Backend)
}
