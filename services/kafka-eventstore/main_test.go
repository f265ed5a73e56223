package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config/configtest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/eventstore"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/eventstore/conformance"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service/servicetest"
)

// testConfig uses a topic of the test's own, deleted when it ends.
func testConfig(t testing.TB) Config {
	t.Helper()
	return testConfigPartitions(t, 1)
}

// keyedPartitions is the keyed design's partition count in the tests.
const keyedPartitions = 8

// testConfigPartitions is testConfig with KAFKA_PARTITIONS set to
// partitions; a keyed topic (more than one) is created by the test, as an
// operator would, before the service starts.
func testConfigPartitions(t testing.TB, partitions int) Config {
	t.Helper()
	brokers := kittest.Server(t, "KAFKA_BROKERS", kittest.DefaultKafkaBrokers)
	topic := kittest.UniqueName(t, "es")
	cfg := kittest.ReadConfig(t, readConfig, map[string]string{
		"KAFKA_BROKERS": brokers, "KAFKA_TOPIC": topic, "KAFKA_PARTITIONS": strconv.Itoa(partitions),
		"KAFKA_FETCH_MAX_WAIT": "200ms", "SHUTDOWN_TIMEOUT": "10s",
	})
	if partitions > 1 {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c := &kafka.Client{Addr: kafka.TCP(cfg.Brokers...)}
		resp, err := c.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{Topic: topic, NumPartitions: partitions, ReplicationFactor: 1}}})
		if err == nil {
			err = resp.Errors[topic]
		}
		if err != nil {
			t.Fatalf("create topic %s with %d partitions: %v", topic, partitions, err)
		}
	}
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

// target is a kafka-eventstore instance for the suite, on a topic of the
// test's own.
type target struct {
	*servicetest.Target[struct{}]
	cfg Config
}

// newTarget starts an instance on cfg's topic.
func newTarget(t testing.TB, cfg Config) *target {
	t.Helper()
	return &target{Target: &servicetest.Target[struct{}]{Service: "kafka-eventstore", Backend: "kafka", Instance: servicetest.Start(t, build, cfg)}, cfg: cfg}
}

// ForgetRecorded deletes every record of the topic, in every partition,
// as its retention would (conformance.Forgetter): a DeleteRecords request
// up to each partition's high watermark, which moves the log start offset
// there at once.
func (tg *target) ForgetRecorded(t testing.TB) {
	t.Helper()
	ctx := kittest.Context(t, 30*time.Second)
	cl, err := kgo.NewClient(kgo.SeedBrokers(tg.cfg.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	topic := kmsg.NewDeleteRecordsRequestTopic()
	topic.Topic = tg.cfg.Topic
	for p := range tg.cfg.Partitions {
		part := kmsg.NewDeleteRecordsRequestTopicPartition()
		part.Partition = int32(p)
		part.Offset = -1 // the high watermark: every record
		topic.Partitions = append(topic.Partitions, part)
	}
	req := kmsg.NewPtrDeleteRecordsRequest()
	req.Topics = append(req.Topics, topic)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("delete the records of topic %s: %v", tg.cfg.Topic, err)
	}
	var starts []string
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				t.Fatalf("delete the records of topic %s, partition %d: %v", rt.Topic, rp.Partition, err)
			}
			starts = append(starts, fmt.Sprintf("%d:%d", rp.Partition, rp.LowWatermark))
		}
	}
	t.Logf("topic %s: every record deleted; log start offsets (partition:offset) now %s", tg.cfg.Topic, strings.Join(starts, " "))
}

// TestConformance runs the event store suite against kafka-eventstore.
func TestConformance(t *testing.T) {
	t.Parallel()
	features := conformance.Features{ConditionalAppend: false, ServerSideStreamRead: false, PushSubscription: false}
	conformance.Run(t, features, func(t testing.TB) conformance.Target { return newTarget(t, testConfig(t)) })
}

