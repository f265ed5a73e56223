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
	"syscall"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/backoff"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/eventstore"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/stats"
)

// store is the Kafka eventstore.Backend over the partitions of one topic:
// one in the reference's design, KAFKA_PARTITIONS in the keyed one. It is
// safe for concurrent use: kafka.Client is, and the store keeps no other
// state. close releases the client's idle connections.
type store struct {
	client    *kafka.Client
	transport *kafka.Transport
	cfg       Config
	logger    *slog.Logger
	// stats, if set, counts records_skipped; build sets it once the
	// service exists, before the handlers are mounted.
	stats *stats.Recorder
	// maxMessageBytes is the topic's max.message.bytes, read at start:
	// the largest record batch the broker accepts.
	maxMessageBytes int
	// conns are the connections reads fetch through, one pool per
	// partition (fetch.go says why not through client).
	conns []*connPool
	// partitions are 0 … KAFKA_PARTITIONS-1, what the balancer picks from.
	partitions []int
	// listing bounds the ListOffsets calls in flight (maxListing).
	listing chan struct{}
}

// maxListing bounds the ListOffsets calls (bounds) in flight at once.
// kafka.Transport dials a connection for each request that finds none
// idle and keeps it for its IdleTimeout: two thousand subscribers
// arriving together made two thousand connections, each with its
// goroutine, held about 35 s after the subscribers left. A call takes a
// millisecond or two, so a few at once serve a burst of subscribers
// within moments, through a few connections.
const maxListing = 4

// SkippedCounter counts the records of the topic that are not event
// envelopes (written by something other than this service) and that
// reads and subscriptions skip.
const SkippedCounter = "records_skipped"

// envelope is a record's value; the key is the stream id.
type envelope struct {
	Type     string          `json:"type"`
	Data     json.RawMessage `json:"data"`
	Metadata json.RawMessage `json:"metadata"`
}

// openStore creates the topic with KAFKA_PARTITIONS partitions if it is
// missing, refuses one with another count, and waits until its partitions
// have a leader.
func openStore(ctx context.Context, cfg Config, logger *slog.Logger) (*store, error) {
	tr := &kafka.Transport{DialTimeout: cfg.BackendTimeout, IdleTimeout: 30 * time.Second}
	s := &store{client: &kafka.Client{Addr: kafka.TCP(cfg.Brokers...), Timeout: cfg.BackendTimeout, Transport: tr}, transport: tr, cfg: cfg, logger: logger,
		listing: make(chan struct{}, maxListing)}
	for p := range cfg.Partitions {
		s.partitions = append(s.partitions, p)
		s.conns = append(s.conns, newConnPool(cfg.Brokers, cfg.Topic, p, cfg.BackendTimeout, maxIdleConns))
	}
	cctx, cancel := context.WithTimeout(ctx, cfg.BackendTimeout)
	resp, err := s.client.CreateTopics(cctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{
		Topic: cfg.Topic, NumPartitions: cfg.Partitions, ReplicationFactor: cfg.ReplicationFactor,
	}}})
	cancel()
	if err != nil {
		s.close()
		return nil, fmt.Errorf("kafka unreachable (KAFKA_BROKERS): %w", err)
	}
	if err := resp.Errors[cfg.Topic]; err != nil && !errors.Is(err, kafka.TopicAlreadyExists) {
		s.close()
		return nil, fmt.Errorf("create topic %s (KAFKA_TOPIC): %w", cfg.Topic, err)
	}
	// A new topic needs a moment before its partition has a leader.
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := s.checkTopic(ctx)
		if err == nil {
			if s.maxMessageBytes, err = s.topicMaxMessageBytes(ctx); err != nil {
				s.close()
				return nil, err
			}
			return s, nil
		}
		var fatal *fatalTopicError
		if errors.As(err, &fatal) || time.Now().After(deadline) || ctx.Err() != nil {
			s.close()
			return nil, err
		}
		_ = backoff.Sleep(ctx, 200*time.Millisecond) // the loop's check sees ctx end
	}
}

type fatalTopicError struct{ msg string }

func (e *fatalTopicError) Error() string { return e.msg }

