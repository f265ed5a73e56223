package experiments

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
)

// TestBrokerRestart runs the broker-restart experiment small: a private
// RabbitMQ node (and a private Postgres) restarted under light load, in
// both publish modes, stopped and killed with SIGKILL. Every
// acknowledged task is processed, dual-write answers 503 during the
// outage, outbox mode accepts writes, and the private node is gone after.
func TestBrokerRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts a private RabbitMQ node and the rabbitmq service")
	}
	if _, err := os.Stat("/usr/lib/rabbitmq/bin/rabbitmq-server"); err != nil {
		t.Skip("rabbitmq-server is not installed (scripts/stack.sh deps)")
	}
	if _, err := pgBindir(); err != nil {
		t.Skip(err)
	}
	t.Parallel()
	ctx := t.Context()
	// A private Postgres too: the test never loads the stack's servers.
	cl, err := newPGCluster(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	before, _ := filepath.Glob(filepath.Join(os.TempDir(), "wpe-rabbit-exp-*"))
	start := time.Now()
	res, err := runBrokerRestart(ctx, Env{Out: logWriter{t}, PostgresURL: cl.URL()}, Small)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s (%.1f s): %s", Describe(res).Title, time.Since(start).Seconds(), Describe(res).Figure)
	if res.AckedLost != 0 {
		t.Errorf("%d acknowledged tasks lost", res.AckedLost)
	}
	m := res.Metrics
	if m["classic.dual-write.refused_503"] == 0 {
		t.Errorf("dual-write answered no 503 while the node was down: %v", m)
	}
	if m["classic.outbox.accepted_while_down"] == 0 {
		t.Errorf("outbox mode accepted nothing while the node was down: %v", m)
	}
	for _, c := range brokerCases(Small) {
		if m[driver.Metric(c.name()+".stranded")] != 0 {
			t.Errorf("%s: %v records left undone", c.name(), m[driver.Metric(c.name()+".stranded")])
		}
		// Every 503 says its kind, and no record exists that no answer
		// accounts for (a "not_recorded" 503 whose task was recorded).
		if m[driver.Metric(c.name()+".503_without_kind")] != 0 || m[driver.Metric(c.name()+".unexplained_records")] != 0 {
			t.Errorf("%s: %v 503s without a kind, %v records no answer accounts for", c.name(),
				m[driver.Metric(c.name()+".503_without_kind")], m[driver.Metric(c.name()+".unexplained_records")])
		}
	}
	if m["classic.dual-write.kill9.refused_503"] == 0 {
		t.Errorf("dual-write answered no 503 while the node was killed: %v", m)
	}
	after, _ := filepath.Glob(filepath.Join(os.TempDir(), "wpe-rabbit-exp-*"))
	if len(after) > len(before) {
		t.Errorf("the private node's directory is left: %v", after)
	}
}
