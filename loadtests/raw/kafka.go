package raw

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
)

// Kafka loop settings: the topic's partitions (the kafka service's
// DefaultPartitions), the records per WriteMessages call and the
// producers calling it.
const (
	kafkaPartitions = 3
	kafkaBatch      = 100
	kafkaProducers  = 4
)

// produceDesc and fetchDesc say what kafkaPair's loops count, and how.
func produceDesc(f figures, _ bool) string {
	return fmt.Sprintf("records/s: acks=all, %d producers × %d-record WriteMessages, batch 1000, linger 1 ms, %d partitions", f.KafkaProducers, f.KafkaBatch, f.KafkaPartitions)
}

func fetchDesc(figures, bool) string {
	return "records/s: Conn.ReadBatch from offset 0, one connection per partition"
}

// kafkaPair creates a scratch topic, produces keyed records to it for
// o.Duration (kafka-go Writer: acks=all, batches of up to 1000 records,
// 1 ms linger, kafkaProducers goroutines writing kafkaBatch records per
// call), then reads every partition from the start with Conn.ReadBatch
// until it has read all of them. The topic is deleted at the end.
func kafkaPair(ctx context.Context, o Options) ([]Result, error) {
	var prod, fetch Result
	topic := "wpe-raw-" + o.Name
	addr := kafka.TCP(o.KafkaBrokers...)
	client := &kafka.Client{Addr: addr, Timeout: 10 * time.Second}
	res, err := client.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{Topic: topic, NumPartitions: kafkaPartitions, ReplicationFactor: 1}}})
	if err != nil {
		return []Result{prod, fetch}, fmt.Errorf("create topic: %w", err)
	}
	if err := res.Errors[topic]; err != nil {
		return []Result{prod, fetch}, fmt.Errorf("create topic: %w", err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = client.DeleteTopics(dctx, &kafka.DeleteTopicsRequest{Topics: []string{topic}})
	}()

	w := &kafka.Writer{Addr: addr, Topic: topic, Balancer: &kafka.Hash{}, RequiredAcks: kafka.RequireAll,
		BatchSize: 1000, BatchTimeout: time.Millisecond, WriteTimeout: 10 * time.Second}
	defer w.Close()
	// The first write waits for the new topic's leaders; it is not timed.
	var werr error
	for range 50 {
		if werr = w.WriteMessages(ctx, kafka.Message{Key: []byte("warm"), Value: payload}); werr == nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if werr != nil {
		return []Result{prod, fetch}, fmt.Errorf("first write: %w", werr)
	}
	msgs := make([]kafka.Message, kafkaBatch)
	for i := range msgs {
		msgs[i] = kafka.Message{Key: []byte("k" + strconv.Itoa(i%64)), Value: payload}
	}
	n, d, err := workers(ctx, kafkaProducers, o.Duration, func(ctx context.Context) (int64, error) {
		if err := w.WriteMessages(ctx, msgs...); err != nil {
			return 0, err
		}
		return kafkaBatch, nil
	})
	finish(&prod, n, d)
	if err != nil {
		return []Result{prod, fetch}, err
	}

	// Fetch every partition from offset 0 to its end.
	var got atomic.Int64
	start := time.Now()
	ferr := concurrently(kafkaPartitions, func(p int) error {
		return readPartition(ctx, kafkaPartition{broker: o.KafkaBrokers[0], topic: topic, p: p}, 2*o.Duration, &got)
	})
	finish(&fetch, got.Load(), time.Since(start))
	return []Result{prod, fetch}, ferr
}

// kafkaPartition is partition p of topic, read through broker.
type kafkaPartition struct {
	broker, topic string
	p             int
}

// readPartition reads partition kp from offset 0 to its last offset with
// ReadBatch (up to 10 MB per fetch), adding each record to got; it gives
// up after limit.
func readPartition(ctx context.Context, kp kafkaPartition, limit time.Duration, got *atomic.Int64) error {
	broker, topic, p := kp.broker, kp.topic, kp.p
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	conn, err := kafka.DialLeader(dctx, "tcp", broker, topic, p)
	cancel()
	if err != nil {
		return err
	}
	defer conn.Close()
	end, err := conn.ReadLastOffset()
	if err != nil {
		return err
	}
	if _, err := conn.Seek(0, kafka.SeekAbsolute); err != nil {
		return err
	}
	deadline := time.Now().Add(limit)
	var off int64
	for off < end {
		if ctx.Err() != nil || time.Now().After(deadline) {
			return ctx.Err()
		}
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		// minBytes 1: the broker answers as soon as it has any record.
		// A larger minimum made the partition's tail wait the fetch's
		// whole max wait (seconds) for bytes that never come, and the
		// loop measured that wait rather than the fetch rate.
		b := conn.ReadBatch(1, 10<<20)
		for {
			m, err := b.ReadMessage()
			if err != nil {
				break
			}
			off = m.Offset + 1
			got.Add(1)
		}
		if err := b.Close(); err != nil && !errors.Is(err, io.EOF) {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
	}
	return nil
}
