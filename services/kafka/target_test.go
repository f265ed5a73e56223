package main

import (
	"context"
	"log/slog"
	"maps"
	"os"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config"
	logc "github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/log"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// target runs kafka instances on one schema, one topic and one group for
// the conformance suite and the service's own tests.
type target struct {
	env    map[string]string
	app    *app
	url    string
	cancel context.CancelFunc
	done   chan error
}

// newTarget starts an instance on a fresh schema, topic and group; extra
// overrides the environment. The topic is deleted when the test ends.
func newTarget(t testing.TB, extra map[string]string) *target {
	t.Helper()
	url := kittest.PostgresURL(t)
	brokers := kittest.Server(t, "KAFKA_BROKERS", kittest.DefaultKafkaBrokers)
	topic := kittest.UniqueName(t, "t")
	env := map[string]string{
		"ADDR": "127.0.0.1:0", "DATABASE_URL": url, "DATABASE_SCHEMA": kittest.Schema(t, url),
		"KAFKA_BROKERS": brokers, "KAFKA_TOPIC": topic, "KAFKA_GROUP": "g_" + topic,
		"LOG_LEVEL": "warn",
	}
	maps.Copy(env, extra)
	tg := &target{env: env}
	t.Cleanup(func() {
		client := &kafkago.Client{Addr: kafkago.TCP(brokers), Timeout: 10 * time.Second}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := client.DeleteTopics(ctx, &kafkago.DeleteTopicsRequest{Topics: []string{topic}}); err != nil {
			t.Logf("delete topic %s: %v", topic, err)
		}
	})
	tg.start(t)
	t.Cleanup(func() { tg.stop(t) })
	return tg
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
}

func (tg *target) stop(t testing.TB) {
	t.Helper()
	if tg.cancel == nil {
		return
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
	tg.stop(t)
	tg.start(t)
}

// Crash stops the instance (which leaves the group), then rewinds the
// group's committed offsets to the start of every partition, as if the
// consumer had died before committing anything.
func (tg *target) Crash(t testing.TB) {
	t.Helper()
	tg.stop(t)
	cfg := tg.app.backend.cfg
	client := &kafkago.Client{Addr: kafkago.TCP(cfg.Brokers...), Timeout: 10 * time.Second}
	var commits []kafkago.OffsetCommit
	for p := range cfg.Partitions {
		commits = append(commits, kafkago.OffsetCommit{Partition: p, Offset: 0})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Generation -1, no member: a commit for an empty group (as the admin
	// tools reset offsets). Retried while the group finishes leaving.
	for {
		res, err := client.OffsetCommit(ctx, &kafkago.OffsetCommitRequest{GroupID: cfg.Group, GenerationID: -1,
			Topics: map[string][]kafkago.OffsetCommit{cfg.Topic: commits}})
		if err == nil {
			var perr error
			for _, p := range res.Topics[cfg.Topic] {
				if p.Error != nil {
					perr = p.Error
				}
			}
			if perr == nil {
				break
			}
			err = perr
		}
		if ctx.Err() != nil {
			t.Fatalf("rewind group %s: %v", cfg.Group, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	tg.start(t)
}

func TestConformance(t *testing.T) {
	t.Parallel()
	logc.Run(t, func(t testing.TB) logc.Target { return newTarget(t, nil) })
}
