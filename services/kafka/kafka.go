package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/backoff"
	logc "github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/log"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/stats"
)

// wireEvent is the Kafka record's value (its key is the event's key).
type wireEvent struct {
	ID        string          `json:"id"`
	Type      string          `json:"type"`
	Key       string          `json:"key"`
	Payload   json.RawMessage `json:"payload"`
	CreatedAt time.Time       `json:"created_at"`
}

// backend is the dual write: INSERT into messages (committed), then
// produce to the topic with acks=all. Safe for concurrent use.
type backend struct {
	cfg    Config
	store  *logc.Records
	client *kafkago.Client
	cons   *consumer
	groups *groupManager
	logger *slog.Logger
	// current is the producer (KAFKA_PRODUCER); a test swaps it for one
	// aimed at a dead broker.
	current atomic.Pointer[producerSlot]
	// probe is the transport of checkBroker's metadata requests.
	probe *kafkago.Transport
	// maxMessageBytes is the topic's max.message.bytes, read from the
	// broker at start (at most maxBatchBytes): the largest record batch
	// it accepts.
	maxMessageBytes int
	// down is set by a failed produce and cleared by the next produce or
	// probe that reaches the broker (checkBroker); lastProbe is the unix
	// nanos at which the last probe started.
	down      atomic.Bool
	lastProbe atomic.Int64
}

// producerSlot holds the backend's producer in an atomic.Pointer.
type producerSlot struct{ producer }

// producing returns the backend's producer.
func (b *backend) producing() producer { return b.current.Load().producer }

// swapProducer makes p the backend's producer and returns the one it
// replaces.
func (b *backend) swapProducer(p producer) producer {
	if old := b.current.Swap(&producerSlot{p}); old != nil {
		return old.producer
	}
	return nil
}

// newProducer returns a producer of KAFKA_PRODUCER's kind for brokers.
func (b *backend) newProducer(brokers []string) (producer, error) {
	return newProducer(b.cfg, brokers, b.maxMessageBytes, b.logger)
}

// Probing a broker a failed produce left suspect.
const (
	// probeTimeout bounds one probe (a metadata request).
	probeTimeout = 500 * time.Millisecond
	// probeEvery spaces the probes while the broker stays down: requests
	// in between are refused at once, without a dial each.
	probeEvery = 200 * time.Millisecond
)

// checkBroker refuses a write, before anything is recorded, while the
// broker is known to be down: after a failed produce, each write first
// asks the broker for the topic's metadata (at most one probe per
// probeEvery, each within probeTimeout) and is answered 503 with nothing
// written if it gets no answer. Without it, every write in an outage
// committed its row (never delivered: the dual-write gap) and then waited
// up to KAFKA_WRITE_TIMEOUT: 1,276 requests over 1 s took up to 7.7 s.
func (b *backend) checkBroker(ctx context.Context) error {
	if !b.down.Load() {
		return nil
	}
	refuse := func(err error) error {
		return fmt.Errorf("kafka broker unreachable since a produce failed (%v): %w", err, httpapi.ErrNotRecorded)
	}
	now := time.Now().UnixNano()
	last := b.lastProbe.Load()
	if now-last < int64(probeEvery) || !b.lastProbe.CompareAndSwap(last, now) {
		return refuse(errors.New("probed less than 200ms ago"))
	}
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	c := &kafkago.Client{Addr: kafkago.TCP(b.producing().brokers()...), Transport: b.probe, Timeout: probeTimeout}
	meta, err := c.Metadata(pctx, &kafkago.MetadataRequest{Topics: []string{b.cfg.Topic}})
	if err != nil {
		return refuse(err)
	}
	if err := writable(meta, b.cfg.Topic); err != nil {
		return refuse(err)
	}
	b.down.Store(false)
	return nil
}