func (s *store) checkTopic(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.BackendTimeout)
	defer cancel()
	md, err := s.client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{s.cfg.Topic}})
	if err != nil {
		return fmt.Errorf("topic %s metadata: %w", s.cfg.Topic, err)
	}
	if len(md.Topics) != 1 || md.Topics[0].Error != nil {
		return fmt.Errorf("topic %s is not ready: %v", s.cfg.Topic, md.Topics)
	}
	if n := len(md.Topics[0].Partitions); n != s.cfg.Partitions {
		why := "a stream's partition is its id's hash modulo the count, so on a topic of another count reads would look where appends did not write"
		if s.cfg.Partitions == 1 {
			why = "the reference design needs exactly one, because only within one partition is the offset a global order"
		}
		return &fatalTopicError{fmt.Sprintf("topic %s (KAFKA_TOPIC) has %d partitions and KAFKA_PARTITIONS is %d: %s", s.cfg.Topic, n, s.cfg.Partitions, why)}
	}
	_, _, err = s.boundsAll(ctx)
	return err
}

// maxIdleConns is how many idle fetch connections the store keeps: as
// many as the bench's concurrent readers, so a steady load dials none.
const maxIdleConns = 16

func (s *store) close() {
	s.transport.CloseIdleConnections()
	for _, c := range s.conns {
		c.close()
	}
}

func (s *store) ping(ctx context.Context) error {
	_, _, err := s.boundsAll(ctx)
	return err
}

// keyed reports the keyed design (more than one partition).
func (s *store) keyed() bool { return len(s.partitions) > 1 }

// partitionOf is the partition of stream's records: murmur2 of the stream
// id, positive, modulo the partition count. That is Kafka's default
// partitioner (the Java client's, and librdkafka's "murmur2"), through
// kafka-go's port of it, so records any standard producer keys by stream
// id land where this service reads. (kafka-go's Hash balancer is FNV-1a,
// sarama's: a Java producer would disagree with it.)
func (s *store) partitionOf(stream string) int {
	return kafka.Murmur2Balancer{Consistent: true}.Balance(kafka.Message{Key: []byte(stream)}, s.partitions...)
}

// position is an event's position: its offset in the reference's design,
// "<partition>:<offset>" in the keyed one.
func (s *store) position(partition int, offset int64) string {
	if !s.keyed() {
		return strconv.FormatInt(offset, 10)
	}
	return strconv.Itoa(partition) + ":" + strconv.FormatInt(offset, 10)
}

// topicMaxMessageBytes reads the topic's effective max.message.bytes (its
// own setting, else the broker's message.max.bytes) with DescribeConfigs.
func (s *store) topicMaxMessageBytes(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.BackendTimeout)
	defer cancel()
	resp, err := s.client.DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{{
		ResourceType: kafka.ResourceTypeTopic, ResourceName: s.cfg.Topic, ConfigNames: []string{"max.message.bytes"}}}})
	if err != nil {
		return 0, fmt.Errorf("describe configs of topic %s (KAFKA_TOPIC): %w", s.cfg.Topic, err)
	}
	for _, r := range resp.Resources {
		if r.Error != nil {
			return 0, fmt.Errorf("describe configs of topic %s (KAFKA_TOPIC): %w", s.cfg.Topic, r.Error)
		}
		for _, c := range r.ConfigEntries {
			if c.ConfigName == "max.message.bytes" {
				n, err := strconv.Atoi(c.ConfigValue)
				if err != nil || n <= recordBatchOverhead {
					return 0, fmt.Errorf("topic %s has max.message.bytes %q: not a usable size", s.cfg.Topic, c.ConfigValue)
				}
				return n, nil
			}
		}
	}
	return 0, fmt.Errorf("topic %s: the broker did not report max.message.bytes", s.cfg.Topic)
}

// recordBatchOverhead is the fixed part of a v2 record batch (base offset
// 8, length 4, leader epoch 4, magic 1, crc 4, attributes 2, last offset
// delta 4, base and max timestamp 16, producer id 8, epoch 2, base
// sequence 4, record count 4).
const recordBatchOverhead = 61

// varintLen is the size of n as a zigzag varint (Kafka's record fields).
func varintLen(n int64) int {
	u := uint64((n << 1) ^ (n >> 63))
	l := 1
	for u >= 0x80 {
		u >>= 7
		l++
	}
	return l
}

// batchSize is the exact size of the uncompressed v2 record batch that
// one produce of records (all with one timestamp, no headers) sends: what
// the broker compares with max.message.bytes.
func batchSize(records []kafka.Record, keyLen int, valueLens []int) int {
	n := recordBatchOverhead
	for i := range records {
		body := 1 + varintLen(0) + varintLen(int64(i)) + // attributes, timestamp and offset deltas
			varintLen(int64(keyLen)) + keyLen + varintLen(int64(valueLens[i])) + valueLens[i] +
			varintLen(0) // no headers
		n += varintLen(int64(body)) + body
	}
	return n
}

// Capabilities implements eventstore.Backend.
func (s *store) Capabilities() eventstore.Capabilities {
	return eventstore.Capabilities{ConditionalAppend: false, ServerSideStreamRead: false, PushSubscription: false}
}

