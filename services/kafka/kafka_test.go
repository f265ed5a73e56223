package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	logc "github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/log"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/log/conformance"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// The broker is unreachable when a POST arrives: the answer is 503, and
// the dual-write gap is visible: the Postgres row is committed (GET finds
// it) but was never produced, so it is never delivered.
func TestBrokerUnreachableAtPostIs503AndRowStaysUndelivered(t *testing.T) {
	t.Parallel()
	tg := newTarget(t, map[string]string{"KAFKA_WRITE_TIMEOUT": "3s", "KAFKA_DIAL_TIMEOUT": "1s"})
	conformance.PostDelivered(t, tg.URL(), logc.NewEvent{Type: "t", Key: "k"})

	b := tg.App().backend
	dead, err := b.newProducer([]string{"127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	good := b.swapProducer(dead)
	// restore puts the good producer back and closes the dead one (here
	// or, if the test stops first, when it ends).
	restored := false
	restore := func() {
		if !restored {
			restored = true
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = b.swapProducer(good).Close(ctx)
		}
	}
	t.Cleanup(restore)
	var body struct {
		Error      string   `json:"error"`
		IDs        []string `json:"ids"`
		InPostgres bool     `json:"in_postgres"`
		InKafka    bool     `json:"in_kafka"`
		Kind       string   `json:"kind"`
	}
	if s, _ := kittest.Do(t, http.MethodPost, tg.URL()+"/events", logc.NewEvent{Type: "t", Key: "k"}, &body); s != http.StatusServiceUnavailable {
		t.Fatalf("POST with the broker unreachable: %d %+v, want 503", s, body)
	}
	if len(body.IDs) != 1 || !body.InPostgres || body.InKafka || body.Error == "" || body.Kind != "unknown" {
		t.Fatalf("503 body: %+v", body)
	}
	t.Logf("503: %s", body.Error)
	lost := conformance.Get(t, tg.URL(), body.IDs[0])
	if lost.DeliveredAt != nil {
		t.Fatalf("the unproduced event was delivered: %+v", lost)
	}
	// Now the service knows the broker is down: the next write is
	// refused before its row is written, so the gap does not grow.
	var rows, rowsAfter int
	pool := kittest.Pool(t, tg.Env["DATABASE_URL"], tg.Env["DATABASE_SCHEMA"])
	count := func(n *int) {
		if err := pool.QueryRow(kittest.Context(t, 10*time.Second), `SELECT count(*) FROM messages`).Scan(n); err != nil {
			t.Fatal(err)
		}
	}
	count(&rows)
	var refused struct {
		Error      string `json:"error"`
		InPostgres bool   `json:"in_postgres"`
		Kind       string `json:"kind"`
	}
	for range 3 {
		if s, raw := kittest.Do(t, http.MethodPost, tg.URL()+"/events", logc.NewEvent{Type: "t", Key: "k"}, &refused); s != http.StatusServiceUnavailable || refused.InPostgres || refused.Kind != "not_recorded" {
			t.Fatalf("POST with the broker known down: %d %s, want 503 with nothing written", s, raw)
		}
	}
	t.Logf("refused: %s", refused.Error)
	if count(&rowsAfter); rowsAfter != rows {
		t.Errorf("%d rows after the refused writes, want %d: each refused write left a row", rowsAfter, rows)
	}
	// The broker comes back: new events flow again (after a probe), the
	// gap stays.
	restore()
	kittest.Eventually(t, 10*time.Second, "writes taken again", func() bool {
		s, _ := kittest.Do(t, http.MethodPost, tg.URL()+"/events", logc.NewEvent{Type: "t", Key: "k"}, nil)
		return s == http.StatusCreated
	})
	if s, _ := kittest.Do(t, http.MethodGet, tg.URL()+"/events/"+lost.ID+"/wait?timeout=1s", nil, nil); s != http.StatusRequestTimeout {
		t.Errorf("wait on the unproduced event: %d, want 408", s)
	}
	// The offsets are committed once a second (KAFKA_COMMIT_INTERVAL):
	// the lag drops to 0 by then.
	var st logc.ConsumerStatus
	kittest.Eventually(t, 30*time.Second, "the consumer's lag back to 0", func() bool {
		st = conformance.Consumer(t, tg.URL())
		return st.Lag == 0
	})
	if st.Delivered != 2 || st.Kafka == nil || len(st.Kafka.Partitions) != 3 {
		t.Errorf("/consumer: %+v", st)
	}
}

// BenchmarkDeliverySynchronousCommit measures the same on the kafka side,
// where the consumer reads Kafka, not the WAL: synchronous_commit=off only
// shortens the Postgres half of the dual write.
//
//	go test -run '^$' -bench DeliverySynchronousCommit -benchtime 20x ./services/kafka
func BenchmarkDeliverySynchronousCommit(b *testing.B) {
	conformance.MeasureDeliveryPerSynchronousCommit(b, newTarget)
}

// While Postgres does not take the deliveries the consumer retries the
// batch in hand without limit; only Stop ends that, and only once its own
// deadline passes: then the consumer has really stopped (not running, the
// group left) and the uncommitted batch goes to the next instance.
func TestStopGivesUpOnABlockedBatchAtItsDeadline(t *testing.T) {
	t.Parallel()
	tg := newTarget(t, nil)
	conformance.PostDelivered(t, tg.URL(), logc.NewEvent{Type: "t", Key: "k"})

	block := conformance.BlockDeliveries(t, tg.Env["DATABASE_URL"], tg.Env["DATABASE_SCHEMA"])
	inHand := conformance.Post(t, tg.URL(), logc.NewEvent{Type: "t", Key: "k"})
	block.WaitForWaiter(time.Minute, "the consumer to wait on the deliveries lock", conformance.Waiter{})
	c := tg.App().consumer
	if !c.running.Load() {
		t.Fatal("the consumer is not running while it retries")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := c.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Stop with Postgres blocked: %v, want the deadline's error", err)
	}
	if c.running.Load() {
		t.Fatal("Stop returned but the consumer still runs (it did not give up on the blocked batch)")
	}
	select {
	case <-c.done:
	default:
		t.Fatal("Stop returned before the consumer's goroutines ended")
	}
	tg.Stop()
	block.Release()
	tg.Start(t)
	conformance.WaitDelivered(t, tg.URL(), inHand.ID)
}

// A partly written batch (recordErrors) names, per id, what is missing
// from Kafka and what is there.
func TestProduceErrorNamesEachID(t *testing.T) {
	werr := recordErrors{nil, errors.New("leader not available"), nil}
	err := produceError(werr, []string{"a", "b", "c"})
	var he *httpapi.Error
	if !errors.As(err, &he) || he.Status != http.StatusServiceUnavailable || he.Kind != httpapi.KindUnknown {
		t.Fatalf("%#v", err)
	}
	if got := he.Fields["ids"]; !slices.Equal(got.([]string), []string{"b"}) {
		t.Errorf("ids %v, want [b]", got)
	}
	if got := he.Fields["ids_in_kafka"]; !slices.Equal(got.([]string), []string{"a", "c"}) {
		t.Errorf("ids_in_kafka %v, want [a c]", got)
	}
	if !strings.Contains(he.Message, "1 of the 3") {
		t.Errorf("message %q", he.Message)
	}
	if he.Fields["delivery"] != "never" {
		t.Errorf("delivery %v, want never", he.Fields["delivery"])
	}
	// Any other error: none of them made it.
	he = nil
	if !errors.As(produceError(errors.New("dial: refused"), []string{"a", "b"}), &he) ||
		!slices.Equal(he.Fields["ids"].([]string), []string{"a", "b"}) || len(he.Fields["ids_in_kafka"].([]string)) != 0 ||
		he.Fields["delivery"] != "never" {
		t.Errorf("%#v", he)
	}
	// The write timeout ended first: the producer still holds the batch,
	// so the answer must not promise the events are lost.
	he = nil
	if !errors.As(produceError(fmt.Errorf("write: %w", context.DeadlineExceeded), []string{"a", "b"}), &he) ||
		he.Fields["delivery"] != "unknown" || he.Kind != httpapi.KindUnknown || strings.Contains(he.Message, "will not be delivered") || !strings.Contains(he.Message, "may still reach Kafka") {
		t.Errorf("a timed-out produce: %#v", he)
	}
	// Records franz-go failed at their deadline, one written: the failed
	// ones are named, and may still be delivered.
	he = nil
	if !errors.As(produceError(recordErrors{nil, context.DeadlineExceeded}, []string{"a", "b"}), &he) ||
		he.Fields["delivery"] != "unknown" || !slices.Equal(he.Fields["ids"].([]string), []string{"b"}) || !slices.Equal(he.Fields["ids_in_kafka"].([]string), []string{"a"}) {
		t.Errorf("records failed at their deadline: %#v", he)
	}
	// acks=1 on franz-go (no idempotence): a record it gave up on may be
	// in Kafka.
	he = nil
	if !errors.As(produceError(fmt.Errorf("%w: %w", errMayBeWritten, recordErrors{errors.New("broken pipe")}), []string{"a"}), &he) ||
		he.Fields["delivery"] != "unknown" || !slices.Equal(he.Fields["ids"].([]string), []string{"a"}) {
		t.Errorf("a non-idempotent produce that failed: %#v", he)
	}
}

// TestWritableNeedsEveryPartitionLed: a broker that answers metadata
// but leads no partition yet (restarting after a crash) is not writable.
func TestWritableNeedsEveryPartitionLed(t *testing.T) {
	led := kafkago.Partition{ID: 0, Leader: kafkago.Broker{Host: "localhost", Port: 9092, ID: 1}}
	for name, c := range map[string]struct {
		meta *kafkago.MetadataResponse
		ok   bool
	}{
		"led":             {&kafkago.MetadataResponse{Topics: []kafkago.Topic{{Name: "t", Partitions: []kafkago.Partition{led}}}}, true},
		"no leader":       {&kafkago.MetadataResponse{Topics: []kafkago.Topic{{Name: "t", Partitions: []kafkago.Partition{led, {ID: 1}}}}}, false},
		"no partitions":   {&kafkago.MetadataResponse{Topics: []kafkago.Topic{{Name: "t"}}}, false},
		"topic error":     {&kafkago.MetadataResponse{Topics: []kafkago.Topic{{Name: "t", Error: kafkago.LeaderNotAvailable}}}, false},
		"other topic":     {&kafkago.MetadataResponse{Topics: []kafkago.Topic{{Name: "u", Partitions: []kafkago.Partition{led}}}}, false},
		"partition error": {&kafkago.MetadataResponse{Topics: []kafkago.Topic{{Name: "t", Partitions: []kafkago.Partition{{ID: 0, Leader: led.Leader, Error: kafkago.NotLeaderForPartition}}}}}, false},
	} {
		if err := writable(c.meta, "t"); (err == nil) != c.ok {
			t.Errorf("%s: writable = %v, want ok %v", name, err, c.ok)
		}
	}
}

// sizedEvent returns a POST /events body of exactly n bytes.
func sizedEvent(t testing.TB, n int) string {
	t.Helper()
	const head, tail = `{"type":"t","key":"k","payload":{"p":"`, `"}}`
	if n < len(head)+len(tail) {
		t.Fatalf("a body of %d bytes is too small", n)
	}
	return head + strings.Repeat("x", n-len(head)-len(tail)) + tail
}

// rows counts the messages table's rows.
func rows(t testing.TB, tg *target) int {
	t.Helper()
	pool := kittest.Pool(t, tg.Env["DATABASE_URL"], tg.Env["DATABASE_SCHEMA"])
	var n int
	if err := pool.QueryRow(kittest.Context(t, 10*time.Second), "SELECT count(*) FROM messages").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// An event under BODY_LIMIT that the broker would refuse (above the
// topic's max.message.bytes once encoded) is a 413 before anything is
// written: no orphan row in Postgres, however often it is retried. The
// largest event the service accepts is produced and delivered: nothing
// between the service's bound and the broker's limit is accepted, then
// refused.
func TestTooLargeForKafkaIs413AndLeavesNoRow(t *testing.T) {
	t.Parallel()
	tg := newTarget(t, nil)
	before := rows(t, tg)
	for i := range 3 {
		var body struct {
			Error string `json:"error"`
		}
		s, raw := kittest.Do(t, http.MethodPost, tg.URL()+"/events", sizedEvent(t, 1048447), &body)
		if s != http.StatusRequestEntityTooLarge {
			t.Fatalf("attempt %d: POST of a 1,048,447-byte event: %d %s, want 413", i, s, raw)
		}
		if i == 0 {
			t.Logf("413: %s", body.Error)
		}
	}
	// The same event in a batch is refused whole.
	batch := `{"events":[{"type":"t","key":"k"},` + sizedEvent(t, 1048447) + `]}`
	if s, raw := kittest.Do(t, http.MethodPost, tg.URL()+"/events/batch", batch, nil); s != http.StatusRequestEntityTooLarge {
		t.Fatalf("batch holding a too-large event: %d %s, want 413", s, raw)
	}
	if n := rows(t, tg); n != before {
		t.Fatalf("messages holds %d rows after the refusals, want %d: an orphan row was left", n, before)
	}

	// The largest accepted body is produced and delivered; one byte more is
	// refused.
	lo, hi := 1000, 1048447 // accepted, refused
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		s, _ := kittest.Do(t, http.MethodPost, tg.URL()+"/events", sizedEvent(t, mid), nil)
		switch s {
		case http.StatusCreated:
			lo = mid
		case http.StatusRequestEntityTooLarge:
			hi = mid
		default:
			t.Fatalf("POST of %d bytes: %d, want 201 or 413 (accepted, then refused by the broker?)", mid, s)
		}
	}
	var created logc.Created
	if s, raw := kittest.Do(t, http.MethodPost, tg.URL()+"/events", sizedEvent(t, lo), &created); s != http.StatusCreated {
		t.Fatalf("POST of the largest accepted size %d: %d %s", lo, s, raw)
	}
	conformance.WaitDelivered(t, tg.URL(), created.ID)
	t.Logf("largest accepted body: %d bytes (topic max.message.bytes %d)", lo, tg.App().backend.maxMessageBytes)
}

// POST /events/batch of 1000 events is produced in few produce requests,
// not one per event: with franz-go one record batch per partition, and at
// most one produce request per partition (franz-go puts every partition's
// batch of a broker in one request; counted by its hooks), with kafka-go
// (KAFKA_PRODUCER=kafka-go) at most one produce request per partition
// (Writer.Stats). Every event is delivered, and each record is on the
// partition kafka-go's Hash chose for its key (KAFKA_PARTITIONS 3 and 6):
// switching the producer moves no key.
//
// franz-go's ProduceSync buffers the request's records one by one, and a
// partition whose linger (KAFKA_BATCH_TIMEOUT) ends meanwhile is sent with
// what it has: under the race detector buffering 1000 records takes
// longer than the default 1 ms, and the batch went out in 2 to 4
// requests. The franz-go cases set a 1 s linger, which ProduceSync ends
// as soon as the records are buffered (the first write, before the
// producer knows the topic's partitions, waits it once): what is checked
// is that one request's records go out together when nothing else
// interrupts them, not the default linger's timing.
func TestBatchIsFewProduceRequests(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		producer   string
		partitions int
	}{{ProducerFranz, 3}, {ProducerFranz, 6}, {ProducerKafkaGo, 3}, {ProducerKafkaGo, 6}} {
		t.Run(fmt.Sprintf("%s/%d", c.producer, c.partitions), func(t *testing.T) {
			t.Parallel()
			env := map[string]string{"KAFKA_PRODUCER": c.producer, "KAFKA_PARTITIONS": strconv.Itoa(c.partitions)}
			if c.producer == ProducerFranz {
				env["KAFKA_BATCH_TIMEOUT"] = "1s"
			}
			tg := newTarget(t, env)
			b := tg.App().backend
			// A first write: the producer knows the topic's partitions
			// (franz-go partitions records as they come only then).
			conformance.PostDelivered(t, tg.URL(), logc.NewEvent{Type: "t", Key: "first"})
			events := make([]logc.NewEvent, logc.MaxBatch)
			for i := range events {
				events[i] = logc.NewEvent{Type: "t", Key: fmt.Sprintf("key-%d", i%97)}
			}
			var requests, batches, records int64
			switch p := b.producing().(type) {
			case *franzProducer:
				r0, b0, n0 := p.written.requests.Load(), p.written.batches.Load(), p.written.records.Load()
				conformance.PostBatch(t, tg.URL(), events)
				requests, batches, records = p.written.requests.Load()-r0, p.written.batches.Load()-b0, p.written.records.Load()-n0
				if batches > int64(c.partitions) {
					t.Errorf("batch of %d events: %d record batches, want at most %d (one per partition)", len(events), batches, c.partitions)
				}
			case *kafkaGoProducer:
				_ = p.w.Stats() // Stats resets the counters: start from zero
				conformance.PostBatch(t, tg.URL(), events)
				st := p.w.Stats()
				requests, batches, records = st.Writes, st.Writes, st.Messages
			default:
				t.Fatalf("producer %T", p)
			}
			t.Logf("batch of %d on %d partitions (%s): %d produce requests, %d record batches, %d records", len(events), c.partitions, c.producer, requests, batches, records)
			if records != int64(len(events)) || requests > int64(c.partitions) {
				t.Fatalf("batch of %d events: %d produce requests for %d records, want at most %d (one per partition)", len(events), requests, records, c.partitions)
			}
			st := conformance.Consumer(t, tg.URL())
			if st.Kafka == nil || len(st.Kafka.Partitions) != c.partitions {
				t.Fatalf("/consumer shows %+v, want %d partitions", st.Kafka, c.partitions)
			}
			kittest.Eventually(t, time.Minute, "every event delivered", func() bool { return conformance.Consumer(t, tg.URL()).Delivered == int64(len(events))+1 })
			parts := make([]int, c.partitions)
			for i := range parts {
				parts[i] = i
			}
			for key, p := range keyPartitions(t, b) {
				if want := (&kafkago.Hash{}).Balance(kafkago.Message{Key: []byte(key)}, parts...); p != want {
					t.Errorf("key %q is on partition %d, kafka-go's Hash puts it on %d", key, p, want)
				}
			}
		})
	}
}

// keyPartitions reads every partition of the backend's topic from its
// first offset to its end and returns the partition each key is on
// (failing t if a key is on two).
func keyPartitions(t testing.TB, b *backend) map[string]int {
	t.Helper()
	ctx := kittest.Context(t, time.Minute)
	parts, err := b.partitions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	end, err := b.ends(ctx, parts, false)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]int{}
	for _, p := range parts {
		if end[p] == 0 {
			continue
		}
		r := kafkago.NewReader(kafkago.ReaderConfig{Brokers: b.cfg.Brokers, Topic: b.cfg.Topic, Partition: p, MinBytes: 1, MaxBytes: 10 << 20, MaxWait: 500 * time.Millisecond})
		for {
			m, err := r.FetchMessage(ctx)
			if err != nil {
				_ = r.Close()
				t.Fatalf("read partition %d of %s up to offset %d: %v", p, b.cfg.Topic, end[p], err)
			}
			if q, ok := keys[string(m.Key)]; ok && q != p {
				t.Errorf("key %q is on partitions %d and %d", m.Key, q, p)
			}
			keys[string(m.Key)] = p
			if m.Offset+1 >= end[p] {
				break
			}
		}
		_ = r.Close()
	}
	return keys
}
