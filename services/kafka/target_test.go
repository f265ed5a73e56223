package main

import (
	"context"
	"strings"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/log/conformance"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// target runs kafka instances on one schema, one topic and one group for
// the conformance suite and the service's own tests.
type target struct {
	*conformance.ServiceTarget[*app]
}

// testDurability are the variables an instance takes from the test's
// environment when they are set there (a cluster's replication, its
// min.insync.replicas and the producer's acks: make
// test-cluster-brokers sets them for the cluster profile's three
// brokers; the producer and the commit interval, to run the suite on
// the kafka-go producer or with synchronous commits:
// KAFKA_PRODUCER=kafka-go KAFKA_COMMIT_INTERVAL=0 go test
// ./services/kafka); unset, the service's defaults apply (one replica,
// the broker's min.insync.replicas, acks=all, franz-go, 1s).
var testDurability = []string{"KAFKA_REPLICATION_FACTOR", "KAFKA_MIN_INSYNC_REPLICAS", "KAFKA_ACKS", "KAFKA_PRODUCER", "KAFKA_COMMIT_INTERVAL"}

// newTarget starts an instance on a fresh schema, topic and group, with
// KAFKA_BROKERS and testDurability from the test's environment; extra
// overrides them (KAFKA_BROKERS too: the topic is then deleted there).
// The topic is deleted when the test ends.
func newTarget(t testing.TB, extra map[string]string) *target {
	t.Helper()
	brokers := extra["KAFKA_BROKERS"]
	if brokers == "" {
		brokers = kittest.Server(t, "KAFKA_BROKERS", kittest.DefaultKafkaBrokers)
	}
	topic := kittest.UniqueName(t, "t")
	base := map[string]string{
		"KAFKA_BROKERS": brokers, "KAFKA_TOPIC": topic, "KAFKA_GROUP": "g_" + topic,
		// The suite's bound check fills the service up to MAX_GROUPS.
		"MAX_GROUPS": "4", "GROUP_POLL_INTERVAL": "500ms",
	}
	for _, name := range testDurability {
		if v := kittest.Env(name, ""); v != "" {
			base[name] = v
		}
	}
	tg := &target{conformance.NewServiceTarget(t, readConfig, assemble, base, extra)}
	t.Cleanup(func() {
		client := &kafkago.Client{Addr: kafkago.TCP(strings.Split(brokers, ",")...), Timeout: 10 * time.Second}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := client.DeleteTopics(ctx, &kafkago.DeleteTopicsRequest{Topics: []string{topic}}); err != nil {
			t.Logf("delete topic %s: %v", topic, err)
		}
	})
	tg.Start(t)
	return tg
}

// GroupHeld reports whether the broker still knows the group's Kafka
// consumer group (conformance.GroupHolder): DELETE /groups/{name} must
// delete it, with its committed offsets.
func (tg *target) GroupHeld(t testing.TB, name string) bool {
	t.Helper()
	cfg := tg.App().backend.cfg
	client := &kafkago.Client{Addr: kafkago.TCP(cfg.Brokers...), Timeout: 10 * time.Second}
	res, err := client.ListGroups(kittest.Context(t, 10*time.Second), &kafkago.ListGroupsRequest{})
	if err != nil || res.Error != nil {
		t.Fatalf("list kafka groups: %v %v", err, res)
	}
	for _, g := range res.Groups {
		if g.GroupID == kafkaGroup(cfg.Group, name) {
			return true
		}
	}
	return false
}

// Crash stops the instance (which leaves the group), then rewinds the
// group's committed offsets to the start of every partition, as if the
// consumer had died before committing anything.
func (tg *target) Crash(t testing.TB) {
	t.Helper()
	tg.Stop()
	cfg := tg.App().backend.cfg
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
	tg.Start(t)
}

// TestConformance runs the log pair's one suite against kafka.
func TestConformance(t *testing.T) {
	t.Parallel()
	conformance.Run(t, conformance.Features{}, func(t testing.TB) conformance.Target { return newTarget(t, nil) })
}
