package main

import (
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config/configtest"
	logc "github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/log"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service/servicetest"
)

func TestConfigDefaultsAndErrors(t *testing.T) {
	t.Parallel()
	if c := configtest.Defaults(t, readConfig); c.HTTP.Addr != "127.0.0.1:8083" || len(c.Brokers) != 1 || c.Brokers[0] != kittest.DefaultKafkaBrokers || c.Postgres.Schema != "log_kafka" {
		t.Fatalf("defaults: %+v", c)
	}
	configtest.NamesBadVariables(t, readConfig, map[string]string{"KAFKA_BROKERS": "localhost", "KAFKA_DIAL_TIMEOUT": "0s",
		"KAFKA_TOPIC": "bad topic", "KAFKA_PARTITIONS": "0", "SYNCHRONOUS_COMMIT": "maybe", "KAFKA_WRITE_TIMEOUT": "-1s",
		"MAX_GROUPS": "1001", "GROUP_POLL_INTERVAL": "-1s"},
		"KAFKA_BROKERS", "KAFKA_DIAL_TIMEOUT", "KAFKA_TOPIC", "KAFKA_PARTITIONS", "SYNCHRONOUS_COMMIT", "KAFKA_WRITE_TIMEOUT",
		"MAX_GROUPS", "GROUP_POLL_INTERVAL")
	if c := configtest.Defaults(t, readConfig); c.Partitions != 3 || c.MaxGroups != 16 || c.ConsumeGroups.String() != logc.AllGroups {
		t.Errorf("defaults: KAFKA_PARTITIONS %d (3: a group's instances share the topic), MAX_GROUPS %d, CONSUME_GROUPS %s", c.Partitions, c.MaxGroups, c.ConsumeGroups)
	}
	configtest.ReadsBack(t, readConfig, logc.ConsumeGroupsVar, "billing,audit", func(c Config) string { return c.ConsumeGroups.String() },
		"billing,,audit", "billing,billing", "Billing")
}

func TestStartsAndServesSharedEndpoints(t *testing.T) {
	t.Parallel()
	tg := newTarget(t, nil)
	kittest.CheckShared(t, tg.URL(), info.Service, info.Pair, info.Backend)
}

func TestUnreachableBrokerFailsAtStartNamingTheVariable(t *testing.T) {
	t.Parallel()
	cfg := kittest.ReadConfig(t, readConfig, map[string]string{"KAFKA_BROKERS": "127.0.0.1:1", "KAFKA_DIAL_TIMEOUT": "1s"})
	servicetest.RefusesToStart(t, build, cfg, "KAFKA_BROKERS")
}