// Append implements eventstore.Backend. The records of one append go in one
// produce request, hence one record batch, which the partition appends
// atomically. There is no version check to make: Kafka's produce request
// has no expected-version parameter, and checking in the service (read,
// then produce) would race with every other producer.
func (s *store) Append(ctx context.Context, stream string, expected eventstore.ExpectedVersion, events []eventstore.EventData) (eventstore.AppendResult, error) {
	if !expected.IsAny() {
		return eventstore.AppendResult{}, fmt.Errorf(`expected_version %s needs the conditional_append capability, which Kafka lacks: its producer API has no expected-version parameter, so this service accepts only "any" and refuses the condition rather than ignore it: %w`, expected, httpapi.ErrUnsupported)
	}
	now := time.Now()
	records := make([]kafka.Record, len(events))
	lens := make([]int, len(events))
	for i, e := range events {
		// Without HTML escapes: json.Marshal would store each <, > and &
		// as a 6-byte escape, a record six times the event.
		v, err := httpapi.MarshalJSON(envelope{Type: e.Type, Data: e.Data, Metadata: e.Metadata})
		if err != nil {
			return eventstore.AppendResult{}, httpapi.BadRequest("events[%d]: %v", i, err)
		}
		records[i] = kafka.Record{Time: now, Key: kafka.NewBytes([]byte(stream)), Value: kafka.NewBytes(v)}
		lens[i] = len(v)
	}
	// The broker would refuse the batch whole ("Message Size Too Large"),
	// at every retry: a 413, not a 503 that invites them.
	if n := batchSize(records, len(stream), lens); n > s.maxMessageBytes {
		return eventstore.AppendResult{}, &httpapi.Error{Status: http.StatusRequestEntityTooLarge,
			Message: fmt.Sprintf("the append's %d event(s) make a Kafka record batch of %d bytes; topic %s accepts at most %d (max.message.bytes), and an append is one batch: nothing was written",
				len(events), n, s.cfg.Topic, s.maxMessageBytes),
			Fields: map[string]any{"max_message_bytes": s.maxMessageBytes}}
	}
	p := s.partitionOf(stream)
	if err := ctx.Err(); err != nil {
		// Nothing was sent: the request's time ran out before the produce.
		return eventstore.AppendResult{}, fmt.Errorf("kafka produce not started: %w (%w)", httpapi.ErrNotRecorded, err)
	}
	resp, err := s.client.Produce(ctx, &kafka.ProduceRequest{
		Topic: s.cfg.Topic, Partition: p, RequiredAcks: kafka.RequireAll, Records: kafka.NewRecordReader(records...),
	})
	if err == nil {
		err = resp.Error
	}
	if errors.Is(err, kafka.MessageSizeTooLarge) {
		// Backstop: the topic's limit changed since the start.
		return eventstore.AppendResult{}, &httpapi.Error{Status: http.StatusRequestEntityTooLarge,
			Message: fmt.Sprintf("kafka refused the append's record batch as too large (%v); nothing was written", err), Cause: err}
	}
	if err != nil {
		if produceNotSent(err) {
			return eventstore.AppendResult{}, fmt.Errorf("kafka produce: %w (%w)", httpapi.ErrNotRecorded, err)
		}
		return eventstore.AppendResult{}, fmt.Errorf("kafka produce: %w (%w)", httpapi.ErrUnavailable, err)
	}
	last := resp.BaseOffset + int64(len(events)) - 1
	return eventstore.AppendResult{Position: s.position(p, last), GlobalPosition: last}, nil
}

// refusedBeforeAppend are the produce errors with which the partition
// leader refuses a batch before appending it to its log: it is not the
// leader (or there is none), it does not know the partition, the batch
// is invalid, or too few replicas are in sync to accept acks=all
// (NOT_ENOUGH_REPLICAS; NOT_ENOUGH_REPLICAS_AFTER_APPEND, which comes
// after the append, is not among them).
var refusedBeforeAppend = []kafka.Error{
	kafka.NotLeaderForPartition, kafka.LeaderNotAvailable, kafka.UnknownTopicOrPartition,
	kafka.NotEnoughReplicas, kafka.InvalidRecord, kafka.InvalidMessage, kafka.InvalidTopic,
}

