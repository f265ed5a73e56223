package main

import (
	"net/http"
	"testing"

	logc "github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/log"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// The broker is unreachable when a POST arrives: the answer is 503, and
// the dual-write gap is visible: the Postgres row is committed (GET finds
// it) but was never produced, so it is never delivered.
func TestBrokerUnreachableAtPostIs503AndRowStaysUndelivered(t *testing.T) {
	t.Parallel()
	tg := newTarget(t, map[string]string{"KAFKA_WRITE_TIMEOUT": "3s", "KAFKA_DIAL_TIMEOUT": "1s"})
	ok := logc.Post(t, tg.URL(), logc.NewEvent{Type: "t", Key: "k"})
	logc.WaitDelivered(t, tg.URL(), ok.ID)

	b := tg.app.backend
	good := b.writer.Swap(newWriter(b.cfg, []string{"127.0.0.1:1"}))
	t.Cleanup(func() { _ = good.Close() })
	var body struct {
		Error      string   `json:"error"`
		IDs        []string `json:"ids"`
		InPostgres bool     `json:"in_postgres"`
		InKafka    bool     `json:"in_kafka"`
	}
	if s, _ := kittest.Do(t, http.MethodPost, tg.URL()+"/events", logc.NewEvent{Type: "t", Key: "k"}, &body); s != http.StatusServiceUnavailable {
		t.Fatalf("POST with the broker unreachable: %d %+v, want 503", s, body)
	}
	if len(body.IDs) != 1 || !body.InPostgres || body.InKafka || body.Error == "" {
		t.Fatalf("503 body: %+v", body)
	}
	t.Logf("503: %s", body.Error)
	lost := logc.Get(t, tg.URL(), body.IDs[0])
	if lost.DeliveredAt != nil {
		t.Fatalf("the unproduced event was delivered: %+v", lost)
	}
	// The broker comes back: new events flow again, the gap stays.
	b.writer.Store(good)
	after := logc.Post(t, tg.URL(), logc.NewEvent{Type: "t", Key: "k"})
	logc.WaitDelivered(t, tg.URL(), after.ID)
	if s, _ := kittest.Do(t, http.MethodGet, tg.URL()+"/events/"+lost.ID+"/wait?timeout=1s", nil, nil); s != http.StatusRequestTimeout {
		t.Errorf("wait on the unproduced event: %d, want 408", s)
	}
	var st logc.ConsumerStatus
	kittest.Do(t, http.MethodGet, tg.URL()+"/consumer", nil, &st)
	if st.Delivered != 2 || st.Lag != 0 || st.Kafka == nil || len(st.Kafka.Partitions) != 3 {
		t.Errorf("/consumer: %+v", st)
	}
}

// BenchmarkDeliverySynchronousCommit measures the same on the kafka side,
// where the consumer reads Kafka, not the WAL: synchronous_commit=off only
// shortens the Postgres half of the dual write.
//
//	go test -run '^$' -bench DeliverySynchronousCommit -benchtime 20x ./services/kafka
func BenchmarkDeliverySynchronousCommit(b *testing.B) {
	for _, mode := range []string{"on", "off"} {
		b.Run(mode, func(b *testing.B) {
			tg := newTarget(b, map[string]string{"SYNCHRONOUS_COMMIT": mode})
			logc.MeasureDelivery(b, tg.URL())
		})
	}
}