// writable reports whether metadata shows every partition of topic with a
// leader. A broker restarting after a crash answers metadata requests
// before it leads its partitions again: a probe that took its answer alone
// for "up" let writes through that then waited the whole write timeout
// (173 of them for 5 s each in the kafka-broker-restart experiment).
func writable(meta *kafkago.MetadataResponse, topic string) error {
	for _, t := range meta.Topics {
		if t.Name != topic {
			continue
		}
		if t.Error != nil {
			return fmt.Errorf("topic %s: %w", topic, t.Error)
		}
		if len(t.Partitions) == 0 {
			return fmt.Errorf("topic %s has no partitions yet", topic)
		}
		for _, p := range t.Partitions {
			if p.Error != nil {
				return fmt.Errorf("topic %s partition %d: %w", topic, p.ID, p.Error)
			}
			if p.Leader.Host == "" {
				return fmt.Errorf("topic %s partition %d has no leader yet", topic, p.ID)
			}
		}
		return nil
	}
	return fmt.Errorf("topic %s is not in the broker's metadata", topic)
}

// requiredAcks is KAFKA_ACKS as kafka-go's RequiredAcks.
func (c Config) requiredAcks() kafkago.RequiredAcks {
	if c.Acks == AcksLeader {
		return kafkago.RequireOne
	}
	return kafkago.RequireAll
}

// recordBatchOverhead is the fixed part of a v2 record batch (base offset
// 8, length 4, leader epoch 4, magic 1, crc 4, attributes 2, last offset
// delta 4, base and max timestamp 16, producer id 8, epoch 2, base
// sequence 4, record count 4): what the broker counts against
// max.message.bytes besides the records.
const recordBatchOverhead = 61

// messageOverhead is what kafka-go's Writer counts per message besides
// key and value (Message.totalSize: 4+1+1 + 4 + 4 + 8, and 1 for an empty
// header array). A v2 record's real overhead (length, attributes,
// timestamp and offset deltas, key and value lengths, header count as
// varints) is at most 14 bytes for records under 2 MiB in a batch spanning
// under 8 s, so a batch kafka-go sizes at n bytes is at most
// recordBatchOverhead+n bytes on the wire (uncompressed). The kafka-go
// producer's Writer.BatchBytes is max.message.bytes less
// recordBatchOverhead.
const messageOverhead = 23

// maxCreatedAt is the longest created_at JSON can carry (nanoseconds and
// a numeric offset): the size check encodes it in place of the time
// Postgres will assign, so the check bounds the record that will be
// produced.
var maxCreatedAt = time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.FixedZone("", -(12*3600+59*60)))

// checkSizes refuses, with 413 and before anything is written, events
// whose record the producer or the broker would refuse: otherwise the row
// would be committed, the produce refused ("Message Size Too Large"), and
// the row left in Postgres, never delivered (one more at each retry). An
// event is refused when a record batch holding its record alone, counted
// as the producer counts it (producer.batchSize), would be larger than
// the topic's max.message.bytes. It returns each event's value up to its
// created_at (wireHead), which the produce completes: each event is
// encoded once.
func (b *backend) checkSizes(events []logc.NewEvent) ([][]byte, error) {
	p := b.producing()
	heads := make([][]byte, len(events))
	for i, e := range events {
		h, err := wireHead(e)
		if err != nil {
			return nil, err
		}
		heads[i] = h
		if n := p.batchSize(len(e.Key), wireSize(h)); n > b.maxMessageBytes {
			return nil, &httpapi.Error{Status: http.StatusRequestEntityTooLarge,
				Message: fmt.Sprintf("event %d (%s) would take a Kafka record batch of up to %d bytes as the producer (%s) counts it; topic %s accepts record batches of at most %d bytes (max.message.bytes); nothing was written",
					i, e.ID, n, b.cfg.Producer, b.cfg.Topic, b.maxMessageBytes),
				Fields: map[string]any{"max_message_bytes": b.maxMessageBytes}}
		}
	}
	return heads, nil
}

