package main

import (
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config/configtest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue/conformance"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service/servicetest"
)

func TestConfigDefaultsAndErrors(t *testing.T) {
	t.Parallel()
	if c := configtest.Defaults(t, readConfig); c.HTTP.Addr != "127.0.0.1:8081" || len(c.RabbitMQURLs) != 1 || c.RabbitMQURLs[0] != kittest.DefaultRabbitMQURL || c.Postgres.Schema != "queue_rabbitmq" {
		t.Fatalf("defaults: %+v", c)
	}
	configtest.NamesBadVariables(t, readConfig, map[string]string{"RABBITMQ_URL": "http://x", "RABBITMQ_HEARTBEAT": "10ms"},
		"RABBITMQ_URL", "RABBITMQ_HEARTBEAT")
	configtest.NamesBadVariables(t, readConfig, map[string]string{"RABBITMQ_URL": "amqp://a/,amqp://b/,amqp://a/"}, "RABBITMQ_URL")
	configtest.NamesBadVariables(t, readConfig, map[string]string{"RABBITMQ_URL": "amqp://a/,,amqp://b/"}, "RABBITMQ_URL")
	c, err := readConfig(config.FromMap(map[string]string{"RABBITMQ_URL": "amqp://u:p@10.77.0.21:5672/, amqp://u:p@10.77.0.22:5672/"}))
	if err != nil || len(c.RabbitMQURLs) != 2 || c.RabbitMQURLs[1] != "amqp://u:p@10.77.0.22:5672/" {
		t.Errorf("two nodes: %q, %v", c.RabbitMQURLs, err)
	}
	if got := redactURLs(c.RabbitMQURLs); strings.Contains(got, ":p@") || strings.Count(got, ",") != 1 {
		t.Errorf("redactURLs = %q, want both passwords masked", got)
	}
}

// TestUnreachableNodeIsSkipped: with a first node that refuses
// connections, the service starts on the second and serves.
func TestUnreachableNodeIsSkipped(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tg := startTarget(t, e, conformance.Settings{Workers: 2}, map[string]string{
		"RABBITMQ_URL": "amqp://guest:guest@127.0.0.1:1/," + e.amqpURL, "RABBITMQ_DIAL_TIMEOUT": "1s"})
	kittest.Eventually(t, 30*time.Second, "a session", func() bool { return tg.App().node() >= 0 })
	if n := tg.App().node(); n != 1 {
		t.Errorf("connected to node %d of RABBITMQ_URL, want 1 (the first refuses)", n)
	}
	post(t, tg.URL(), 10, 0)
	waitDone(t, tg, 10, time.Minute)
}

func TestStartsAndServesSharedEndpoints(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := kittest.ReadConfig(t, readConfig, map[string]string{
		"DATABASE_URL": e.pgURL, "DATABASE_SCHEMA": e.schema, "RABBITMQ_URL": e.amqpURL, "RABBITMQ_QUEUE": e.queue,
	})
	servicetest.CheckShared(t, build, cfg, info)
}

func TestUnreachableBrokerFailsAtStartNamingTheVariable(t *testing.T) {
	t.Parallel()
	url := kittest.PostgresURL(t)
	cfg := kittest.ReadConfig(t, readConfig, map[string]string{
		"DATABASE_URL": url, "DATABASE_SCHEMA": kittest.Schema(t, url),
		"RABBITMQ_URL": "amqp://guest:guest@127.0.0.1:1/", "RABBITMQ_DIAL_TIMEOUT": "1s",
	})
	servicetest.RefusesToStart(t, build, cfg, "RABBITMQ_URL")
}

// TestConfigFanout: FANOUT is read into the shared worker settings; an
// empty subscriber list, a duplicate subscriber, a malformed value, or a
// subscriber queue name past AMQP's 255 bytes fails the start naming the
// variable.
func TestConfigFanout(t *testing.T) {
	t.Parallel()
	configtest.ReadsBack(t, readConfig, configtest.Var[Config]{Name: "FANOUT", Good: "order.placed:email,warehouse", Get: func(c Config) string { return c.Worker.Fanout.String() }, Bad: []string{"order.placed:", "order.placed:email,email", "order.placed=email"}})
	long := strings.Repeat("q", 200)
	configtest.NamesBadVariables(t, readConfig, map[string]string{"RABBITMQ_QUEUE": long, "FANOUT": strings.Repeat("k", 40) + ":" + strings.Repeat("s", 40)}, "FANOUT")
	if _, err := readConfig(config.FromMap(map[string]string{"RABBITMQ_QUEUE": long, "FANOUT": "k:s"})); err != nil {
		t.Errorf("a short fan-out queue name on a long RABBITMQ_QUEUE refused: %v", err)
	}
}
