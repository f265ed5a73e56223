package experiments

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/launch"
)

// privateKafkaRoot is the repository root for a test that starts a
// private Kafka node and what: it skips under -short, without java, or
// without the stack's Kafka jars.
func privateKafkaRoot(t *testing.T, what string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: starts a private Kafka node and " + what)
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
	return root
}

// TestKafkaBrokerRestart runs the kafka-broker-restart experiment small: a
// private KRaft node stopped with SIGTERM and started again under light
// load. Every event answered 201 is delivered, writes during an outage
// longer than the write timeout answer 503, /readyz says so, the service recovers, and the private
// node's directory is gone after.
func TestKafkaBrokerRestart(t *testing.T) {
	root := privateKafkaRoot(t, "the kafka service")
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
	t.Logf("%s (%.1f s): %s", Describe(res).Title, res.DurationS, Describe(res).Figure)
	if res.Name != "kafka-broker-restart" || Describe(res).Happens == "" || Describe(res).UserMust == "" || len(Describe(res).Notes) == 0 {
		t.Errorf("incomplete result: %+v", res)
	}
	if res.AckedLost != 0 {
		t.Errorf("%d acknowledged events lost", res.AckedLost)
	}
	m := res.Metrics
	// An outage longer than the write timeout fails writes; a shorter one
	// (Small holds the broker down 0 s, so a clean stop is often back
	// within the timeout) may be ridden out by the producer's retries.
	for _, c := range kafkaCases(Small) {
		if m[driver.Metric(c.name+".down_s")]*1000 > m["timeout_ms"]+1000 && m[driver.Metric(c.name+".failed")] == 0 {
			t.Errorf("%s: down %.1f s, longer than the %v ms write timeout, and no write failed: %v", c.name, m[driver.Metric(c.name+".down_s")], m["timeout_ms"], m)
		}
	}
	if m["sigterm.failed"]+m["sigkill.failed"] == 0 {
		t.Errorf("no write failed in any outage: %v", m)
	}
	if m["sigterm.failed_not_503"] != 0 {
		t.Errorf("%v failed writes answered another status than 503: %v", m["sigterm.failed_not_503"], Describe(res).Notes)
	}
	if m["sigterm.recovered"] != 1 || m["sigterm.recover_s"] < 0 {
		t.Errorf("the service did not recover after the broker was back: %v", m)
	}
	if m["sigterm.readyz_failed"] != 1 || m["sigterm.readyz_503_after_s"] < 0 {
		t.Errorf("/readyz never failed while the broker was down: %v", Describe(res).Notes)
	}
	for _, c := range kafkaCases(Small) {
		if m[driver.Metric(c.name+".503_without_kind")] != 0 {
			t.Errorf("%s: %v 503s without a kind", c.name, m[driver.Metric(c.name+".503_without_kind")])
		}
		if m[driver.Metric(c.name+".recovered")] != 1 {
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

// TestKafkaNeverRecoveredIsFlagged: a case that never recovered, whose
// /readyz never failed, says so in an explicit flag and in a figure
// below 0, never as the -0 of secs(-1ns) that a `< 0` check cannot see;
// the rendered figure says "never recovered", and a case that did
// recover says when.
func TestKafkaNeverRecoveredIsFlagged(t *testing.T) {
	t.Parallel()
	never := kafkaOutcome{recover: -1, readyDownAfter: -1, kinds: map[string]int{}}.metrics()
	if never["recovered"] != 0 || !(never["recover_s"] < 0) || never["readyz_failed"] != 0 || !(never["readyz_503_after_s"] < 0) {
		t.Errorf("never recovered: %v", never)
	}
	back := kafkaOutcome{recover: 1500 * time.Millisecond, readyDownAfter: 300 * time.Millisecond, readyUpAfter: time.Second, kinds: map[string]int{}}.metrics()
	if back["recovered"] != 1 || back["recover_s"] != 1.5 || back["readyz_failed"] != 1 || back["readyz_503_after_s"] != 0.3 {
		t.Errorf("recovered: %v", back)
	}
	r := Result{Name: "kafka-broker-restart", Metrics: map[driver.Metric]float64{
		"rate": 50, "before_s": 2, "hold_s": 0, "after_s": 3, "timeout_ms": 5000, "controller_moves": 0, "full_size": 0,
	}, Settings: map[string]string{"kafka_version": "4.1.0"}}
	for c, m := range map[string]map[driver.Metric]float64{"sigterm": back, "sigkill": never} {
		for k, v := range m {
			r.Metrics[driver.Metric(c+".")+k] = v
		}
		r.Settings[c+".answers"] = "none"
		r.Settings[c+".readyz_reason"] = ""
	}
	p := Describe(r)
	if len(p.Missing) > 0 {
		t.Fatalf("missing figures: %v", p.Missing)
	}
	sigterm, sigkill, _ := strings.Cut(p.Figure, "; SIGKILL: ")
	if !strings.Contains(sigterm, "/readyz 503 0.3 s after the signal, 200 again 1.0 s after the broker; first 201 1.50 s after the broker was back;") {
		t.Errorf("SIGTERM case: %s", sigterm)
	}
	if !strings.Contains(sigkill, "/readyz never answered 503; never recovered;") {
		t.Errorf("SIGKILL case: %s", sigkill)
	}
}
