package eventstore

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/segmentio/kafka-go"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
)

// Modes of StoreState.Mode.
const (
	// StoreFresh: the store was created empty for this bench run (a
	// Kafka topic of its own); Records is what the run's earlier
	// scenarios left in it.
	StoreFresh = "fresh"
	// StoreKept: the store is the one the service was already using,
	// with whatever it held; Records declares its size.
	StoreKept = "kept"
)

// StoreState is what one engine's store held when a scenario of the
// bench began: every figure of the scenario is measured on that size.
type StoreState struct {
	// Engine is the service.
	Engine string `json:"engine"`
	// Mode is StoreFresh or StoreKept.
	Mode string `json:"mode"`
	// Store names what was counted: "topic eventstore-bench-…, partition
	// 0", "table eventstore.events".
	Store string `json:"store"`
	// Records is the store's size in events at the start: the partition's
	// records (high watermark minus log start offset) or the table's
	// rows; nil when it could not be read (Error says why).
	Records *int64 `json:"records"`
	// TotalBytes is the table's pg_total_relation_size (Postgres only).
	TotalBytes int64 `json:"total_bytes,omitempty"`
	// Error says why the size is missing.
	Error string `json:"error,omitempty"`
}

// storeStateTimeout bounds reading every engine's store size.
const storeStateTimeout = time.Minute

// storeStates reads every engine's store size at the start of a
// scenario: the events table of o.Schema through the Postgres side's
// server (pgURL), the partition of o.KafkaTopic for the Kafka side (or,
// when the topic is not known, the records a read of a stream never
// written scans: the whole partition). An engine that is not up, or
// whose store has no size the bench can read, has Error set.
func storeStates(ctx context.Context, o Options, engines []*Engine) []StoreState {
	ctx, cancel := context.WithTimeout(ctx, storeStateTimeout)
	defer cancel()
	var out []StoreState
	for _, e := range engines {
		st := StoreState{Engine: e.Name, Mode: StoreKept}
		if slices.Contains(o.FreshEngines, e.Name) {
			st.Mode = StoreFresh
		}
		var err error
		switch {
		case !e.Up:
			err = notMeasured(e)
		case e.Backend == "postgres":
			st.Store = "table " + o.Schema + ".events"
			var rows, size int64
			if rows, size, err = EventsTable(ctx, pgURL(o, e), o.Schema); err == nil {
				st.Records, st.TotalBytes = &rows, size
			}
		case e.Name == KeyedName && o.KeyedTopic != "":
			var n int64
			var parts int
			if n, parts, err = TopicAllRecords(ctx, o.KafkaBrokers, o.KeyedTopic); err == nil {
				st.Records = &n
				st.Store = fmt.Sprintf("topic %s, all %d partitions", o.KeyedTopic, parts)
			}
		case e.Name == KeyedName:
			st.Store = "one partition of the keyed side's topic (its name not known to the bench: -kafka-keyed-topic)"
			var n int64
			if n, err = scannedByEmptyRead(ctx, e); err == nil {
				st.Records = &n
			}
		case e.Backend == "kafka" && o.KafkaTopic != "":
			st.Store = "topic " + o.KafkaTopic + ", partition 0"
			if o.FreshTopic {
				st.Mode = StoreFresh
			}
			var n int64
			if n, err = TopicRecords(ctx, o.KafkaBrokers, o.KafkaTopic); err == nil {
				st.Records = &n
			}
		case e.Backend == "kafka":
			st.Store = "the service's topic (KAFKA_TOPIC not known to the bench), partition 0"
			var n int64
			if n, err = scannedByEmptyRead(ctx, e); err == nil {
				st.Records = &n
			}
		default:
			err = fmt.Errorf("the bench has no way to read %s's store size", e.Backend)
		}
		if err != nil {
			st.Error = err.Error()
		}
		out = append(out, st)
	}
	return out
}

