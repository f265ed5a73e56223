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
	if err != nil || c.HTTP.Addr != ":8081" || c.RabbitMQURL != kittest.DefaultRabbitMQURL || c.Postgres.Schema != "queue_rabbitmq" {
		t.Fatalf("defaults: %+v, %v", c, err)
	}
	_, err = readConfig(config.FromMap(map[string]string{"RABBITMQ_URL": "http://x", "RABBITMQ_HEARTBEAT": "10ms"}))
	for _, name := range []string{"RABBITMQ_URL:", "RABBITMQ_HEARTBEAT:"} {
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("error does not name %s: %v", name, err)
		}
	}
}

func TestStartsAndServesSharedEndpoints(t *testing.T) {
	t.Parallel()
	url := kittest.PostgresURL(t)
	cfg := kittest.ReadConfig(t, readConfig, map[string]string{
		"DATABASE_URL": url, "DATABASE_SCHEMA": kittest.Schema(t, url),
		"RABBITMQ_URL": kittest.Server(t, "RABBITMQ_URL", kittest.DefaultRabbitMQURL),
	})
	svc, err := build(kittest.Context(t, 30*time.Second), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	kittest.CheckShared(t, kittest.Serve(t, svc), info.Service, info.Pair, info.Backend)
}

func TestUnreachableBrokerFailsAtStartNamingTheVariable(t *testing.T) {
	t.Parallel()
	url := kittest.PostgresURL(t)
	cfg := kittest.ReadConfig(t, readConfig, map[string]string{
		"DATABASE_URL": url, "DATABASE_SCHEMA": kittest.Schema(t, url),
		"RABBITMQ_URL": "amqp://guest:guest@127.0.0.1:1/", "RABBITMQ_DIAL_TIMEOUT": "1s",
	})
	if _, err := build(kittest.Context(t, 30*time.Second), cfg, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "RABBITMQ_URL") {
		t.Fatalf("build = %v, want an error naming RABBITMQ_URL", err)
	}
}
