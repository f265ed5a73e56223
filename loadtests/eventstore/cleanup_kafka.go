package eventstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
)

// The Kafka cleanup policies, the names of their points.
const (
	// KafkaRetention lowers the topic's retention.ms to one second after
	// the writes: the broker deletes every closed segment older than
	// that, whoever's events it holds.
	KafkaRetention = "retention"
	// KafkaCompaction appends a tombstone (the customer's key, no value)
	// and turns the topic to cleanup.policy=compact: the log cleaner keeps
	// only the last record of every key.
	KafkaCompaction = "compaction"
)

// KafkaSide is the side name of the Kafka cleanup points: the bench
// drives Kafka itself (the service neither deletes nor configures).
const KafkaSide = "kafka"

// kafkaTopicConfig is the cleanup topics' configuration at creation:
// small segments, so that a cleanup has closed segments to act on; no
// delay between a segment's deletion and its files' removal; and, for
// compaction later, every record cleanable at once.
var kafkaTopicConfig = []kafka.ConfigEntry{
	{ConfigName: "segment.bytes", ConfigValue: "1048576"},
	{ConfigName: "file.delete.delay.ms", ConfigValue: "0"},
	{ConfigName: "retention.ms", ConfigValue: "-1"},
	{ConfigName: "min.cleanable.dirty.ratio", ConfigValue: "0.01"},
	{ConfigName: "min.compaction.lag.ms", ConfigValue: "0"},
	{ConfigName: "delete.retention.ms", ConfigValue: "0"},
}

// kafkaView is what a reader of the topic sees: the records of the
// customer's stream and of the others that are events, the tombstones,
// and the partition's bounds.
type kafkaView struct {
	customer, others, tombstones int
	first, hwm                   int64
}

// kafkaCleanup runs both policies at once, each on a topic of its own,
// and returns their points.
func kafkaCleanup(ctx context.Context, o CleanupOptions, id string, log io.Writer) []driver.Point {
	policies := []string{KafkaRetention, KafkaCompaction}
	points := make([]driver.Point, len(policies))
	var wg sync.WaitGroup
	for i, policy := range policies {
		points[i] = driver.Point{Scenario: CleanupKafkaPoint, Name: policy, Sides: []string{KafkaSide}}
		wg.Go(func() {
			_ = driver.RunPoint(ctx, &points[i], 1, func(ctx context.Context, _ string, _ int) (*driver.SideResult, error) {
				m := map[driver.Metric]float64{}
				err := kafkaPolicy(ctx, o, id, policy, cleanupOut{m: m, log: log})
				return &driver.SideResult{Metrics: m}, err
			})
		})
	}
	wg.Wait()
	return points
}