// EventsTable returns the rows and total size of schema.events through
// the Postgres at dbURL.
func EventsTable(ctx context.Context, dbURL, schema string) (rows, bytes int64, err error) {
	if dbURL == "" {
		return 0, 0, errors.New("no Postgres URL (-database-url)")
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(cctx, dbURL)
	if err != nil {
		return 0, 0, err
	}
	defer conn.Close(context.Background())
	name := pgx.Identifier{schema, "events"}.Sanitize()
	err = conn.QueryRow(ctx, `SELECT count(*), pg_total_relation_size($1::regclass) FROM `+name, name).Scan(&rows, &bytes)
	if err != nil {
		return 0, 0, fmt.Errorf("%s: %w", name, err)
	}
	return rows, bytes, nil
}

// scannedByEmptyRead reads a stream never written from e: a service that
// scans its store to read a stream (Kafka) reports every record in
// records_scanned.
func scannedByEmptyRead(ctx context.Context, e *Engine) (int64, error) {
	var r readResult
	stream := "size-probe-" + runID()
	status, err := getJSON(ctx, e.URL+"/streams/"+stream+"?limit=1", &r)
	switch {
	case err != nil:
		return 0, err
	case status != http.StatusOK:
		return 0, fmt.Errorf("read of the unwritten stream %s: %d", stream, status)
	case r.RecordsScanned == nil:
		return 0, errors.New("the service reports no records_scanned")
	}
	return *r.RecordsScanned, nil
}

// BenchTopicPrefix starts the name of every topic BenchTopic names, so
// that a bench topic is never mistaken for a service's default one.
const BenchTopicPrefix = "eventstore-bench-"

// BenchTopic names a fresh topic for the bench run starting at now.
func BenchTopic(now time.Time) string {
	return BenchTopicPrefix + now.UTC().Format("20060102t150405z") + "-" + runID()
}

// kafkaClient is a kafka-go client of the first broker of brokers
// (comma-separated).
func kafkaClient(brokers string) (*kafka.Client, error) {
	b, _, _ := strings.Cut(brokers, ",")
	if b = strings.TrimSpace(b); b == "" {
		return nil, errors.New("no Kafka broker (-kafka-brokers)")
	}
	return &kafka.Client{Addr: kafka.TCP(b), Timeout: 10 * time.Second}, nil
}

// CreateTopic creates topic empty with one partition, as kafka-eventstore
// needs it; a topic that already exists is an error: it is not fresh.
func CreateTopic(ctx context.Context, brokers, topic string) error {
	return CreateTopicPartitions(ctx, brokers, topic, 1)
}

// CreateTopicPartitions is CreateTopic with partitions partitions, as
// the keyed side (KAFKA_PARTITIONS) needs it.
func CreateTopicPartitions(ctx context.Context, brokers, topic string, partitions int) error {
	c, err := kafkaClient(brokers)
	if err != nil {
		return err
	}
	resp, err := c.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{Topic: topic, NumPartitions: partitions, ReplicationFactor: 1}}})
	if err == nil {
		err = resp.Errors[topic]
	}
	if err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	// A new topic needs a moment before its partitions have a leader.
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, _, err := topicOffsets(ctx, brokers, topic)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// DeleteTopic deletes topic; only topics BenchTopic named are deleted.
func DeleteTopic(ctx context.Context, brokers, topic string) error {
	if !strings.HasPrefix(topic, BenchTopicPrefix) {
		return fmt.Errorf("delete topic %s: not a bench topic (%s…)", topic, BenchTopicPrefix)
	}
	c, err := kafkaClient(brokers)
	if err != nil {
		return err
	}
	resp, err := c.DeleteTopics(ctx, &kafka.DeleteTopicsRequest{Topics: []string{topic}})
	if err == nil {
		err = resp.Errors[topic]
	}
	if err != nil {
		return fmt.Errorf("delete topic %s: %w", topic, err)
	}
	return nil
}

// TopicRecords returns the records partition 0 of topic holds: its high
// watermark minus its log start offset.
func TopicRecords(ctx context.Context, brokers, topic string) (int64, error) {
	c, err := kafkaClient(brokers)
	if err != nil {
		return 0, err
	}
	resp, err := c.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{
		topic: {kafka.FirstOffsetOf(0), kafka.LastOffsetOf(0)}}})
	if err != nil {
		return 0, fmt.Errorf("list offsets of %s: %w", topic, err)
	}
	ps := resp.Topics[topic]
	if len(ps) != 1 || ps[0].Error != nil {
		return 0, fmt.Errorf("list offsets of %s: %v", topic, ps)
	}
	return ps[0].LastOffset - ps[0].FirstOffset, nil
}

