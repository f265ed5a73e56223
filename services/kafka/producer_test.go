package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// TestFranzPartitionerMatchesKafkaGoHash: franz-go's partitioner puts
// every key on the partition kafka-go's Hash balancer chose (the producer
// before franz-go), for 1, 3 and 6 partitions (KAFKA_PARTITIONS' default
// is 3), over 100,000 keys: random bytes of 0 to 64 bytes (about half of
// their FNV-1a hashes have the high bit set, the case where the
// Sarama-style negation matters) and keys like the tests'. It also
// shows that kgo.SaramaHasher, the other "Sarama" hasher, would move keys
// on 64-bit platforms: the choice matters.
func TestFranzPartitionerMatchesKafkaGoHash(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(39, 6))
	keys := [][]byte{{}, []byte("k"), []byte("crash"), []byte("r1"), []byte("r2")}
	for i := range 1000 {
		keys = append(keys, []byte("key-"+strconv.Itoa(i)), []byte("k"+strings.Repeat("x", i%7)), fmt.Appendf(nil, "user-%08d", i))
	}
	for len(keys) < 100_000 {
		k := make([]byte, rng.IntN(65))
		for i := range k {
			k[i] = byte(rng.Uint32())
		}
		keys = append(keys, k)
	}
	sarama := kgo.StickyKeyPartitioner(kgo.SaramaHasher(fnv32a)).ForTopic("t")
	for _, n := range []int{1, 3, 6} {
		parts := make([]int, n)
		for i := range parts {
			parts[i] = i
		}
		franz := franzPartitioner().ForTopic("t")
		highBit, saramaMoved := 0, 0
		for _, k := range keys {
			want := (&kafkago.Hash{}).Balance(kafkago.Message{Key: k}, parts...)
			if got := franz.Partition(&kgo.Record{Key: k}, n); got != want {
				t.Fatalf("%d partitions: key %x goes to partition %d with franz-go, %d with kafka-go's Hash", n, k, got, want)
			}
			if fnv32a(k)&(1<<31) != 0 {
				highBit++
			}
			if sarama.Partition(&kgo.Record{Key: k}, n) != want {
				saramaMoved++
			}
		}
		t.Logf("%d partitions: %d keys on kafka-go's partitions (%d with the hash's high bit set); kgo.SaramaHasher would move %d", n, len(keys), highBit, saramaMoved)
		if n == 3 && strconv.IntSize == 64 && saramaMoved == 0 {
			t.Errorf("3 partitions: kgo.SaramaHasher moved no key; the test's keys do not tell the hashers apart")
		}
	}
}

// TestFranzBatchSizeIsExact checks franzProducer.batchSize, the 413
// bound, against franz-go and a real broker: on a fresh client (which
// does not yet know the broker's produce version, when franz-go counts a
// batch the largest), a record whose batchSize is one byte above
// ProducerBatchMaxBytes (the topic's max.message.bytes) is refused by
// franz-go itself (kerr.MessageTooLarge, no produce request sent), and one
// whose batchSize is exactly max.message.bytes is produced and
// acknowledged. The bound is then neither loose nor too tight for
// franz-go's accounting.
func TestFranzBatchSizeIsExact(t *testing.T) {
	t.Parallel()
	tg := newTarget(t, map[string]string{"KAFKA_PARTITIONS": "1"})
	b := tg.App().backend
	p, err := newFranzProducer(b.cfg, b.cfg.Brokers, b.maxMessageBytes, b.logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	// The largest value whose record, key "k", fits exactly.
	key := []byte("k")
	value := b.maxMessageBytes - franzBatchOverhead
	for p.batchSize(len(key), value) > b.maxMessageBytes {
		value--
	}
	if p.batchSize(len(key), value) != b.maxMessageBytes || p.batchSize(len(key), value+1) != b.maxMessageBytes+1 {
		t.Fatalf("no value of a record of exactly %d bytes (batchSize %d, then %d)", b.maxMessageBytes, p.batchSize(len(key), value), p.batchSize(len(key), value+1))
	}
	ctx := kittest.Context(t, time.Minute)
	err = p.produce(ctx, []record{{key: key, value: make([]byte, value+1)}})
	if !errors.Is(err, kerr.MessageTooLarge) || p.written.requests.Load() != 0 {
		t.Fatalf("a record one byte above the bound: %v after %d produce requests, want franz-go's own MessageTooLarge and none sent", err, p.written.requests.Load())
	}
	if err := p.produce(ctx, []record{{key: key, value: make([]byte, value)}}); err != nil {
		t.Fatalf("a record of exactly the bound (a batch of %d bytes as franz-go counts it, topic max.message.bytes %d): %v", p.batchSize(len(key), value), b.maxMessageBytes, err)
	}
	t.Logf("max.message.bytes %d: a value of %d bytes (key 1) is taken, %d refused by franz-go", b.maxMessageBytes, value, value+1)
}
