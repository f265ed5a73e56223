package experiments

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/launch"
)

// TestKafkaBrokerRestart runs the kafka-broker-restart experiment small: a
// private KRaft node stopped with SIGTERM and started again under light
// load. Every event answered 201 is delivered, writes during the outage
// answer 503, /readyz says so, the service recovers, and the private
// node's directory is gone after.
func TestKafkaBrokerRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts a private Kafka node and the kafka service")
	}
	if _, err := exec.LookPath("java"); err != nil {
		t.Skip("java is not installed (scripts/stack.sh deps): the private Kafka node needs it")
	}
	root, err := launch.Root()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kafkaLibs(t.Context(), root); err != nil {
		t.Skip(err)
	}
	if _, err := pgBindir(); err != nil {
		t.Skip(err)
	}
	t.Parallel()
	before, _ := filepath.Glob(filepath.Join(os.TempDir(), "wpe-kafka-exp-*"))
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	// A private Postgres too: the test never loads the stack's servers.
	cl, err := newPGCluster(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	res, err := runKafkaBrokerRestart(ctx, Env{Root: root, Out: logWriter{t}, PostgresURL: cl.URL()}, Small)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s (%.1f s): %s", res.Title, res.DurationS, res.Figure)
	if res.Name != "kafka-broker-restart" || res.Happens == "" || res.UserMust == "" || len(res.Notes) == 0 {
		t.Errorf("incomplete result: %+v", res)
	}
	if res.AckedLost != 0 {
		t.Errorf("%d acknowledged events lost", res.AckedLost)
	}
	m := res.Metrics
	if m["sigterm.failed"] == 0 {
		t.Errorf("no write failed while the broker was down: %v", m)
	}
	if m["sigterm.failed_not_503"] != 0 {
		t.Errorf("%v failed writes answered another status than 503: %v", m["sigterm.failed_not_503"], res.Notes)
	}
	if m["sigterm.recover_s"] < 0 {
		t.Errorf("the service did not recover after the broker was back: %v", m)
	}
	if m["sigterm.readyz_503_after_s"] < 0 {
		t.Errorf("/readyz never failed while the broker was down: %v", res.Notes)
	}
	for _, c := range kafkaCases(Small) {
		if m[c.name+".503_without_kind"] != 0 {
			t.Errorf("%s: %v 503s without a kind", c.name, m[c.name+".503_without_kind"])
		}
		if m[c.name+".recover_s"] < 0 {
			t.Errorf("%s: the service did not recover after the broker was back: %v", c.name, m)
		}
	}
	after, _ := filepath.Glob(filepath.Join(os.TempDir(), "wpe-kafka-exp-*"))
	if len(after) > len(before) {
		t.Errorf("the private node's directory is left: %v", after)
	}
}

// TestKafkaClusterID: ids are 22 characters of base64url and never start
// with '-', which the storage tool would take for an option.
func TestKafkaClusterID(t *testing.T) {
	t.Parallel()
	for range 2000 {
		id := kafkaClusterID()
		if len(id) != 22 || id[0] == '-' {
			t.Fatalf("cluster id %q", id)
		}
	}
}

// TestKafkaVersion reads the version from the jar's name and ignores the
// test and sources jars beside it.
func TestKafkaVersion(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, f := range []string{"kafka_2.13-4.3.1-test.jar", "kafka_2.13-4.3.1.jar", "kafka-clients-4.3.1.jar"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if v := kafkaVersion(dir); v != "4.3.1" {
		t.Errorf("kafkaVersion = %q, want 4.3.1", v)
	}
	if v := kafkaVersion(t.TempDir()); v != "(version unknown)" {
		t.Errorf("kafkaVersion(empty) = %q", v)
	}
}