// TopicAllRecords returns the records every partition of topic holds
// (high watermark minus log start offset, summed) and the partition
// count.
func TopicAllRecords(ctx context.Context, brokers, topic string) (records int64, partitions int, err error) {
	first, hwm, err := topicOffsets(ctx, brokers, topic)
	if err != nil {
		return 0, 0, err
	}
	for p := range hwm {
		records += hwm[p] - first[p]
	}
	return records, len(hwm), nil
}

// topicOffsets returns every partition's log start offset and high
// watermark, indexed by partition.
func topicOffsets(ctx context.Context, brokers, topic string) (first, hwm []int64, err error) {
	c, err := kafkaClient(brokers)
	if err != nil {
		return nil, nil, err
	}
	md, err := c.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return nil, nil, fmt.Errorf("metadata of %s: %w", topic, err)
	}
	if len(md.Topics) != 1 || md.Topics[0].Error != nil || len(md.Topics[0].Partitions) == 0 {
		return nil, nil, fmt.Errorf("metadata of %s: %v", topic, md.Topics)
	}
	n := len(md.Topics[0].Partitions)
	var reqs []kafka.OffsetRequest
	for p := range n {
		reqs = append(reqs, kafka.FirstOffsetOf(p), kafka.LastOffsetOf(p))
	}
	resp, err := c.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{topic: reqs}})
	if err != nil {
		return nil, nil, fmt.Errorf("list offsets of %s: %w", topic, err)
	}
	first, hwm = make([]int64, n), make([]int64, n)
	seen := 0
	for _, po := range resp.Topics[topic] {
		if po.Error != nil || po.Partition < 0 || po.Partition >= n {
			return nil, nil, fmt.Errorf("list offsets of %s: %v", topic, resp.Topics[topic])
		}
		first[po.Partition], hwm[po.Partition] = po.FirstOffset, po.LastOffset
		seen++
	}
	if seen != n {
		return nil, nil, fmt.Errorf("list offsets of %s: %d of %d partitions answered", topic, seen, n)
	}
	return first, hwm, nil
}

// keyedCursor is the keyed side's subscription cursor at the end of its
// topic now: "<P>:<high watermark of each partition>", the position a
// subscription resumes from to receive what is appended next
// (docs/eventstore.md, *A keyed Kafka store*).
func keyedCursor(ctx context.Context, o Options) (string, error) {
	if o.KeyedTopic == "" {
		return "", errors.New("the keyed side's topic is not known to the bench (-kafka-keyed-topic): its subscription starts only from a cursor over every partition, read from Kafka")
	}
	_, hwm, err := topicOffsets(ctx, o.KafkaBrokers, o.KeyedTopic)
	if err != nil {
		return "", err
	}
	parts := []string{strconv.Itoa(len(hwm))}
	for _, h := range hwm {
		parts = append(parts, strconv.FormatInt(h, 10))
	}
	return strings.Join(parts, ":"), nil
}

// recordStart records the engines' store sizes in run, and, when no
// Before hook declared the run's starting state, the Postgres side's
// events table (the stack's, never a -compare-bindirs server's) as the
// run's driver.StartState (mode keep: the event store keeps its
// history).
func recordStart(ctx context.Context, run *driver.Run, o Options, engines []*Engine) {
	states := storeStates(ctx, o, engines)
	run.Settings["store_state"] = states
	if run.StartState != nil {
		return
	}
	for _, s := range states {
		if s.Store != "table "+o.Schema+".events" || IsCompareName(s.Engine) {
			continue
		}
		st := &driver.StartState{Mode: driver.StateKeep, Tables: []driver.TableState{}, Error: s.Error}
		if s.Records != nil {
			st.Tables = append(st.Tables, driver.TableState{Schema: o.Schema, Table: "events", Rows: *s.Records, TotalBytes: s.TotalBytes})
		}
		run.StartState = st
		break
	}
}