// TestConformanceKeyed runs the same suite against the keyed design: a
// topic of keyedPartitions partitions, each stream in the partition its id
// hashes to. What it does not promise is declared, with the reason.
func TestConformanceKeyed(t *testing.T) {
	t.Parallel()
	features := conformance.Features{ConditionalAppend: false, ServerSideStreamRead: false, PushSubscription: false}
	conformance.Run(t, features, func(t testing.TB) conformance.Target {
		return newTarget(t, testConfigPartitions(t, keyedPartitions))
	},
		conformance.WithoutTotalOrder("a keyed topic orders records only within a partition: the subscription delivers each partition in order (so each stream in order), the partitions interleaved as their fetches answer"),
		conformance.ScansAPartition("a keyed topic's read consumes the one partition the stream id hashes to"))
}

// TestSkipsRecordsThatAreNotEvents: a record some other producer wrote
// to the topic (not JSON, or JSON without type and data) is logged,
// counted and skipped; it breaks neither reads nor subscriptions, and takes
// no stream version.
func TestSkipsRecordsThatAreNotEvents(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	r := servicetest.Start(t, build, cfg)
	ctx := kittest.Context(t, time.Minute)
	stream := "tank-" + kittest.UniqueName(t, "s")
	c := &kafka.Client{Addr: kafka.TCP(cfg.Brokers...), Timeout: 30 * time.Second}
	var err error
	// A fresh client may not see the new topic in its first metadata.
	kittest.Eventually(t, 30*time.Second, "producing garbage records", func() bool {
		var resp *kafka.ProduceResponse
		resp, err = c.Produce(ctx, &kafka.ProduceRequest{
			Topic: cfg.Topic, Partition: 0, RequiredAcks: kafka.RequireAll,
			Records: kafka.NewRecordReader(
				kafka.Record{Key: kafka.NewBytes([]byte(stream)), Value: kafka.NewBytes([]byte("not json at all"))},
				kafka.Record{Key: kafka.NewBytes([]byte(stream)), Value: kafka.NewBytes([]byte(`{"x":1}`))},
				kafka.Record{Value: kafka.NewBytes([]byte{0xff, 0x00})},
			),
		})
		if err == nil {
			err = resp.Error
		}
		if err != nil {
			t.Logf("produce garbage: %v", err)
		}
		return err == nil
	})
	status, b := kittest.Do(t, "POST", r.URL()+"/streams/"+stream+"/events",
		map[string]any{"events": []map[string]any{{"type": "TankRegistered", "data": map[string]any{"capacity_liters": 1000}}}}, nil)
	if status != 201 {
		t.Fatalf("append: %d %s", status, b)
	}
	var read eventstore.ReadResult
	if status, b := kittest.Do(t, "GET", r.URL()+"/streams/"+stream, nil, &read); status != 200 {
		t.Fatalf("read: %d %s", status, b)
	}
	if len(read.Events) != 1 || read.Events[0].Type != "TankRegistered" || read.Events[0].Version == nil || *read.Events[0].Version != 0 {
		t.Fatalf("read after garbage: %+v, want the one event at version 0", read.Events)
	}
	if status, b := kittest.Do(t, "GET", r.URL()+"/streams/"+stream+"/state", nil, nil); status != 200 {
		t.Errorf("state after garbage: %d %s", status, b)
	}
	// A subscription from the start passes the garbage and delivers the event.
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req := kittest.NewRequest(t, "GET", r.URL()+"/subscribe", nil).WithContext(sctx)
	sresp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer sresp.Body.Close()
	sc := bufio.NewScanner(sresp.Body)
	found := false
	for !found && sc.Scan() {
		found = strings.Contains(sc.Text(), `"TankRegistered"`)
	}
	if !found {
		t.Errorf("the subscription did not deliver the event past the garbage (status %d, err %v)", sresp.StatusCode, sc.Err())
	}
	var st struct{ Counters map[string]int64 }
	if status, b := kittest.Do(t, "GET", r.URL()+"/stats", nil, &st); status != 200 || st.Counters[SkippedCounter] < 3 {
		t.Errorf("/stats: %d %s, want %s >= 3", status, b, SkippedCounter)
	}
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
	servicetest.RefusesToStart(t, build, cfg, "2 partitions")
}