// kafkaPolicy writes the customer's stream (o.StreamEvents events) and the
// others' to a topic of its own, applies policy, and polls the log
// directory's size and a reader's view until the space is returned (the
// directory at half its size or less) or the wait bound, recording into
// out.
func kafkaPolicy(ctx context.Context, o CleanupOptions, id, policy string, out cleanupOut) error {
	m, log := out.m, out.log
	c, err := kafkaClient(o.KafkaBrokers)
	if err != nil {
		return err
	}
	broker, _, _ := strings.Cut(o.KafkaBrokers, ",")
	topic := BenchTopicPrefix + "cleanup-" + id + "-" + policy
	resp, err := c.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{
		Topic: topic, NumPartitions: 1, ReplicationFactor: 1, ConfigEntries: kafkaTopicConfig}}})
	if err == nil {
		err = resp.Errors[topic]
	}
	if err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	defer func() {
		if err := DeleteTopic(context.Background(), o.KafkaBrokers, topic); err != nil {
			fmt.Fprintf(log, "eventstore-cleanup: %v\n", err)
		}
	}()
	dir, interval, err := kafkaLogDir(ctx, c, o.KafkaLogDir, topic)
	if err != nil {
		return err
	}
	wait := o.KafkaWait
	if wait == 0 {
		wait = interval + 30*time.Second
	}
	m[MetricRetentionCheckIntervalS] = interval.Seconds()
	customer := "customer-" + id
	ct := cleanupTopic{c: c, broker: broker, topic: topic, dir: dir, customer: customer, id: id}
	t0 := time.Now()
	if err := ct.produce(ctx, o); err != nil {
		return err
	}
	m[MetricFillSeconds] = round2(time.Since(t0).Seconds())
	v0, err := readView(ctx, broker, topic, customer)
	if err != nil {
		return err
	}
	if v0.customer != o.StreamEvents {
		return fmt.Errorf("the topic holds %d of the customer's %d events after the writes", v0.customer, o.StreamEvents)
	}
	size0, err := dirBytes(dir)
	if err != nil {
		return err
	}
	m[MetricCustomerBefore], m[MetricOthersBefore], m[MetricDirMBBefore] = float64(v0.customer), float64(v0.others), bytesMB(size0)
	if err := ct.apply(ctx, policy); err != nil {
		return err
	}
	w, err := ct.watch(ctx, o.StreamEvents, v0, size0, wait)
	if err != nil {
		return err
	}
	last, partial, firstChange, returned, size, applied := w.last, w.partial, w.firstChange, w.returned, w.size, w.applied
	m[MetricDirMBAfter] = bytesMB(size)
	m[MetricCustomerAfter], m[MetricOthersAfter], m[MetricTombstonesAfter] = float64(last.customer), float64(last.others), float64(last.tombstones)
	m[MetricLogStartAfter] = float64(last.first)
	m[MetricPartialViews] = float64(partial)
	m[MetricWaitedSeconds] = round2(time.Since(applied).Seconds())
	if firstChange >= 0 {
		m[MetricFirstChangeSeconds] = round2(firstChange)
	}
	fmt.Fprintf(log, "eventstore-cleanup kafka %s: log dir %.1f → %.1f MB after %.0f s; the customer's events visible %d → %d, the others' %d → %d\n",
		policy, m[MetricDirMBBefore], m[MetricDirMBAfter], m[MetricWaitedSeconds], v0.customer, last.customer, v0.others, last.others)
	if returned < 0 {
		return fmt.Errorf("the log directory still held %.1f of %.1f MB after %s (the broker checks retention every %s: log.retention.check.interval.ms)",
			bytesMB(size), bytesMB(size0), wait.Round(time.Second), interval)
	}
	m[MetricSpaceReturnedSeconds] = round2(returned)
	return nil
}

// cleanupTopic is the topic of one cleanup policy: the client and a
// broker it reaches it by, its name and log directory, the customer
// whose stream the policy removes, and the run's id.
type cleanupTopic struct {
	c      *kafka.Client
	broker string
	topic  string
	dir    string
	// customer is the stream removed; id names the other streams.
	customer, id string
}

// apply applies policy to the topic: retention, or a tombstone of the
// customer then compaction.
func (ct cleanupTopic) apply(ctx context.Context, policy string) error {
	c, topic, customer, id := ct.c, ct.topic, ct.customer, ct.id
	var err error
	switch policy {
	case KafkaRetention:
		err = alterTopic(ctx, c, topic, map[string]string{"retention.ms": "1000"})
	case KafkaCompaction:
		// The tombstone, then the policy; a marker record after
		// segment.ms rolls the active segment (never cleaned), so that
		// the tombstone lies in a segment the cleaner may clean.
		if err = produceRecords(ctx, c, topic, kafka.Record{Key: kafka.NewBytes([]byte(customer))}); err == nil {
			err = alterTopic(ctx, c, topic, map[string]string{"cleanup.policy": "compact", "segment.ms": "1000"})
		}
		if err == nil {
			if err = sleepOrDone(ctx, 1100*time.Millisecond); err == nil {
				err = produceRecords(ctx, c, topic, kafka.Record{Key: kafka.NewBytes([]byte("roll-" + id)), Value: kafka.NewBytes(envelopeOf(tankEvent(1)))})
			}
		}
	}
	return err
}

// kafkaWatch is what cleanupTopic.watch saw after the policy was applied.
type kafkaWatch struct {
	// last is the last view of the topic read; partial counts the views
	// that held some of the customer's events but not all.
	last    kafkaView
	partial int
	// firstChange and returned are the seconds until the first view that
	// changed and until the log directory held half its size, or -1.
	firstChange, returned float64
	// size is the log directory's last size; applied when the watch began.
	size    int64
	applied time.Time
}

