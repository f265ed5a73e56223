package eventstore

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// TestKafkaRowsAreLabelled: the two Kafka designs are told apart in every
// table, the reference's and the keyed one with its partition count; the
// default targets include the keyed side at KeyedPort.
func TestKafkaRowsAreLabelled(t *testing.T) {
	t.Parallel()
	es := defaultEngines("no-kurrentdb=http://a,kafka-eventstore=http://b,"+KeyedName+"=http://c/", 8)
	if len(es) != 3 || es[0].Label != "" || es[1].Label != ReferenceLabel || es[2].Label != "Kafka, keyed, 8 partitions" || es[2].Backend != "kafka" || es[2].URL != "http://c" {
		t.Errorf("engines %+v %+v %+v", *es[0], *es[1], *es[2])
	}
	if got := (PointReadRow{Engine: KeyedName, Label: labelOf(es, KeyedName)}).Shown(); got != KeyedName+": Kafka, keyed, 8 partitions" {
		t.Errorf("keyed row shown as %q", got)
	}
	if got := (AppendRow{Engine: "no-kurrentdb"}).Shown(); got != "no-kurrentdb" {
		t.Errorf("unlabelled row shown as %q", got)
	}
	if !strings.Contains(Targets("h", 100), KeyedName+"=http://h:8192") {
		t.Errorf("targets %s lack the keyed side at KeyedPort+offset", Targets("h", 100))
	}
}

// TestKeyedCursorOnRealKafka: the keyed side's starting cursor is the
// partition count and every partition's high watermark, and its store
// size sums every partition.
func TestKeyedCursorOnRealKafka(t *testing.T) {
	if testing.Short() {
		t.Skip("talks to Kafka")
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	brokers := envOr("KAFKA_BROKERS", pairs.DefaultKafkaBrokers)
	topic := BenchTopic(time.Now())
	c, err := kafkaClient(brokers)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{Topic: topic, NumPartitions: 3, ReplicationFactor: 1}}})
	if err == nil {
		err = resp.Errors[topic]
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := DeleteTopic(context.Background(), brokers, topic); err != nil {
			t.Error(err)
		}
	})
	o := Options{KafkaBrokers: brokers, KeyedTopic: topic}
	var cur string
	deadline := time.Now().Add(15 * time.Second)
	for cur, err = keyedCursor(ctx, o); err != nil && time.Now().Before(deadline); cur, err = keyedCursor(ctx, o) {
		time.Sleep(200 * time.Millisecond) // a new topic's partitions need a leader
	}
	if err != nil || cur != "3:0:0:0" {
		t.Fatalf("cursor of an empty 3-partition topic: %q %v", cur, err)
	}
	w := &kafka.Writer{Addr: kafka.TCP(strings.Split(brokers, ",")[0]), Topic: topic, Balancer: kafka.Murmur2Balancer{}, RequiredAcks: kafka.RequireAll}
	defer w.Close()
	var msgs []kafka.Message
	for _, k := range []string{"a", "b", "c", "d", "e", "f"} {
		msgs = append(msgs, kafka.Message{Key: []byte(k), Value: []byte(`{}`)})
	}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	if n, parts, err := TopicAllRecords(ctx, brokers, topic); err != nil || n != 6 || parts != 3 {
		t.Errorf("all records: %d in %d partitions, %v; want 6 in 3", n, parts, err)
	}
	st := storeStates(ctx, o, []*Engine{{Name: KeyedName, Backend: "kafka", Up: true}})
	if st[0].Records == nil || *st[0].Records != 6 || !strings.Contains(st[0].Store, "all 3 partitions") {
		t.Errorf("keyed store state %+v", st[0])
	}
	if _, err := keyedCursor(ctx, Options{KafkaBrokers: brokers}); err == nil || !strings.Contains(err.Error(), "-kafka-keyed-topic") {
		t.Errorf("cursor without a topic: %v", err)
	}
}
