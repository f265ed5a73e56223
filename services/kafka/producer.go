package main

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"

	logc "github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/log"
)

// The producer hands a request's records to Kafka. Two implementations
// sit behind one small interface, chosen by KAFKA_PRODUCER: franz-go's
// client (the default) and kafka-go's Writer, kept only so that the
// before and after of the change to franz-go can be measured side by side
// in one load-driver run (docs/log.md, "Producer tuning (kafka)").

// record is one Kafka record: the event's key and its value (wire.go).
type record struct {
	key, value []byte
}

// producer writes records to the topic. Safe for concurrent use.
type producer interface {
	// produce writes records in one call and returns once each is
	// acknowledged (KAFKA_ACKS) or failed, or when ctx ends first (the
	// records may then still be written: the producer keeps them). A
	// failure of some records only is a recordErrors.
	produce(ctx context.Context, records []record) error
	// batchSize is how many bytes a record batch holding only a record of
	// key and value bytes takes, as this producer counts it against the
	// topic's max.message.bytes; it bounds the batch's size on the wire,
	// which is what the broker compares with max.message.bytes.
	batchSize(key, value int) int
	// brokers are the bootstrap servers it produces to: checkBroker
	// probes them.
	brokers() []string
	// Close sends what is still buffered, until ctx ends, and closes the
	// connections.
	Close(ctx context.Context) error
}

// The producers (KAFKA_PRODUCER).
const (
	// ProducerFranz is franz-go's kgo.Client, one ProduceSync per
	// request: concurrent requests' records share record batches and
	// produce requests (one per broker, every partition's batch in it).
	ProducerFranz = "franz-go"
	// ProducerKafkaGo is kafka-go's Writer, the producer before franz-go:
	// each request is its own produce request per partition. Kept only to
	// measure the change side by side; not for production use.
	ProducerKafkaGo = "kafka-go"
)

// maxBatchBytes caps the record batch size the producers are given: one
// produce request carries at most Kafka's socket.request.max.bytes (100
// MiB by default, franz-go's BrokerMaxWriteBytes default too), so a
// batch must leave room in it for the request's own framing (about 300
// bytes: header, client id, topic name, array lengths). A topic whose
// max.message.bytes is larger is produced to in batches of at most this.
const maxBatchBytes = 100<<20 - 1<<10

// minMaxMessageBytes is the smallest max.message.bytes the service
// accepts: franz-go's ProducerBatchMaxBytes refuses less than 512.
const minMaxMessageBytes = 512

// recordErrors is a produce that failed for some of its records: the
// error of each record, in the order given, nil for those written.
type recordErrors []error

// Error names how many records failed and the first error.
func (e recordErrors) Error() string {
	n, first := 0, error(nil)
	for _, err := range e {
		if err != nil {
			if n == 0 {
				first = err
			}
			n++
		}
	}
	return fmt.Sprintf("%d of %d records not written: %v", n, len(e), first)
}

