package experiments

import (
	"context"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
)

// TestKafkaEventstoreBrokerRestart runs kafka-eventstore-broker-restart
// small: a private KRaft node stopped and killed under appends. Every
// append answered 201 reads back once, every failure is a 503 with a
// kind, and the service recovers after both.
func TestKafkaEventstoreBrokerRestart(t *testing.T) {
	root := privateKafkaRoot(t, "kafka-eventstore")
	// Not parallel: it runs before the parallel tests, so its private
	// node's directory never overlaps TestKafkaBrokerRestart's check that
	// its own node left none behind (both use wpe-kafka-exp-*), and two
	// private JVMs never share the two cores.
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	res, err := runKafkaEventstoreRestart(ctx, Env{Root: root, Out: logWriter{t}}, Small)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s (%.1f s): %s", Describe(res).Title, res.DurationS, Describe(res).Figure)
	if Describe(res).Happens == "" || Describe(res).UserMust == "" || len(Describe(res).Notes) == 0 {
		t.Errorf("incomplete result: %+v", res)
	}
	if res.AckedLost != 0 {
		t.Errorf("%d acknowledged appends lost", res.AckedLost)
	}
	m := res.Metrics
	for _, c := range kafkaCases(Small) {
		p := c.name + "."
		if m[driver.Metric(p+"failed")] == 0 {
			t.Errorf("%s: no append failed while the broker was down: %v", c.name, m)
		}
		if m[driver.Metric(p+"failed_not_503")] != 0 || m[driver.Metric(p+"503_without_kind")] != 0 {
			t.Errorf("%s: failures other than a 503 with a kind: %v", c.name, Describe(res).Notes)
		}
		if m[driver.Metric(p+"duplicated")] != 0 {
			t.Errorf("%s: %v appends duplicated", c.name, m[driver.Metric(p+"duplicated")])
		}
		if m[driver.Metric(p+"recover_s")] < 0 {
			t.Errorf("%s: did not recover: %v", c.name, m)
		}
	}
}

// TestNoKurrentdbPostgresRestart runs no-kurrentdb-postgres-restart
// small on a private Postgres: the live subscriber receives every
// acknowledged append once, and nothing acknowledged is lost.
func TestNoKurrentdbPostgresRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts a private Postgres and no-kurrentdb")
	}
	if _, err := pgBindir(); err != nil {
		t.Skip(err)
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	res, err := runNoKurrentdbRestart(ctx, Env{Out: logWriter{t}}, Small)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s (%.1f s): %s", Describe(res).Title, res.DurationS, Describe(res).Figure)
	m := res.Metrics
	if res.AckedLost != 0 || m["acked_not_delivered"] != 0 || m["redelivered"] != 0 || m["duplicated_in_stream"] != 0 {
		t.Errorf("lost, undelivered or duplicated: %v", m)
	}
	if m["failed"] == 0 || m["failed_not_503"] != 0 || m["503_without_kind"] != 0 {
		t.Errorf("want failures during the outage, each a 503 with a kind: %v %v", m, Describe(res).Notes)
	}
	if m["recover_s"] < 0 {
		t.Errorf("did not recover: %v", m)
	}
}
