package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/eventstore"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service/servicetest"
)

// TestKeyedReadScansOnlyItsPartition: on a keyed topic a point read
// consumes the stream's partition and nothing else. records_scanned is
// exactly the records written to streams that hash to the same partition,
// and it is below the topic's total.
func TestKeyedReadScansOnlyItsPartition(t *testing.T) {
	t.Parallel()
	ctx := kittest.Context(t, time.Minute)
	cfg := testConfigPartitions(t, keyedPartitions)
	s, err := openStore(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.close)
	const streams, each = 32, 3
	perPartition := map[int]int64{}
	for i := range streams {
		name := fmt.Sprintf("tank-%s-%d", kittest.UniqueName(t, "s"), i)
		for range each {
			if _, err := s.Append(ctx, name, eventstore.Any(), []eventstore.EventData{{Type: "OxygenAdded", Data: json.RawMessage(`{"liters":1}`)}}); err != nil {
				t.Fatal(err)
			}
		}
		perPartition[s.partitionOf(name)] += each
		if i == 0 {
			defer func() {
				res, err := s.Read(ctx, name, 0, 1000)
				if err != nil {
					t.Fatal(err)
				}
				p := s.partitionOf(name)
				if len(res.Events) != each || *res.RecordsScanned != perPartition[p] {
					t.Errorf("read of %s (partition %d): %d events, %d records scanned; want %d and %d (its partition's records)", name, p, len(res.Events), *res.RecordsScanned, each, perPartition[p])
				}
				if *res.RecordsScanned >= streams*each {
					t.Errorf("records scanned %d: the whole topic (%d), not one partition", *res.RecordsScanned, streams*each)
				}
				if len(perPartition) < 2 {
					t.Errorf("%d streams all hashed to one partition", streams)
				}
			}()
		}
	}
}

// TestKeyedReadsWhatTheDefaultPartitionerWrote: records a standard
// producer writes keyed by stream id (kafka-go's Writer with the murmur2
// balancer, Kafka's default partitioner) land in the partition the
// service reads.
func TestKeyedReadsWhatTheDefaultPartitionerWrote(t *testing.T) {
	t.Parallel()
	cfg := testConfigPartitions(t, keyedPartitions)
	r := servicetest.Start(t, build, cfg)
	ctx := kittest.Context(t, time.Minute)
	w := &kafka.Writer{Addr: kafka.TCP(cfg.Brokers...), Topic: cfg.Topic, Balancer: &kafka.Murmur2Balancer{}, RequiredAcks: kafka.RequireAll}
	t.Cleanup(func() { _ = w.Close() })
	var msgs []kafka.Message
	names := make([]string, 10)
	for i := range names {
		names[i] = fmt.Sprintf("tank-%s-%d", kittest.UniqueName(t, "w"), i)
		msgs = append(msgs, kafka.Message{Key: []byte(names[i]), Value: []byte(`{"type":"TankRegistered","data":{"capacity_liters":1000}}`)})
	}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		var read eventstore.ReadResult
		if s, b := kittest.Do(t, "GET", r.URL()+"/streams/"+n, nil, &read); s != http.StatusOK || len(read.Events) != 1 {
			t.Errorf("read %s: %d %s, want its one event", n, s, b)
		}
	}
}

// TestKeyedResumeNeedsACursor: an append's "<partition>:<offset>" names
// one event; as a subscription's starting point it is a 404 that says to
// resume from a subscription id, as is a cursor of another partition
// count.
func TestKeyedResumeNeedsACursor(t *testing.T) {
	t.Parallel()
	r := servicetest.Start(t, build, testConfigPartitions(t, keyedPartitions))
	var res eventstore.AppendResult
	if s, b := kittest.Do(t, "POST", r.URL()+"/streams/tank-"+kittest.UniqueName(t, "s")+"/events",
		map[string]any{"events": []map[string]any{{"type": "TankRegistered", "data": map[string]any{"capacity_liters": 1000}}}}, &res); s != http.StatusCreated {
		t.Fatalf("append: %d %s", s, b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for from, want := range map[string]int{res.Position: http.StatusNotFound, "4:0:0:0:0": http.StatusNotFound} {
		req := kittest.NewRequest(t, "GET", r.URL()+"/subscribe?from="+from, nil).WithContext(ctx)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var e struct{ Error string }
		_ = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != want || e.Error == "" {
			t.Errorf("subscribe from %s: %d %q, want %d with an error", from, resp.StatusCode, e.Error, want)
		}
	}
}