// produceNotSent reports whether a failed produce's error proves that
// nothing was appended: the connection to the broker was refused, or
// the client found no broker for the partition (the request was never
// sent), or the leader answered with an error it gives
// before appending (refusedBeforeAppend). A timeout, a connection lost
// after the request went out, or any other error leaves the outcome
// unknown: the broker may have appended the batch.
func produceNotSent(err error) bool {
	// The client's metadata names no broker for the partition (after a
	// refused connection it knows none): the request was never sent.
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, protocol.ErrNoTopic) || errors.Is(err, protocol.ErrNoPartition) {
		return true
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Op == "dial" {
		return true
	}
	for _, code := range refusedBeforeAppend {
		if errors.Is(err, code) {
			return true
		}
	}
	return false
}

// bounds returns one partition's log start offset and high watermark.
func (s *store) bounds(ctx context.Context, partition int) (first, hwm int64, err error) {
	f, h, err := s.listOffsets(ctx, []int{partition})
	if err != nil {
		return 0, 0, err
	}
	return f[0], h[0], nil
}

// boundsAll returns every partition's log start offset and high
// watermark, indexed by partition, in one request.
func (s *store) boundsAll(ctx context.Context) (first, hwm []int64, err error) {
	return s.listOffsets(ctx, s.partitions)
}

func (s *store) listOffsets(ctx context.Context, partitions []int) (first, hwm []int64, err error) {
	select {
	case s.listing <- struct{}{}:
	case <-ctx.Done():
		return nil, nil, fmt.Errorf("kafka list offsets: %w (%w)", httpapi.ErrUnavailable, ctx.Err())
	}
	defer func() { <-s.listing }()
	var reqs []kafka.OffsetRequest
	for _, p := range partitions {
		reqs = append(reqs, kafka.FirstOffsetOf(p), kafka.LastOffsetOf(p))
	}
	resp, err := s.client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{s.cfg.Topic: reqs}})
	if err != nil {
		return nil, nil, fmt.Errorf("kafka list offsets: %w (%w)", httpapi.ErrUnavailable, err)
	}
	ps := resp.Topics[s.cfg.Topic]
	if len(ps) != len(partitions) {
		return nil, nil, fmt.Errorf("kafka list offsets of %s: %w (%v)", s.cfg.Topic, httpapi.ErrUnavailable, ps)
	}
	first, hwm = make([]int64, len(partitions)), make([]int64, len(partitions))
	for i, want := range partitions {
		found := false
		for _, po := range ps {
			if po.Partition != want {
				continue
			}
			if po.Error != nil {
				return nil, nil, fmt.Errorf("kafka list offsets of %s/%d: %w (%w)", s.cfg.Topic, want, httpapi.ErrUnavailable, po.Error)
			}
			first[i], hwm[i], found = po.FirstOffset, po.LastOffset, true
		}
		if !found {
			return nil, nil, fmt.Errorf("kafka list offsets of %s: %w (no answer for partition %d: %v)", s.cfg.Topic, httpapi.ErrUnavailable, want, ps)
		}
	}
	return first, hwm, nil
}

// record is one consumed record; key and value are copies.
type record struct {
	offset int64
	time   time.Time
	key    []byte
	value  []byte
}

// event decodes rec. A record that is not an event envelope (not a JSON
// object, or without a type or data) is logged, counted and reported with
// ok false: one foreign record must not break every read and subscription.
func (s *store) event(rec record, partition int, stream string, version *int64) (eventstore.RecordedEvent, bool) {
	var env envelope
	err := json.Unmarshal(rec.value, &env)
	if err == nil && (env.Type == "" || len(env.Data) == 0 || string(env.Data) == "null") {
		err = errors.New("no type or no data")
	}
	if err != nil {
		s.logger.Warn("skipping a record that is not an event envelope", "topic", s.cfg.Topic, "partition", partition, "offset", rec.offset, "key", string(rec.key), "err", err)
		if s.stats != nil {
			s.stats.Inc(SkippedCounter)
		}
		return eventstore.RecordedEvent{}, false
	}
	if len(env.Metadata) == 0 || string(env.Metadata) == "null" {
		env.Metadata = json.RawMessage("{}")
	}
	return eventstore.RecordedEvent{
		Stream: stream, Version: version, Position: s.position(partition, rec.offset), GlobalPosition: rec.offset,
		Type: env.Type, Data: env.Data, Metadata: env.Metadata, CreatedAt: rec.time.UTC(),
	}, true
}