// watch polls the log directory every second and the topic's view every
// 5 s (every second once the space is returned), for at most wait, until
// the directory holds half of size0 and a reader sees none of the
// customer's events (of the events written; v0 the view before).
func (ct cleanupTopic) watch(ctx context.Context, events int, v0 kafkaView, size0 int64, wait time.Duration) (kafkaWatch, error) {
	broker, topic, customer, dir := ct.broker, ct.topic, ct.customer, ct.dir
	w := kafkaWatch{last: v0, firstChange: -1, returned: -1, size: size0, applied: time.Now()}
	nextView := time.Now()
	for time.Since(w.applied) < wait {
		if err := sleepOrDone(ctx, time.Second); err != nil {
			return w, err
		}
		var err error
		if w.size, err = dirBytes(dir); err != nil {
			return w, err
		}
		if w.size*2 <= size0 && w.returned < 0 {
			w.returned = time.Since(w.applied).Seconds()
		}
		if time.Now().After(nextView) || w.returned >= 0 {
			v, err := readView(ctx, broker, topic, customer)
			if err != nil {
				return w, err
			}
			if w.firstChange < 0 && (v.customer != v0.customer || v.others != v0.others || v.first != v0.first) {
				w.firstChange = time.Since(w.applied).Seconds()
			}
			if v.customer > 0 && v.customer < events {
				w.partial++
			}
			w.last = v
			nextView = time.Now().Add(5 * time.Second)
		}
		// Half the space back is not the end: the cleaner compacts the
		// log a few segments per pass, so a reader may still see part of
		// the customer's stream. Wait (within the bound) for the view
		// the policy leads to: none of the customer's events.
		if w.returned >= 0 && w.last.customer == 0 {
			break
		}
	}
	return w, nil
}

// envelopeOf is e as kafka-eventstore stores it: the record's value.
func envelopeOf(e event) []byte {
	b, _ := json.Marshal(map[string]any{"type": e.Type, "data": e.Data, "metadata": map[string]any{}})
	return b
}

// produce writes the customer's o.StreamEvents events in batches of
// MaxAppend, each followed by o.Others events of each other stream, as
// kafka-eventstore writes them (key: the stream id, value: the event's
// envelope).
func (ct cleanupTopic) produce(ctx context.Context, o CleanupOptions) error {
	c, topic, customer, id := ct.c, ct.topic, ct.customer, ct.id
	for j := 0; j < o.StreamEvents; j += MaxAppend {
		var recs []kafka.Record
		for k := j; k < min(j+MaxAppend, o.StreamEvents); k++ {
			recs = append(recs, kafka.Record{Key: kafka.NewBytes([]byte(customer)), Value: kafka.NewBytes(envelopeOf(tankEvent(k)))})
		}
		for s := range o.Others {
			for k := range o.Others {
				key := fmt.Sprintf("other-%s-%d", id, s)
				recs = append(recs, kafka.Record{Key: kafka.NewBytes([]byte(key)), Value: kafka.NewBytes(envelopeOf(tankEvent(j/MaxAppend*o.Others + k)))})
			}
		}
		if err := produceRecords(ctx, c, topic, recs...); err != nil {
			return err
		}
	}
	return nil
}

func produceRecords(ctx context.Context, c *kafka.Client, topic string, recs ...kafka.Record) error {
	resp, err := c.Produce(ctx, &kafka.ProduceRequest{Topic: topic, Partition: 0, RequiredAcks: kafka.RequireAll, Records: kafka.NewRecordReader(recs...)})
	if err == nil {
		err = resp.Error
	}
	if err != nil {
		return fmt.Errorf("produce to %s: %w", topic, err)
	}
	return nil
}

// alterTopic sets topic's configs (IncrementalAlterConfigs).
func alterTopic(ctx context.Context, c *kafka.Client, topic string, configs map[string]string) error {
	var cs []kafka.IncrementalAlterConfigsRequestConfig
	for k, v := range configs {
		cs = append(cs, kafka.IncrementalAlterConfigsRequestConfig{Name: k, Value: v, ConfigOperation: kafka.ConfigOperationSet})
	}
	resp, err := c.IncrementalAlterConfigs(ctx, &kafka.IncrementalAlterConfigsRequest{Resources: []kafka.IncrementalAlterConfigsRequestResource{{
		ResourceType: kafka.ResourceTypeTopic, ResourceName: topic, Configs: cs}}})
	if err == nil {
		for _, r := range resp.Resources {
			if r.Error != nil {
				err = r.Error
			}
		}
	}
	if err != nil {
		return fmt.Errorf("alter configs of %s: %w", topic, err)
	}
	return nil
}

