package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/documents"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver"
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

func TestConfigOldTimeoutNameStillWorks(t *testing.T) {
	t.Parallel()
	r := config.FromMap(map[string]string{"MONGO_TIMEOUT": "3s"})
	c, err := readConfig(r)
	if err != nil || c.BackendTimeout != 3*time.Second {
		t.Fatalf("BackendTimeout %v, err %v: want 3s from MONGO_TIMEOUT", c.BackendTimeout, err)
	}
	if d := r.Deprecations(); len(d) != 1 || d[0].Old != "MONGO_TIMEOUT" || d[0].New != "BACKEND_TIMEOUT" {
		t.Errorf("Deprecations = %v, want one for MONGO_TIMEOUT", d)
	}
	_, err = readConfig(config.FromMap(map[string]string{"MONGO_TIMEOUT": "0s"}))
	if err == nil || !strings.Contains(err.Error(), "BACKEND_TIMEOUT (set as MONGO_TIMEOUT):") {
		t.Errorf("error does not name both names: %v", err)
	}
}

// TestStartsAndServesSharedEndpoints runs against MONGO_URL: real MongoDB
// under compose, FerretDB on the native stack.
func TestStartsAndServesSharedEndpoints(t *testing.T) {
	t.Parallel()
	cfg := kittest.ReadConfig(t, readConfig, map[string]string{
		"MONGO_URL":      kittest.Server(t, "MONGO_URL", kittest.DefaultMongoURL),
		"MONGO_DATABASE": kittest.UniqueName(t, "t"),
	})
	svc, err := build(kittest.Context(t, 30*time.Second), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	kittest.CheckShared(t, kittest.Serve(t, svc), info.Service, info.Pair, info.Backend)
}

// TestConformance runs the documents pair's one suite against this
// service, on a database of its own (dropped at the end): real MongoDB
// when MONGO_URL points at one, FerretDB on the native stack.
func TestConformance(t *testing.T) {
	t.Parallel()
	documents.Run(t, func(t *testing.T) documents.Target {
		url := kittest.Server(t, "MONGO_URL", kittest.DefaultMongoURL)
		db := kittest.UniqueName(t, "t")
		cfg := kittest.ReadConfig(t, readConfig, map[string]string{
			"MONGO_URL": url, "MONGO_DATABASE": db, "BACKEND_TIMEOUT": "60s",
		})
		dropDatabase(t, cfg)
		// Warnings (the index fallback) and errors go to the test's output.
		logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
		svc, err := build(kittest.Context(t, 60*time.Second), cfg, logger)
		if err != nil {
			t.Fatal(err)
		}
		base := kittest.Serve(t, svc)
		_, backend := kittest.GetJSON(t, base+"/backend")
		server, _ := backend["server"].(string)
		return documents.Target{BaseURL: base, BodyLimit: cfg.HTTP.BodyLimit,
			Features: documents.Features{NestedArrays: !strings.HasPrefix(server, "FerretDB")}}
	})
}

// dropDatabase drops the test's database when the test ends.
func dropDatabase(t *testing.T, cfg Config) {
	t.Helper()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		client, err := connect(ctx, cfg)
		if err != nil {
			t.Errorf("drop database %s: %v", cfg.Database, err)
			return
		}
		defer client.Disconnect(context.Background())
		if err := client.Database(cfg.Database).Drop(ctx); err != nil {
			t.Errorf("drop database %s: %v", cfg.Database, err)
		}
	})
}

// TestDocumentTooLargeIs422: MongoDB refuses a document past 16 MiB (a
// profile grown by PATCHes, or an insert the driver checks itself); the
// client gets a 422 naming the limit, not a 500. Errors are built here:
// FerretDB accepts such documents, so the real server cannot produce them.
func TestDocumentTooLargeIs422(t *testing.T) {
	t.Parallel()
	for _, err := range []error{
		mongo.CommandError{Code: 17419, Message: "Resulting document after update is larger than 16777216"},
		mongo.WriteException{WriteErrors: []mongo.WriteError{{Code: 10334, Message: "BSONObjectTooLarge"}}},
		fmt.Errorf("insert: %w", driver.ErrDocumentTooLarge),
	} {
		var he *httpapi.Error
		if got := mapErr(err, "id"); !errors.As(got, &he) || he.Status != http.StatusUnprocessableEntity || !strings.Contains(he.Message, "16 MiB") {
			t.Errorf("mapErr(%v) = %v, want a 422 naming the 16 MiB limit", err, got)
		}
	}
	var he *httpapi.Error
	if got := mapErr(mongo.CommandError{Code: 2, Message: "BadValue"}, "id"); errors.As(got, &he) && he.Status == http.StatusUnprocessableEntity {
		t.Errorf("an unrelated server error mapped to %v", got)
	}
}