// Read implements eventstore.Backend. Kafka has no index by key: the service
// consumes the stream's whole partition (the only one in the reference's
// design; the one its id hashes to in the keyed design) from its log
// start to the high watermark taken at the start, and keeps the stream's
// records, at most eventstore.MaxReadBytes of them. A stream version is
// the count of the stream's records before it (from the log start: if
// retention deleted old records, versions shift). records_scanned counts
// every record consumed.
func (s *store) Read(ctx context.Context, stream string, from int64, limit int) (eventstore.ReadResult, error) {
	p := s.partitionOf(stream)
	first, hwm, err := s.bounds(ctx, p)
	if err != nil {
		return eventstore.ReadResult{}, err
	}
	res := eventstore.ReadResult{Stream: stream, Events: []eventstore.RecordedEvent{}}
	if first >= hwm {
		var zero int64
		res.RecordsScanned = &zero
		return res, nil
	}
	conn, err := s.conns[p].get(ctx)
	if err != nil {
		return res, err
	}
	healthy := false
	defer func() { s.conns[p].put(conn, healthy) }()
	var scanned, count int64
	page := eventstore.Page{Max: eventstore.MaxReadBytes}
	full := false
	for off := first; off < hwm; {
		recs, _, err := s.fetchFrom(ctx, conn, off, 0)
		if err != nil {
			return res, err
		}
		if len(recs) == 0 {
			return res, fmt.Errorf("kafka fetch at offset %d below the high watermark %d returned nothing: %w", off, hwm, httpapi.ErrUnavailable)
		}
		for _, r := range recs {
			if r.offset >= hwm {
				break
			}
			off = r.offset + 1
			scanned++
			if string(r.key) != stream {
				continue
			}
			// A skipped record takes no version: decode before counting.
			v := count
			e, ok := s.event(r, p, stream, &v)
			if !ok {
				continue
			}
			count++
			// Past the page's bound the scan goes on only to count the
			// stream's last version.
			if v >= from && !full && len(res.Events) < limit {
				if full = !page.Fits(e); !full {
					res.Events = append(res.Events, e)
				}
			}
		}
	}
	healthy = true
	if count > 0 {
		last := count - 1
		res.LastVersion = &last
	}
	res.RecordsScanned = &scanned
	return res, nil
}

// Subscribe implements eventstore.Backend: fetch from the offset after from
// up to the high watermark seen at the start (catch-up), then long-poll
// fetches (KAFKA_FETCH_MAX_WAIT) for live records. Kafka pushes nothing:
// a live event waits for the next fetch answer. Versions are null: a
// reader resumed mid-partition cannot count a stream's earlier records.
// A failed fetch is retried: the subscription survives a broker restart.
// A from past the partition's end is a 404 (not a position of this
// topic); one whose next records retention deleted (below the log start
// offset) is the contract's 410: the events after it are gone.
func (s *store) Subscribe(ctx context.Context, from string, sub eventstore.Subscriber) error {
	if s.keyed() {
		return s.subscribeKeyed(ctx, from, sub)
	}
	bctx, cancel := context.WithTimeout(ctx, s.cfg.BackendTimeout)
	first, target, err := s.bounds(bctx, 0)
	cancel()
	if err != nil {
		return err
	}
	off := first
	if from != "" {
		p, err := strconv.ParseInt(from, 10, 64)
		if err != nil || p < 0 {
			return fmt.Errorf("from %q is not a position of this service (want a partition offset, as events and appends report it): %w", from, httpapi.ErrNotFound)
		}
		if p+1 > target {
			return fmt.Errorf("from %d is beyond the end of the partition (next offset %d): not a position of this topic: %w", p, target, httpapi.ErrNotFound)
		}
		if p+1 < first {
			return httpapi.Errorf(http.StatusGone, "from %d was deleted by retention (log start offset %d): events after it are gone", p, first)
		}
		off = p + 1
	}
	// A subscription holds its own connection for its life: its long
	// polls would otherwise keep pool connections from the reads.
	var conn *kafka.Conn
	defer func() {
		if conn != nil {
			_ = conn.Close()
		}
	}()
	caughtUp := false
	for {
		if !caughtUp && off >= target {
			caughtUp = true
			if err := sub.CaughtUp(); err != nil {
				return err
			}
		}
		wait := 100 * time.Millisecond
		if caughtUp {
			wait = s.cfg.LongPoll
		}
		var recs []record
		recs, conn, err = s.subscriptionFetch(ctx, 0, conn, off, wait)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, kafka.OffsetOutOfRange) {
				return fmt.Errorf("subscription at offset %d: %w", off, err)
			}
			s.logger.Warn("subscription fetch failed; retrying", "err", err)
			if err := backoff.Sleep(ctx, time.Second); err != nil {
				return err
			}
			continue
		}
		for _, r := range recs {
			if e, ok := s.event(r, 0, string(r.key), nil); ok {
				if err := sub.Event(e); err != nil {
					return err
				}
			}
			off = r.offset + 1
		}
	}
}

var _ eventstore.Backend = (*store)(nil)
