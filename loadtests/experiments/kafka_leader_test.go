package experiments

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
)

// The cluster profile's experiments are not in All (make results on a
// machine without the profile does not run them), -only finds them, and
// without CLUSTER_KAFKA_BROKERS each reports why it did not run: an
// error, no figure, no count of lost writes.
func TestKafkaLeaderExperimentsNeedTheCluster(t *testing.T) {
	t.Parallel()
	for _, x := range Cluster() {
		if slices.ContainsFunc(All(), func(a Experiment) bool { return a.Name == x.Name }) {
			t.Errorf("%s is in All: make results would run it without the cluster profile", x.Name)
		}
		if xs, err := Select([]string{x.Name}); err != nil || len(xs) != 1 {
			t.Errorf("Select(%s) = %v, %v", x.Name, xs, err)
		}
	}
	f, err := Run(context.Background(), Env{Root: t.TempDir(), PostgresURL: "postgres://unused", KafkaBrokers: []string{"unused:1"}}, Small,
		[]Experiment{{Name: KafkaLeaderKill, Run: func(ctx context.Context, env Env, size Size) (Result, error) {
			env.ClusterKafkaBrokers = nil // whatever this test's environment says
			return runKafkaLeaderKill(ctx, env, size)
		}}})
	if err != nil {
		t.Fatal(err)
	}
	r := f.Results[0]
	if r.Error == "" || !strings.Contains(r.Error, "CLUSTER_KAFKA_BROKERS is not set") || r.AckedLost != -1 || len(r.Metrics) != 0 {
		t.Fatalf("without the cluster: %+v", r)
	}
	if p := Describe(r); p.Figure != "" || p.Title != kafkaLeaderKillText.Title {
		t.Errorf("Describe without the cluster: %+v", p)
	}
	if _, err := runKafkaLeaderCut(context.Background(), Env{}, Small); !errors.Is(err, errNoKafkaCluster) {
		t.Errorf("kafka-leader-cut without the cluster: %v", err)
	}
}

// Every figure the texts need is one record writes: a rendered result
// misses none, and the acks=1 loss is labelled as allowed.
func TestKafkaLeaderFiguresRender(t *testing.T) {
	t.Parallel()
	for _, x := range []struct {
		text  Text
		cases []leaderCase
	}{{kafkaLeaderKillText, leaderKillCases(Full)}, {kafkaLeaderCutText, leaderCutCases(Full)}} {
		res := Result{Name: "x", Metrics: map[driver.Metric]float64{"rate": 50, "before_s": 5, "hold_s": 25, "after_s": 10, "timeout_ms": 5000}}
		var names []string
		for _, c := range x.cases {
			o := leaderOutcome{leader: 2, sent: 100, acked: 90, failed: 10, lost: 3, ackedFault: 20, lostFault: 3, appendsResume: -1, deliveriesResume: time.Second,
				t: leaderTimes{fault: time.Now(), newLeader: 3}}
			o.record(&res, c)
			names = append(names, c.name())
		}
		res.setting("cases", strings.Join(names, ","))
		res.setting("brokers", "a,b,c")
		p := describe(res, x.text, true)
		if len(p.Missing) > 0 || len(p.Notes) < 4 {
			t.Fatalf("%s: missing %v, notes %d", x.text.Title, p.Missing, len(p.Notes))
		}
		if !strings.Contains(p.Figure, "acks=1") && len(x.cases) > 1 {
			t.Errorf("%s: %s", x.text.Title, p.Figure)
		}
		if strings.Contains(p.Figure, "acks=1:") && !strings.Contains(p.Figure, "allowed by acks=1") {
			t.Errorf("%s: an acks=1 loss not labelled: %s", x.text.Title, p.Figure)
		}
		if !strings.Contains(p.Figure, "durable 201s again never") {
			t.Errorf("%s: %s", x.text.Title, p.Figure)
		}
	}
}

// runOnClusterKafka runs experiment run small on the cluster profile's
// Kafka within timeout, logs its figure and returns its result; it skips
// t when the profile does not run or cannot be disturbed from here, and
// fails it when run does.
func runOnClusterKafka(t testing.TB, run func(context.Context, Env, Size) (Result, error), timeout time.Duration) Result {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: kills or cuts off a broker of the cluster profile")
	}
	if os.Getenv("CLUSTER_KAFKA_BROKERS") == "" {
		t.Skip(`CLUSTER_KAFKA_BROKERS is not set: the cluster profile's Kafka does not run (bash scripts/cluster.sh up kafka; eval "$(bash scripts/cluster.sh env running)")`)
	}
	if os.Geteuid() != 0 {
		t.Skip("root: scripts/cluster.sh kills and cuts off the broker")
	}
	env := Env{Out: logWriter{t}}.WithDefaults()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	res, err := run(ctx, env, Small)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s", Describe(res).Figure)
	return res
}

// TestKafkaLeaderKill runs kafka-leader-kill small on the cluster
// profile: the leader killed under load with acks=all loses nothing
// acknowledged and delivers nothing absent from the log.
func TestKafkaLeaderKill(t *testing.T) {
	res := runOnClusterKafka(t, runKafkaLeaderKill, 10*time.Minute)
	if res.AckedLost != 0 || res.Metrics["kill.acks_all.phantom"] != 0 {
		t.Errorf("acks=all: %d acknowledged lost, %g phantom", res.AckedLost, res.Metrics["kill.acks_all.phantom"])
	}
}

// TestKafkaLeaderCut runs kafka-leader-cut small on the cluster profile:
// with acks=all an isolated leader loses nothing acknowledged; acks=1 may
// (a documented loss), and neither delivers a phantom.
func TestKafkaLeaderCut(t *testing.T) {
	res := runOnClusterKafka(t, runKafkaLeaderCut, 15*time.Minute)
	m := res.Metrics
	if n := m["isolate.acks_all.lost"] + m["isolate.acks_all.undelivered"]; n != 0 {
		t.Errorf("acks=all, leader isolated: %g acknowledged lost", n)
	}
	if res.AckedLost > 0 && !res.LossDocumented {
		t.Errorf("%d lost, not all under acks=1", res.AckedLost)
	}
	for _, c := range leaderCutCases(Small) {
		if p := m[driver.Metric(c.name()+".phantom")]; p != 0 {
			t.Errorf("%s: %g phantom deliveries", c.name(), p)
		}
	}
}
