package main

import (
	"context"
	"strings"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"

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
		"MAX_GROUPS": "1001", "GROUP_POLL_INTERVAL": "-1s", "KAFKA_MIN_INSYNC_REPLICAS": "2", "KAFKA_ACKS": "0",
		"KAFKA_PRODUCER": "sarama", "KAFKA_COMMIT_INTERVAL": "-1s", "KAFKA_BATCH_TIMEOUT": "0s"},
		"KAFKA_BROKERS", "KAFKA_DIAL_TIMEOUT", "KAFKA_TOPIC", "KAFKA_PARTITIONS", "SYNCHRONOUS_COMMIT", "KAFKA_WRITE_TIMEOUT",
		"MAX_GROUPS", "GROUP_POLL_INTERVAL", "KAFKA_MIN_INSYNC_REPLICAS", "KAFKA_ACKS", "KAFKA_PRODUCER", "KAFKA_COMMIT_INTERVAL",
		"KAFKA_BATCH_TIMEOUT")
	if c := configtest.Defaults(t, readConfig); c.Acks != AcksAll || c.requiredAcks() != kafkago.RequireAll || c.MinInsyncReplicas != 0 {
		t.Errorf("defaults: KAFKA_ACKS %q (%v), KAFKA_MIN_INSYNC_REPLICAS %d: want all (RequireAll) and 0 (the broker's)", c.Acks, c.requiredAcks(), c.MinInsyncReplicas)
	}
	c := kittest.ReadConfig(t, readConfig, map[string]string{"KAFKA_REPLICATION_FACTOR": "3", "KAFKA_MIN_INSYNC_REPLICAS": "2", "KAFKA_ACKS": "1"})
	if c.MinInsyncReplicas != 2 || c.requiredAcks() != kafkago.RequireOne {
		t.Errorf("KAFKA_MIN_INSYNC_REPLICAS=2 under factor 3, KAFKA_ACKS=1: %d, %v", c.MinInsyncReplicas, c.requiredAcks())
	}
	if c := configtest.Defaults(t, readConfig); c.Partitions != 3 || c.MaxGroups != 16 || c.ConsumeGroups.String() != logc.AllGroups {
		t.Errorf("defaults: KAFKA_PARTITIONS %d (3: a group's instances share the topic), MAX_GROUPS %d, CONSUME_GROUPS %s", c.Partitions, c.MaxGroups, c.ConsumeGroups)
	}
	if c := configtest.Defaults(t, readConfig); c.Producer != ProducerFranz || c.CommitInterval != time.Second || c.BatchTimeout != time.Millisecond {
		t.Errorf("defaults: KAFKA_PRODUCER %q, KAFKA_COMMIT_INTERVAL %v, KAFKA_BATCH_TIMEOUT %v: want franz-go, 1s (as no-kafka's slot confirmation) and 1ms", c.Producer, c.CommitInterval, c.BatchTimeout)
	}
	// KAFKA_COMMIT_INTERVAL=0 is the synchronous commit after every batch;
	// KAFKA_PRODUCER=kafka-go the Writer from before franz-go.
	if c := kittest.ReadConfig(t, readConfig, map[string]string{"KAFKA_COMMIT_INTERVAL": "0", "KAFKA_PRODUCER": "kafka-go"}); c.CommitInterval != 0 || c.Producer != ProducerKafkaGo {
		t.Errorf("KAFKA_COMMIT_INTERVAL=0 KAFKA_PRODUCER=kafka-go: %v %q", c.CommitInterval, c.Producer)
	}
	configtest.ReadsBack(t, readConfig, configtest.Var[Config]{Name: logc.ConsumeGroupsVar, Good: "billing,audit", Get: func(c Config) string { return c.ConsumeGroups.String() }, Bad: []string{"billing,,audit", "billing,billing", "Billing"}})
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

// A topic that exists with another min.insync.replicas than
// KAFKA_MIN_INSYNC_REPLICAS asks for is refused at start, naming the
// variable: the durability asked for would silently not hold. (The topic
// is made with factor 1 and its own min.insync.replicas=1, not the
// broker's, which is 1 on the stack but 2 on the cluster profile; the
// service asks for 2 of 2, and finds the topic there before it would
// have to create it.)
func TestExistingTopicWithOtherMinInsyncReplicasIsRefused(t *testing.T) {
	t.Parallel()
	brokers := kittest.Server(t, "KAFKA_BROKERS", kittest.DefaultKafkaBrokers)
	topic := kittest.UniqueName(t, "t")
	client := &kafkago.Client{Addr: kafkago.TCP(strings.Split(brokers, ",")...), Timeout: 10 * time.Second}
	ctx := kittest.Context(t, time.Minute)
	res, err := client.CreateTopics(ctx, &kafkago.CreateTopicsRequest{Topics: []kafkago.TopicConfig{{Topic: topic, NumPartitions: 1, ReplicationFactor: 1,
		ConfigEntries: []kafkago.ConfigEntry{{ConfigName: "min.insync.replicas", ConfigValue: "1"}}}}})
	if err != nil || res.Errors[topic] != nil {
		t.Fatalf("create %s: %v %v", topic, err, res)
	}
	t.Cleanup(func() {
		_, _ = client.DeleteTopics(context.Background(), &kafkago.DeleteTopicsRequest{Topics: []string{topic}})
	})
	cfg := kittest.ReadConfig(t, readConfig, map[string]string{"KAFKA_BROKERS": brokers, "KAFKA_TOPIC": topic,
		"KAFKA_REPLICATION_FACTOR": "2", "KAFKA_MIN_INSYNC_REPLICAS": "2"})
	err = servicetest.RefusesToStart(t, build, cfg, "KAFKA_MIN_INSYNC_REPLICAS")
	t.Logf("refused: %v", err)
}