// kafkaLogDir finds topic's partition 0 directory on this machine (under
// dir, else under the broker's log.dirs) and the broker's retention
// check interval.
func kafkaLogDir(ctx context.Context, c *kafka.Client, dir, topic string) (string, time.Duration, error) {
	md, err := c.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return "", 0, fmt.Errorf("metadata: %w", err)
	}
	if len(md.Brokers) == 0 {
		return "", 0, errors.New("metadata: no broker")
	}
	resp, err := c.DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{{
		ResourceType: kafka.ResourceTypeBroker, ResourceName: strconv.Itoa(md.Brokers[0].ID),
		ConfigNames: []string{"log.dirs", "log.dir", "log.retention.check.interval.ms"}}}})
	if err != nil {
		return "", 0, fmt.Errorf("describe the broker's configs: %w", err)
	}
	var dirs []string
	interval := 5 * time.Minute // Kafka's default
	for _, r := range resp.Resources {
		for _, e := range r.ConfigEntries {
			switch e.ConfigName {
			case "log.dirs", "log.dir":
				if e.ConfigValue != "" {
					dirs = append(dirs, strings.Split(e.ConfigValue, ",")...)
				}
			case "log.retention.check.interval.ms":
				if n, err := strconv.ParseInt(e.ConfigValue, 10, 64); err == nil && n > 0 {
					interval = time.Duration(n) * time.Millisecond
				}
			}
		}
	}
	if dir != "" {
		dirs = []string{dir}
	}
	for _, d := range dirs {
		p := filepath.Join(strings.TrimSpace(d), topic+"-0")
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			return p, interval, nil
		}
	}
	return "", interval, fmt.Errorf("the partition's directory %s-0 is not under %v on this machine (-kafka-log-dir)", topic, dirs)
}

// dirBytes is the disk space the files of dir take (allocated blocks:
// Kafka preallocates its index files sparsely).
func dirBytes(dir string) (int64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, e := range ents {
		info, err := e.Info()
		if err != nil {
			continue // deleted meanwhile
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			n += st.Blocks * 512
		} else {
			n += info.Size()
		}
	}
	return n, nil
}

// readView reads the whole partition as kafka-eventstore's read does
// (from the log start to the high watermark) and counts what a reader
// sees.
func readView(ctx context.Context, broker, topic, customer string) (kafkaView, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	conn, err := kafka.DialLeader(ctx, "tcp", broker, topic, 0)
	if err != nil {
		return kafkaView{}, err
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	var v kafkaView
	if v.first, v.hwm, err = conn.ReadOffsets(); err != nil {
		return v, err
	}
	for off := v.first; off < v.hwm; {
		if _, err := conn.Seek(off, kafka.SeekAbsolute|kafka.SeekDontCheck); err != nil {
			return v, err
		}
		// As the service reads (fetch.go): 4 MiB fetches, no wait for
		// records that are there.
		batch := conn.ReadBatchWith(kafka.ReadBatchConfig{MinBytes: 1, MaxBytes: 4 << 20, MaxWait: time.Millisecond})
		start := off
		var readErr error
		for {
			msg, err := batch.ReadMessage()
			if err != nil {
				if !errors.Is(err, io.EOF) {
					readErr = err
				}
				break
			}
			// A fetch starts at the record batch holding off, which may
			// begin before it.
			if msg.Offset < off {
				continue
			}
			if msg.Offset >= v.hwm {
				break
			}
			off = msg.Offset + 1
			switch {
			case msg.Value == nil:
				v.tombstones++
			case strings.HasPrefix(string(msg.Key), "roll-"):
				// The compaction's marker record, neither the customer's
				// nor another stream's.
			case string(msg.Key) == customer:
				v.customer++
			default:
				v.others++
			}
		}
		if err := errors.Join(readErr, batch.Close()); err != nil {
			return v, fmt.Errorf("read %s at offset %d: %w", topic, start, err)
		}
		if off == start {
			return v, fmt.Errorf("read %s: no progress at offset %d below the high watermark %d", topic, off, v.hwm)
		}
	}
	return v, nil
}
