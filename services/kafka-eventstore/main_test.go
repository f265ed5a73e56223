package main

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/eventstore"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// testConfig uses a topic of the test's own, deleted when it ends.
func testConfig(t testing.TB) Config {
	t.Helper()
	brokers := kittest.Server(t, "KAFKA_BROKERS", kittest.DefaultKafkaBrokers)
	topic := kittest.UniqueName(t, "es")
	cfg := kittest.ReadConfig(t, readConfig, map[string]string{
		"KAFKA_BROKERS": brokers, "KAFKA_TOPIC": topic,
		"KAFKA_FETCH_MAX_WAIT": "200ms", "SHUTDOWN_TIMEOUT": "10s",
	})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c := &kafka.Client{Addr: kafka.TCP(cfg.Brokers...)}
		if _, err := c.DeleteTopics(ctx, &kafka.DeleteTopicsRequest{Topics: []string{topic}}); err != nil {
			t.Logf("delete topic %s: %v", topic, err)
		}
	})
	return cfg
}

type running struct {
	base string
	stop func()
}

func start(t testing.TB, cfg Config) *running {
	t.Helper()
	svc, err := build(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	base, stop := kittest.Start(t, svc)
	return &running{base: base, stop: stop}
}

func TestConformance(t *testing.T) {
	t.Parallel()
	eventstore.Run(t, func(t *testing.T) *eventstore.Target {
		cfg := testConfig(t)
		r := start(t, cfg)
		tg := &eventstore.Target{
			BaseURL: r.base, Service: "kafka-eventstore", Backend: "kafka",
			Features: eventstore.Features{ConditionalAppend: false, ServerSideStreamRead: false, PushSubscription: false},
		}
		tg.Restart = func(t testing.TB) string {
			r.stop()
			r = start(t, cfg)
			return r.base
		}
		return tg
	})
}

// TestRefusesAMultiPartitionTopic: offsets order records only within a
// partition, so the service must not run on a topic with two.
func TestRefusesAMultiPartitionTopic(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	ctx := kittest.Context(t, time.Minute)
	c := &kafka.Client{Addr: kafka.TCP(cfg.Brokers...)}
	if _, err := c.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{Topic: cfg.Topic, NumPartitions: 2, ReplicationFactor: 1}}}); err != nil {
		t.Fatal(err)
	}
	_, err := build(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err == nil || !strings.Contains(err.Error(), "2 partitions") {
		t.Fatalf("build on a 2-partition topic: %v, want a refusal", err)
	}
}

func TestConfigNamesBadVariables(t *testing.T) {
	t.Parallel()
	_, err := readConfig(config.FromMap(map[string]string{
		"KAFKA_BROKERS": " , ", "KAFKA_TOPIC": "bad topic", "KAFKA_REPLICATION_FACTOR": "0",
		"KAFKA_FETCH_MAX_BYTES": "1KiB", "KAFKA_FETCH_MAX_WAIT": "1m",
	}))
	for _, name := range []string{"KAFKA_BROKERS", "KAFKA_TOPIC", "KAFKA_REPLICATION_FACTOR", "KAFKA_FETCH_MAX_BYTES", "KAFKA_FETCH_MAX_WAIT"} {
		if err == nil || !strings.Contains(err.Error(), name+":") {
			t.Errorf("error does not name %s: %v", name, err)
		}
	}
	cfg, err := readConfig(config.FromMap(nil))
	if err != nil || cfg.HTTP.Addr != ":8091" || cfg.Topic != "eventstore" || len(cfg.Brokers) != 1 {
		t.Errorf("defaults: %+v %v", cfg, err)
	}
}