// describeTopic is topicConfig, retried (for 30 s at most) while the
// broker it asks does not know the topic yet: a topic just created is
// known to the brokers once each has read it from the metadata log, and
// one that was cut off a moment ago may lag (seen in kafka-leader-cut: a
// start failed with UNKNOWN_TOPIC_OR_PARTITION right after the
// creation).
func describeTopic(ctx context.Context, cfg Config, client *kafkago.Client) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		n, err := topicConfig(ctx, cfg, client)
		if err == nil || !errors.Is(err, kafkago.UnknownTopicOrPartition) || ctx.Err() != nil {
			return n, err
		}
		select {
		case <-ctx.Done():
			return n, err
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// topicConfig reads the topic's effective max.message.bytes (its own
// setting, else the broker's message.max.bytes) and min.insync.replicas
// with DescribeConfigs. When cfg.MinInsyncReplicas is set, a topic whose
// min.insync.replicas differs is refused: the topic existed before, and
// the durability KAFKA_MIN_INSYNC_REPLICAS asks for would silently not
// hold.
func topicConfig(ctx context.Context, cfg Config, client *kafkago.Client) (maxMessageBytes int, err error) {
	topic := cfg.Topic
	ctx, cancel := context.WithTimeout(ctx, client.Timeout)
	defer cancel()
	resp, err := client.DescribeConfigs(ctx, &kafkago.DescribeConfigsRequest{Resources: []kafkago.DescribeConfigRequestResource{{
		ResourceType: kafkago.ResourceTypeTopic, ResourceName: topic, ConfigNames: []string{"max.message.bytes", "min.insync.replicas"}}}})
	if err != nil {
		return 0, fmt.Errorf("describe configs of topic %s (KAFKA_TOPIC): %w", topic, err)
	}
	minISR := ""
	for _, r := range resp.Resources {
		if r.Error != nil {
			return 0, fmt.Errorf("describe configs of topic %s (KAFKA_TOPIC): %w", topic, r.Error)
		}
		for _, c := range r.ConfigEntries {
			switch c.ConfigName {
			case "max.message.bytes":
				n, err := strconv.Atoi(c.ConfigValue)
				if err != nil || n < minMaxMessageBytes {
					return 0, fmt.Errorf("topic %s has max.message.bytes %q: not a usable size (at least %d)", topic, c.ConfigValue, minMaxMessageBytes)
				}
				maxMessageBytes = min(n, maxBatchBytes)
			case "min.insync.replicas":
				minISR = c.ConfigValue
			}
		}
	}
	if maxMessageBytes == 0 {
		return 0, fmt.Errorf("topic %s: the broker did not report max.message.bytes", topic)
	}
	if want := strconv.Itoa(cfg.MinInsyncReplicas); cfg.MinInsyncReplicas > 0 && minISR != want {
		return 0, fmt.Errorf("topic %s exists with min.insync.replicas %q, KAFKA_MIN_INSYNC_REPLICAS asks for %s: "+
			"alter the topic (kafka-configs --alter --add-config min.insync.replicas=%s) or set KAFKA_MIN_INSYNC_REPLICAS=0 to accept the topic's", topic, minISR, want, want)
	}
	return maxMessageBytes, nil
}

// Append implements logc.Backend: the dual write. When the produce fails
// the Postgres row is already committed: it stays, and is never delivered
// (the dual-write gap); the 503 says so and names the ids. An event too
// large for the topic is refused (413) before the INSERT.
func (b *backend) Append(ctx context.Context, events []logc.NewEvent) ([]logc.Created, error) {
	heads, err := b.checkSizes(events)
	if err != nil {
		return nil, err
	}
	if err := b.checkBroker(ctx); err != nil {
		return nil, err
	}
	created, err := b.store.Insert(ctx, events)
	if err != nil {
		return nil, err
	}
	records := make([]record, len(events))
	ids := make([]string, len(events))
	for i, e := range events {
		records[i] = record{key: []byte(e.Key), value: appendCreatedAt(heads[i], created[i].CreatedAt)}
		ids[i] = e.ID
	}
	wctx, cancel := context.WithTimeout(ctx, b.cfg.WriteTimeout)
	defer cancel()
	if err := b.producing().produce(wctx, records); err != nil {
		b.down.Store(true)
		return nil, produceError(err, ids)
	}
	b.down.Store(false)
	return created, nil
}

// produceError is the 503 for a failed produce. The rows are committed in
// Postgres either way; what the answer can say about Kafka depends on how
// the produce failed:
//   - the producer gave up on the records (kafka-go: its attempts spent;
//     franz-go: a record failed when that was safe, i.e. before it was
//     sent or after the broker answered): the events it did not write are
//     never delivered (the dual-write gap). "ids" names them,
//     "ids_in_kafka" those of a partly written batch that made it
//     (recordErrors); "delivery" is "never".
//   - the write timeout (or the request) ended first, or a producer
//     without idempotence (KAFKA_ACKS=1 on franz-go) gave up on a request
//     the broker may have taken (errMayBeWritten): the producer keeps the
//     records and sends them when the broker answers, or they are there
//     already, so the events may still be delivered after this 503 (the
//     kafka-broker-restart experiment counted most of them delivered).
//     "delivery" is "unknown", and a client that retries may write an
//     event twice.
//
// Both are 503s of kind "unknown" (httpapi.KindUnknown): the events are
// recorded in Postgres, and a produce kafka-go gave up on after a
// timed-out attempt may still have been written by the broker, so the
// client cannot retry without risking a duplicate. A write checkBroker
// refuses before the INSERT is of kind "not_recorded".
func produceError(err error, ids []string) error {
	missing, written := ids, []string{}
	var rerrs recordErrors
	if errors.As(err, &rerrs) && len(rerrs) == len(ids) {
		missing = []string{}
		for i, rerr := range rerrs {
			if rerr != nil {
				missing = append(missing, ids[i])
			} else {
				written = append(written, ids[i])
			}
		}
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || errors.Is(err, errMayBeWritten) {
		return &httpapi.Error{
			Status: 503,
			Kind:   httpapi.KindUnknown,
			Message: fmt.Sprintf("kafka produce did not complete (%v); %d of the %d event(s) are committed in Postgres and may still reach Kafka: "+
				"the producer keeps the records and sends them when the broker answers, so they may be delivered after this answer "+
				"(a retry may write them twice)", err, len(missing), len(ids)),
			Fields: map[string]any{"ids": missing, "ids_in_kafka": written, "in_postgres": true, "in_kafka": false, "delivery": "unknown"},
			Cause:  err,
		}
	}
	return &httpapi.Error{
		Status: 503,
		Kind:   httpapi.KindUnknown,
		Message: fmt.Sprintf("kafka produce failed (%v); %d of the %d event(s) are committed in Postgres but not in Kafka, "+
			"so they will not be delivered (the dual-write gap)", err, len(missing), len(ids)),
		Fields: map[string]any{"ids": missing, "ids_in_kafka": written, "in_postgres": true, "in_kafka": false, "delivery": "never"},
		Cause:  err,
	}
}

// Consumer implements logc.Backend: the group's committed offsets against
// the partitions' ends.
func (b *backend) Consumer(ctx context.Context) (logc.ConsumerStatus, error) {
	o, err := b.offsets(ctx, b.cfg.Group)
	if err != nil {
		return logc.ConsumerStatus{}, err
	}
	return logc.ConsumerStatus{Backend: "kafka", Running: b.cons.running.Load(), LagUnit: "records",
		Position: strconv.FormatInt(o.position, 10), Lag: o.lag,
		Kafka: &logc.KafkaStatus{Topic: b.cfg.Topic, Group: b.cfg.Group, Partitions: o.partitions}}, nil
}

// groupOffsets is a Kafka consumer group's committed offsets against the
// partitions' ends.
type groupOffsets struct {
	partitions []logc.PartitionStatus
	// position is the committed offsets summed; lag the records between
	// them and the ends.
	position, lag int64
}

// partitions returns the topic's partition ids.
func (b *backend) partitions(ctx context.Context) ([]int, error) {
	meta, err := b.client.Metadata(ctx, &kafkago.MetadataRequest{Addr: kafkago.TCP(b.cfg.Brokers...), Topics: []string{b.cfg.Topic}})
	if err != nil || len(meta.Topics) != 1 || meta.Topics[0].Error != nil {
		return nil, fmt.Errorf("kafka metadata: %v %w", err, httpapi.ErrUnavailable)
	}
	var parts []int
	for _, p := range meta.Topics[0].Partitions {
		parts = append(parts, p.ID)
	}
	return parts, nil
}

// ends returns each partition's first (first true) or end offset.
func (b *backend) ends(ctx context.Context, parts []int, first bool) (map[int]int64, error) {
	var reqs []kafkago.OffsetRequest
	for _, p := range parts {
		if first {
			reqs = append(reqs, kafkago.FirstOffsetOf(p))
		} else {
			reqs = append(reqs, kafkago.LastOffsetOf(p))
		}
	}
	res, err := b.client.ListOffsets(ctx, &kafkago.ListOffsetsRequest{Addr: kafkago.TCP(b.cfg.Brokers...), Topics: map[string][]kafkago.OffsetRequest{b.cfg.Topic: reqs}})
	if err != nil {
		return nil, fmt.Errorf("kafka list offsets: %v %w", err, httpapi.ErrUnavailable)
	}
	out := map[int]int64{}
	for _, p := range res.Topics[b.cfg.Topic] {
		if p.Error != nil {
			return nil, fmt.Errorf("kafka list offsets, partition %d: %v %w", p.Partition, p.Error, httpapi.ErrUnavailable)
		}
		if first {
			out[p.Partition] = p.FirstOffset
		} else {
			out[p.Partition] = p.LastOffset
		}
	}
	return out, nil
}

// offsets reads the group's committed offsets and the partitions' ends.
func (b *backend) offsets(ctx context.Context, groupID string) (groupOffsets, error) {
	parts, err := b.partitions(ctx)
	if err != nil {
		return groupOffsets{}, err
	}
	committed, err := b.client.OffsetFetch(ctx, &kafkago.OffsetFetchRequest{Addr: kafkago.TCP(b.cfg.Brokers...), GroupID: groupID, Topics: map[string][]int{b.cfg.Topic: parts}})
	if err != nil {
		return groupOffsets{}, fmt.Errorf("kafka offset fetch: %v %w", err, httpapi.ErrUnavailable)
	}
	end, err := b.ends(ctx, parts, false)
	if err != nil {
		return groupOffsets{}, err
	}
	var o groupOffsets
	for _, p := range committed.Topics[b.cfg.Topic] {
		ps := logc.PartitionStatus{Partition: p.Partition, Committed: p.CommittedOffset, End: end[p.Partition]}
		o.partitions = append(o.partitions, ps)
		c := max(p.CommittedOffset, 0)
		o.position += c
		o.lag += max(ps.End-c, 0)
	}
	return o, nil
}

// ensureTopic creates the topic if missing and waits until its partitions
// have leaders.
func ensureTopic(ctx context.Context, cfg Config, client *kafkago.Client, logger *slog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	addr := kafkago.TCP(cfg.Brokers...)
	tc := kafkago.TopicConfig{Topic: cfg.Topic, NumPartitions: cfg.Partitions, ReplicationFactor: cfg.ReplicationFactor}
	if cfg.MinInsyncReplicas > 0 {
		tc.ConfigEntries = []kafkago.ConfigEntry{{ConfigName: "min.insync.replicas", ConfigValue: strconv.Itoa(cfg.MinInsyncReplicas)}}
	}
	res, err := client.CreateTopics(ctx, &kafkago.CreateTopicsRequest{Addr: addr, Topics: []kafkago.TopicConfig{tc}})
	if err != nil {
		return fmt.Errorf("create topic %s (KAFKA_BROKERS): %w", cfg.Topic, err)
	}
	switch terr := res.Errors[cfg.Topic]; {
	case terr == nil:
		logger.Info("created topic", "topic", cfg.Topic, "partitions", cfg.Partitions, "replication_factor", cfg.ReplicationFactor, "min_insync_replicas", cfg.MinInsyncReplicas)
	case errors.Is(terr, kafkago.TopicAlreadyExists):
	default:
		return fmt.Errorf("create topic %s (KAFKA_TOPIC): %w", cfg.Topic, terr)
	}
	for {
		meta, err := client.Metadata(ctx, &kafkago.MetadataRequest{Addr: addr, Topics: []string{cfg.Topic}})
		if err == nil && len(meta.Topics) == 1 && meta.Topics[0].Error == nil && len(meta.Topics[0].Partitions) > 0 {
			ready := true
			for _, p := range meta.Topics[0].Partitions {
				ready = ready && p.Leader.Host != ""
			}
			if ready {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("topic %s has no leaders yet: %v", cfg.Topic, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// consumer reads the topic in a consumer group and hands each batch's
// offsets to the reader once the Deliverer recorded it; the reader commits
// them every KAFKA_COMMIT_INTERVAL (0: after each batch, synchronously)
// and when it stops: at-least-once, duplicates absorbed. Start once; Stop
// is safe twice.
type consumer struct {
	cfg     Config
	deliver *logc.Deliverer
	stats   *stats.Recorder
	logger  *slog.Logger
	reader  *kafkago.Reader

	running atomic.Bool
	cancel  context.CancelFunc // stops fetching
	giveUp  context.CancelFunc // abandons the batch in hand (Stop's deadline)
	done    chan struct{}
	once    sync.Once
}

// newReader returns the reader of the Kafka consumer group groupID
// (KAFKA_GROUP for the default group, kafkaGroup's id for another). Its
// errors (a failed commit, a failed join) are logged as warnings.
//
// Offsets are committed every cfg.CommitInterval (kafka-go's
// CommitInterval; 0: synchronously in CommitMessages). With an interval,
// CommitMessages only stashes the offsets; kafka-go v0.4.51 commits the
// stash at each tick, and when the group's generation ends, which a
// rebalance and Close both do, with that generation's id before the
// member rejoins or leaves (Reader.Close returns after that commit and
// the LeaveGroup). A tick whose commit fails keeps the stash for the
// next; the commit at a generation's end (3 attempts, 1 on Close) that
// fails drops it: those records are delivered again, to this or another
// member, and deduplicated through the deliveries table.
func newReader(cfg Config, groupID string, logger *slog.Logger) *kafkago.Reader {
	errLog := logger.With("kafka_group", groupID)
	return kafkago.NewReader(kafkago.ReaderConfig{
		Brokers: cfg.Brokers,
		GroupID: groupID,
		Topic:   cfg.Topic,
		Dialer:  &kafkago.Dialer{Timeout: cfg.DialTimeout, ClientID: info.Service, DualStack: true},
		// A fetch returns as soon as one record is there.
		MinBytes: 1,
		MaxBytes: 10 << 20,
		MaxWait:  500 * time.Millisecond,
		// A new group starts at the beginning: nothing written before the
		// first join is skipped.
		StartOffset: kafkago.FirstOffset,
		// Commit what was handled every KAFKA_COMMIT_INTERVAL, as the
		// Postgres side confirms its slot once a second.
		CommitInterval:    cfg.CommitInterval,
		HeartbeatInterval: time.Second,
		SessionTimeout:    10 * time.Second,
		RebalanceTimeout:  10 * time.Second,
		ReadBackoffMin:    10 * time.Millisecond,
		ReadBackoffMax:    500 * time.Millisecond,
		ErrorLogger: kafkago.LoggerFunc(func(format string, args ...any) {
			errLog.Warn("kafka-go reader: " + strings.TrimSpace(fmt.Sprintf(format, args...)))
		}),
	})
}

// Start begins consuming in the background.
func (c *consumer) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	abort, giveUp := context.WithCancel(context.Background())
	c.cancel, c.giveUp, c.done = cancel, giveUp, make(chan struct{})
	c.running.Store(true)
	msgs := make(chan kafkago.Message, 4*logc.MaxBatch)
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(msgs)
		b := backoff.Backoff{Initial: 100 * time.Millisecond, Max: 2 * time.Second}
		for {
			m, err := c.reader.FetchMessage(ctx)
			if err != nil {
				if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
					return
				}
				c.stats.Inc(logc.StatReconnects)
				d := b.Next()
				c.logger.Warn("kafka fetch failed; retrying", "err", err, "in", d)
				if backoff.Sleep(ctx, d) != nil {
					return
				}
				continue
			}
			b.Reset()
			select {
			case msgs <- m:
			case <-ctx.Done():
				return
			}
		}
	})
	go func() {
		defer close(c.done)
		defer c.running.Store(false)
		c.handle(abort, msgs)
		// handle returns early only when Stop gave up on the batch in
		// hand; the fetcher is cancelled by then (Stop cancelled it
		// first), and draining lets it exit even if it is blocked on a
		// full msgs.
		for range msgs {
		}
		wg.Wait()
	}()
}

// handle records batches until msgs closes; each batch is recorded, then
// its offsets are handed to the reader to commit (at once with
// KAFKA_COMMIT_INTERVAL=0, else at the next interval or on Close). While
// Postgres is unreachable it retries the batch in hand without limit: a
// consumer never drops out on its own, however long the outage. It gives
// up (without committing, so the batch is redelivered) only when abort
// ends, which Stop does when its own deadline passes.
func (c *consumer) handle(abort context.Context, msgs <-chan kafkago.Message) {
	batch := make([]kafkago.Message, 0, c.cfg.MaxBatch)
	for m := range msgs {
		batch = append(batch[:0], m)
	drain:
		for len(batch) < c.cfg.MaxBatch {
			select {
			case m, ok := <-msgs:
				if !ok {
					break drain
				}
				batch = append(batch, m)
			default:
				break drain
			}
		}
		deliveries := make([]logc.Delivery, 0, len(batch))
		for _, m := range batch {
			id, at, err := decodeDelivery(m.Value)
			if err != nil || id == "" {
				c.logger.Error("skipping a record that is not an event", "partition", m.Partition, "offset", m.Offset, "err", err)
				continue
			}
			deliveries = append(deliveries, logc.Delivery{ID: id, CreatedAt: at})
		}
		// Record, retrying while Postgres is unreachable: a batch is
		// committed only once recorded.
		b := backoff.Backoff{Initial: 50 * time.Millisecond, Max: 2 * time.Second}
		if err := backoff.Retry(abort, &b, func() error { return c.deliver.Deliver(abort, deliveries) },
			func(err error, d time.Duration) {
				c.logger.Warn("recording deliveries failed; retrying", "err", err, "backoff", d)
			}); err != nil {
			c.logger.Error("stopping: giving up on a batch without committing it; it will be redelivered", "err", err)
			return
		}
		// With an interval this only stashes the offsets (it waits only
		// while no generation takes them, between two).
		ctx, cancel := context.WithTimeout(context.Background(), c.cfg.WriteTimeout)
		if err := c.reader.CommitMessages(ctx, batch...); err != nil {
			c.logger.Warn("offset commit failed; the batch will be redelivered", "err", err)
		}
		cancel()
	}
}

// Stop stops fetching, finishes the batch in hand, commits every batch
// handled (Reader.Close commits the stash of an interval before it leaves
// the group), and leaves the group. When ctx ends first it gives up on
// the batch (uncommitted, so it is redelivered) and returns ctx's error.
func (c *consumer) Stop(ctx context.Context) error {
	var err error
	c.once.Do(func() {
		c.cancel()
		select {
		case <-c.done:
		case <-ctx.Done():
			err = fmt.Errorf("consumer did not stop: %w", ctx.Err())
			c.giveUp()
			<-c.done
		}
		c.giveUp()
		if cerr := c.reader.Close(); cerr != nil {
			err = errors.Join(err, cerr)
		}
	})
	return err
}

// PutGroup implements logc.GroupBackend.
func (b *backend) PutGroup(ctx context.Context, name, from string) (bool, error) {
	return b.groups.put(ctx, name, from)
}

// Groups implements logc.GroupBackend.
func (b *backend) Groups(ctx context.Context) (logc.GroupList, error) { return b.groups.list(ctx) }

// DeleteGroup implements logc.GroupBackend.
func (b *backend) DeleteGroup(ctx context.Context, name string) error {
	return b.groups.remove(ctx, name)
}
