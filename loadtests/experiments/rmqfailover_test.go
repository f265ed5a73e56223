package experiments

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/launch"
)

// TestClusterExperimentsSayNotRun: without the cluster profile
// (CLUSTER_RABBITMQ_URLS unset, or naming other than three nodes, for
// the RabbitMQ ones; CLUSTER_KAFKA_BROKERS unset for Kafka's) each
// cluster experiment fails at once with "not run: <reason>", so the run
// records an error and the report prints no figure; and a plain run
// (Select with no names) leaves them out.
func TestClusterExperimentsSayNotRun(t *testing.T) {
	t.Parallel()
	cases := []struct {
		env  Env
		want string
	}{
		{Env{}, "not run: CLUSTER_RABBITMQ_URLS is not set"},
		{Env{ClusterRabbitMQURLs: []string{"amqp://a/", "amqp://b/"}}, "not run: CLUSTER_RABBITMQ_URLS names 2 nodes"},
	}
	for _, x := range Cluster() {
		cases := cases
		if !strings.HasPrefix(x.Name, "rabbitmq-") {
			// The others need another cluster: without it, "not run".
			cases = []struct {
				env  Env
				want string
			}{{Env{}, "not run: "}}
		}
		for _, c := range cases {
			// x.Run, not Run: Run fills the Env from the environment,
			// which may name a running cluster.
			r, err := x.Run(context.Background(), c.env, Small)
			if err == nil || !strings.HasPrefix(err.Error(), c.want) || len(r.Metrics) != 0 {
				t.Errorf("%s with %+v: %+v, %v; want an error starting %q and no figure", x.Name, c.env, r, err, c.want)
				continue
			}
			r.Name, r.Error, r.AckedLost = x.Name, err.Error(), -1
			if p := Describe(r); p.Figure != "" || p.Title == "" {
				t.Errorf("%s: described as %+v", x.Name, p)
			}
		}
	}
	all, err := Select(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range all {
		if IsCluster(x.Name) {
			t.Errorf("a plain run includes %s, which needs the cluster profile", x.Name)
		}
	}
	if xs, err := Select([]string{RabbitMQLeaderCut}); err != nil || len(xs) != 1 || xs[0].Name != RabbitMQLeaderCut {
		t.Errorf("Select(%s) = %v, %v", RabbitMQLeaderCut, xs, err)
	}
}

// clusterRabbitEnv is the Env of a test against the cluster profile's
// RabbitMQ, or skips: under -short, or when CLUSTER_RABBITMQ_URLS is not
// set (bash scripts/cluster.sh env running).
func clusterRabbitEnv(t *testing.T) Env {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: kills or cuts off a node of the cluster profile")
	}
	v := strings.TrimSpace(os.Getenv("CLUSTER_RABBITMQ_URLS"))
	if v == "" {
		t.Skip(`CLUSTER_RABBITMQ_URLS is not set: start the cluster profile's RabbitMQ (root: bash scripts/cluster.sh up rabbitmq) and eval "$(bash scripts/cluster.sh env running)"`)
	}
	root, err := launch.Root()
	if err != nil {
		t.Fatal(err)
	}
	return Env{Root: root, Out: logWriter{t}, ClusterRabbitMQURLs: strings.Split(v, ","), PostgresURL: os.Getenv("DATABASE_URL")}
}

// checkRMQFailover runs a RabbitMQ failover experiment small and checks
// what the design promises: no task answered 202 lost, no phantom (every
// held delivery given back), publishing and deliveries resumed, and the
// cluster whole again.
func checkRMQFailover(t *testing.T, name string) {
	env := clusterRabbitEnv(t)
	xs, err := Select([]string{name})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	res, err := xs[0].Run(ctx, env, Small)
	if err != nil {
		t.Fatal(err)
	}
	p := Describe(res)
	t.Logf("%s (%.1f s): %s", p.Title, res.DurationS, p.Figure)
	m := res.Metrics
	if len(p.Missing) > 0 || res.AckedLost != 0 || m["acked"] == 0 || m["phantom"] != 0 || m["probe_held"] != probeMessages {
		t.Errorf("%s: %+v", name, res)
	}
	if m["publish_resumed"] != 1 || m["delivery_resumed"] != 1 || m["unexplained_records"] != 0 || m["503_without_kind"] != 0 {
		t.Errorf("%s: publishing or deliveries did not resume, or answers unaccounted for: %+v", name, m)
	}
}

// TestRabbitMQLeaderKill runs rabbitmq-quorum-leader-kill small against
// the cluster profile (the killed node is started again).
func TestRabbitMQLeaderKill(t *testing.T) { checkRMQFailover(t, RabbitMQLeaderKill) }

// TestRabbitMQLeaderCut runs rabbitmq-quorum-leader-cut small against
// the cluster profile (the cut node is healed).
func TestRabbitMQLeaderCut(t *testing.T) { checkRMQFailover(t, RabbitMQLeaderCut) }