// Unwrap returns the records' errors, for errors.Is and errors.As.
func (e recordErrors) Unwrap() []error {
	var errs []error
	for _, err := range e {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// errMayBeWritten marks a produce failure after which the records may
// still be in Kafka: a non-idempotent producer (KAFKA_ACKS=1) that gave
// up on a request the broker may have taken.
var errMayBeWritten = errors.New("the records may have been written")

// newProducer returns cfg.Producer's producer for brokers, its record
// batches bounded by maxMessageBytes (backend.maxMessageBytes).
func newProducer(cfg Config, brokers []string, maxMessageBytes int, logger *slog.Logger) (producer, error) {
	if cfg.Producer == ProducerKafkaGo {
		return newKafkaGoProducer(cfg, brokers, maxMessageBytes), nil
	}
	return newFranzProducer(cfg, brokers, maxMessageBytes, logger)
}

// franzProducer is the franz-go producer (see docs/log.md, "Producer
// tuning (kafka)").
type franzProducer struct {
	client     *kgo.Client
	addrs      []string
	timeout    time.Duration
	idempotent bool
	// written counts what the client wrote (an atomic add per request and
	// per batch): TestBatchIsFewProduceRequests reads it.
	written franzCounts
}

// franzPartitioner puts a keyed record on the partition kafka-go's
// Hash balancer chose before: FNV-1a 32 of the key, as an int32, modulo
// the partition count, negated when negative (Sarama's hashPartitioner,
// which kafka-go copies). kgo.SaramaCompatHasher computes exactly that;
// kgo.SaramaHasher does not on 64-bit platforms (it takes the modulo of
// the unsigned hash). Proven over many keys by
// TestFranzPartitionerMatchesKafkaGoHash. Every record has a key (an
// empty one included); a nil key would go to a sticky partition.
func franzPartitioner() kgo.Partitioner {
	return kgo.StickyKeyPartitioner(kgo.SaramaCompatHasher(fnv32a))
}

// metadataMinAge is the least time between two metadata requests of
// the franz-go producer (franz-go's default is 5 s).
const metadataMinAge = 250 * time.Millisecond

// retryBackoff is the franz-go producer's wait before retry number
// tries (1 for the first): 100 ms doubling to at most 1 s, with up to
// 20% less at random so that many requests do not retry in step.
func retryBackoff(tries int) time.Duration {
	d := 100 * time.Millisecond
	for i := 1; i < tries && d < time.Second; i++ {
		d *= 2
	}
	d = min(d, time.Second)
	return d - time.Duration(rand.Int64N(int64(d)/5+1))
}

// fnv32a is the 32-bit FNV-1a hash of b.
func fnv32a(b []byte) uint32 {
	h := fnv.New32a()
	_, _ = h.Write(b)
	return h.Sum32()
}

// newFranzProducer returns the franz-go producer. Nothing is dialled
// until the first produce.
func newFranzProducer(cfg Config, brokers []string, maxMessageBytes int, logger *slog.Logger) (*franzProducer, error) {
	p := &franzProducer{addrs: brokers, timeout: cfg.WriteTimeout, idempotent: cfg.Acks != AcksLeader}
	opts := []kgo.Opt{
		kgo.SeedBrokers(brokers...),
		kgo.ClientID(info.Service),
		kgo.DialTimeout(cfg.DialTimeout),
		kgo.DefaultProduceTopic(cfg.Topic),
		// Same key, same partition as kafka-go's Hash: per-key order, and
		// the keys of a topic written before stay where they were.
		kgo.RecordPartitioner(franzPartitioner()),
		kgo.ProducerLinger(cfg.BatchTimeout),
		// The largest batch the topic takes: a record too large for it
		// alone fails at once (kerr.MessageTooLarge), but checkSizes
		// refuses such events first (413).
		kgo.ProducerBatchMaxBytes(int32(maxMessageBytes)),
		// Uncompressed: small JSON events at bench concurrency gain
		// little, and the 413 bound stays exact (franz-go's default is
		// snappy).
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		// The broker's wait for the in-sync replicas, and how long a
		// record may wait in the client before it is failed (when that
		// is safe: see produce).
		kgo.ProduceRequestTimeout(cfg.WriteTimeout),
		kgo.RecordDeliveryTimeout(cfg.WriteTimeout),
		// Back in seconds, not tens of seconds, after a broker restart:
		// franz-go's defaults (a retry backoff growing to 5 s, metadata
		// refreshed at most every 5 s) left writes failing for 4-5 s
		// after the broker led its partitions again. The backoff is the
		// Java producer's default (retry.backoff.ms 100 growing to
		// retry.backoff.max.ms 1000), which also refreshes metadata on an
		// error after that backoff; franz-go's refresh waits 250 ms.
		kgo.RetryBackoffFn(retryBackoff),
		kgo.MetadataMinAge(metadataMinAge),
		kgo.WithHooks(&p.written),
		kgo.WithLogger(kgoLogger{logger}),
	}
	if p.idempotent {
		// acks=all with the idempotent producer (franz-go's default): a
		// retried request is deduplicated by the broker.
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	} else {
		// franz-go refuses acks=1 with idempotence, which requires
		// acks=all; without it, one produce request in flight per broker
		// (franz-go's default then), so that a retry cannot reorder a
		// partition's records.
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	}
	client, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafka producer (franz-go): %w", err)
	}
	p.client = client
	return p, nil
}

// produce hands the records to franz-go in one ProduceSync and waits for
// its results or ctx, whichever comes first. The records carry a context
// of their own, with ctx's deadline but not its cancellation: franz-go
// fails a whole partition's buffered records when the first one's
// context ends, so a client that hangs up must not fail the records of
// other requests that share its batch. When ctx ends first, the records
// stay with franz-go, which fails them at their deadline when that is
// safe (not yet sent, or answered) and otherwise, idempotent, delivers
// them once the broker answers (the 503 then says "delivery": "unknown").
func (p *franzProducer) produce(ctx context.Context, records []record) error {
	rs := make([]kgo.Record, len(records))
	ptrs := make([]*kgo.Record, len(records))
	for i, r := range records {
		rs[i] = kgo.Record{Key: r.key, Value: r.value}
		ptrs[i] = &rs[i]
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(p.timeout)
	}
	rctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
	done := make(chan kgo.ProduceResults, 1)
	go func() {
		defer cancel()
		done <- p.client.ProduceSync(rctx, ptrs...)
	}()
	var results kgo.ProduceResults
	select {
	case results = <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if results.FirstErr() == nil {
		return nil
	}
	// ProduceSync's results come in the order the promises ran; name
	// each record by its place in the call.
	at := make(map[*kgo.Record]int, len(ptrs))
	for i, r := range ptrs {
		at[r] = i
	}
	errs := make(recordErrors, len(records))
	for _, res := range results {
		errs[at[res.Record]] = res.Err
	}
	if !p.idempotent {
		return fmt.Errorf("%w (acks=1, not idempotent): %w", errMayBeWritten, errs)
	}
	return errs
}

// batchSize is franz-go's count for a batch of one record
// (recordBatchOverhead's 61 bytes of v2 batch header, the 4-byte length
// prefix franz-go counts until it knows the broker's produce version, and
// the record): the bound it compares with ProducerBatchMaxBytes.
func (p *franzProducer) batchSize(key, value int) int {
	return franzBatchOverhead + v2RecordSize(key, value)
}

// franzBatchOverhead is what franz-go counts for an empty record batch
// before its first produce response tells it the broker's produce
// version: its recordBatchOverhead, the v2 batch header (61 bytes, see
// recordBatchOverhead) and the 4-byte array length of the request's
// records field. With the version known (v9 and later, flexible, as on
// Kafka 4) it counts 62 (a 1-byte length), so the service's bound, which
// must hold in both states, is 3 bytes below what franz-go then takes,
// and 4 below what the broker takes (61 + the record).
const franzBatchOverhead = recordBatchOverhead + 4

// v2RecordSize is the size on the wire of a v2 record of key and value
// bytes, no headers, first in its batch (timestamp and offset deltas 0),
// its length prefix included: what franz-go's recordNumbers.wireLength
// counts.
func v2RecordSize(key, value int) int {
	body := 1 + // attributes
		1 + 1 + // timestamp delta, offset delta: 0, one varint byte each
		varintLen(key) + key +
		varintLen(value) + value +
		1 // header count 0
	return varintLen(body) + body
}

// varintLen is the length of n >= 0 as a zigzag varint (Kafka's varint
// and varlong).
func varintLen(n int) int {
	u := uint64(n) << 1
	l := 1
	for u >= 0x80 {
		u >>= 7
		l++
	}
	return l
}

func (p *franzProducer) brokers() []string { return p.addrs }

// Close flushes what is buffered until ctx ends, then closes the client
// (records still buffered then fail with kgo.ErrClientClosed).
func (p *franzProducer) Close(ctx context.Context) error {
	err := p.client.Flush(ctx)
	p.client.Close()
	if err != nil {
		return fmt.Errorf("kafka producer: flush: %w", err)
	}
	return nil
}

// franzCounts counts the produce requests, record batches and records
// franz-go wrote (kgo hooks).
type franzCounts struct {
	requests, batches, records atomic.Int64
}

// produceKey is Kafka's API key of Produce requests.
const produceKey = 0

// OnBrokerWrite counts each produce request written (kgo.HookBrokerWrite).
func (c *franzCounts) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == produceKey && err == nil {
		c.requests.Add(1)
	}
}

// OnProduceBatchWritten counts each record batch a broker acknowledged,
// and its records (kgo.HookProduceBatchWritten).
func (c *franzCounts) OnProduceBatchWritten(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.ProduceBatchMetrics) {
	c.batches.Add(1)
	c.records.Add(int64(m.NumRecords))
}

// kgoLogger passes franz-go's warnings and errors to the service's log.
type kgoLogger struct{ l *slog.Logger }

// Level is kgo.LogLevelWarn: franz-go's info and debug lines are per
// request.
func (kgoLogger) Level() kgo.LogLevel { return kgo.LogLevelWarn }

// Log logs msg with its key-value pairs.
func (k kgoLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	l := slog.LevelWarn
	if level == kgo.LogLevelError {
		l = slog.LevelError
	}
	k.l.Log(context.Background(), l, "franz-go: "+msg, keyvals...)
}

// kafkaGoProducer is kafka-go's Writer, the producer before franz-go,
// selectable with KAFKA_PRODUCER=kafka-go for the side-by-side
// measurement only.
type kafkaGoProducer struct {
	w     *kafkago.Writer
	addrs []string
}

// newKafkaGoProducer returns the kafka-go producer as it was configured
// before franz-go (docs/log.md).
func newKafkaGoProducer(cfg Config, brokers []string, maxMessageBytes int) *kafkaGoProducer {
	return &kafkaGoProducer{w: &kafkago.Writer{
		Addr:  kafkago.TCP(brokers...),
		Topic: cfg.Topic,
		// Same key, same partition: per-key order.
		Balancer:     &kafkago.Hash{},
		RequiredAcks: cfg.requiredAcks(),
		BatchSize:    logc.MaxBatch,
		// Every batch kafka-go builds, a single event's included, fits
		// the topic's max.message.bytes.
		BatchBytes:   int64(maxMessageBytes - recordBatchOverhead),
		BatchTimeout: cfg.BatchTimeout,
		MaxAttempts:  3,
		WriteTimeout: cfg.WriteTimeout,
		ReadTimeout:  cfg.WriteTimeout,
		Transport:    &kafkago.Transport{DialTimeout: cfg.DialTimeout, ClientID: info.Service},
	}, addrs: brokers}
}

// produce writes the records in one WriteMessages call. A batch kafka-go
// gave up on part of is a recordErrors.
func (p *kafkaGoProducer) produce(ctx context.Context, records []record) error {
	msgs := make([]kafkago.Message, len(records))
	for i, r := range records {
		msgs[i] = kafkago.Message{Key: r.key, Value: r.value}
	}
	err := p.w.WriteMessages(ctx, msgs...)
	var werrs kafkago.WriteErrors
	if errors.As(err, &werrs) && len(werrs) == len(records) {
		return recordErrors(werrs)
	}
	return err
}

// batchSize is recordBatchOverhead plus what kafka-go's Writer counts per
// message (messageOverhead besides key and value).
func (p *kafkaGoProducer) batchSize(key, value int) int {
	return recordBatchOverhead + messageOverhead + key + value
}

func (p *kafkaGoProducer) brokers() []string { return p.addrs }

// Close flushes and closes the Writer (bounded by its write timeout, not
// by ctx).
func (p *kafkaGoProducer) Close(context.Context) error { return p.w.Close() }