// TestKeyedRefusesATopicOfAnotherCount: the partition of a stream is its
// hash modulo the count; a topic of another count would hide streams.
func TestKeyedRefusesATopicOfAnotherCount(t *testing.T) {
	t.Parallel()
	cfg := testConfigPartitions(t, keyedPartitions)
	cfg.Partitions = 4
	servicetest.RefusesToStart(t, build, cfg, "8 partitions and KAFKA_PARTITIONS is 4")
}

func TestConfigNamesBadVariables(t *testing.T) {
	t.Parallel()
	configtest.NamesBadVariables(t, readConfig, map[string]string{
		"KAFKA_BROKERS": " , ", "KAFKA_TOPIC": "bad topic", "KAFKA_REPLICATION_FACTOR": "0",
		"KAFKA_FETCH_MAX_BYTES": "1KiB", "KAFKA_FETCH_MAX_WAIT": "1m", "KAFKA_PARTITIONS": "0",
	}, "KAFKA_BROKERS", "KAFKA_TOPIC", "KAFKA_REPLICATION_FACTOR", "KAFKA_FETCH_MAX_BYTES", "KAFKA_FETCH_MAX_WAIT", "KAFKA_PARTITIONS")
	if cfg := configtest.Defaults(t, readConfig); cfg.HTTP.Addr != "127.0.0.1:8091" || cfg.Topic != "eventstore" || len(cfg.Brokers) != 1 || cfg.Partitions != 1 {
		t.Errorf("defaults: %+v", cfg)
	}
}

// TestSlowSubscriberIsDroppedAndResumes: a subscriber that stops reading
// is dropped at WRITE_TIMEOUT, the fetch loop behind it ends, and
// Last-Event-ID resumes exactly after the last event it received.
func TestSlowSubscriberIsDroppedAndResumes(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.HTTP.WriteTimeout = 2 * time.Second
	tg := &servicetest.Target[struct{}]{Service: "kafka-eventstore", Backend: "kafka", Instance: servicetest.Start(t, build, cfg)}
	conformance.SlowSubscriberIsDroppedAndResumes(t, tg, cfg.HTTP.WriteTimeout)
}

// An append whose record batch the broker would refuse (above the topic's
// max.message.bytes) is a 413, not a 503 that invites retries that can
// never succeed. The size check is exact: the binary search below meets
// only 201 and 413, never a broker refusal, and the largest append taken
// is one byte from the first refused.
func TestTooLargeForKafkaIs413(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	r := servicetest.Start(t, build, cfg)
	stream := "tank-" + kittest.UniqueName(t, "s")
	body := func(n int) string {
		return `{"events":[{"type":"OxygenAdded","data":"` + strings.Repeat("x", n) + `"}]}`
	}
	var e struct {
		Error string `json:"error"`
	}
	if s, raw := kittest.Do(t, "POST", r.URL()+"/streams/"+stream+"/events", body(1048500), &e); s != http.StatusRequestEntityTooLarge {
		t.Fatalf("append of 1,048,500 data bytes (a body under BODY_LIMIT): %d %s, want 413", s, raw)
	}
	t.Logf("413: %s", e.Error)
	lo, hi := 1040000, 1048500 // accepted, refused
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		switch s, raw := kittest.Do(t, "POST", r.URL()+"/streams/"+stream+"/events", body(mid), nil); s {
		case http.StatusCreated:
			lo = mid
		case http.StatusRequestEntityTooLarge:
			hi = mid
		default:
			t.Fatalf("append of %d data bytes: %d %s, want 201 or 413", mid, s, raw)
		}
	}
	t.Logf("largest data accepted: %d bytes", lo)
}
