package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue/conformance"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// clusterURLs returns CLUSTER_RABBITMQ_URLS (one AMQP URL per node of
// the cluster profile, rmq1 first: `bash scripts/cluster.sh env`), or
// skips: the cluster profile is not part of make test.
func clusterURLs(t testing.TB) []string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: the cluster profile's test needs the running cluster")
	}
	v := strings.TrimSpace(os.Getenv("CLUSTER_RABBITMQ_URLS"))
	if v == "" {
		t.Skip(`CLUSTER_RABBITMQ_URLS is not set: the cluster profile is not part of make test; start it (bash scripts/cluster.sh up rabbitmq, root) and eval "$(bash scripts/cluster.sh env running)" first`)
	}
	if os.Geteuid() != 0 {
		t.Skip("killing a cluster node needs root (its process runs as the rabbitmq user)")
	}
	return strings.Split(v, ",")
}

// clusterScript runs scripts/cluster.sh with args (STACK_DIR and the rest
// of the environment passed on) and returns its output.
func clusterScript(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "bash", append([]string{"../../scripts/cluster.sh"}, args...)...)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("cluster.sh %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// killClusterNode kills the cluster node with SIGKILL (kill -9, no
// goodbye to its clients): its OS process, which the node itself names
// (rabbitmqctl eval 'os:getpid().'). Nodes are rmq1, rmq2, rmq3.
func killClusterNode(ctx context.Context, node string) error {
	out, err := clusterScript(ctx, "rabbitmqctl", node, "eval", "os:getpid().")
	if err != nil {
		return err
	}
	pid, err := strconv.Atoi(strings.Trim(strings.TrimSpace(out), `"`))
	if err != nil || pid <= 1 {
		return fmt.Errorf("%s's pid: %q", node, out)
	}
	return syscall.Kill(pid, syscall.SIGKILL)
}

// clusterLoad is a load of single tasks posted one after another: the
// ids answered 202, and the other answers counted by status and kind.
type clusterLoad struct {
	mu     sync.Mutex
	acked  []string
	others map[string]int
}

func (l *clusterLoad) run(base string, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		s, id, other := postOne(base)
		l.mu.Lock()
		if s == http.StatusAccepted {
			l.acked = append(l.acked, id)
		} else {
			l.others[other]++
		}
		l.mu.Unlock()
		if s != http.StatusAccepted {
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// postOne posts one task to base (from a goroutine of the test's own: no
// testing.TB) and returns the status, the task's id when it was 202, and
// else a short description of the answer.
func postOne(base string) (status int, id, other string) {
	resp, err := clusterClient.Post(base+"/tasks", "application/json", strings.NewReader(`{"kind":"failover"}`))
	if err != nil {
		return 0, "", "transport error"
	}
	defer resp.Body.Close()
	var v struct {
		ID   string `json:"id"`
		Kind string `json:"kind"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&v)
	return resp.StatusCode, v.ID, fmt.Sprintf("%d %s", resp.StatusCode, v.Kind)
}

// clusterClient bounds every request of the cluster test's load.
var clusterClient = &http.Client{Timeout: 30 * time.Second}

func (l *clusterLoad) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked)
}

// TestClusterNodeKilled: the service on the cluster profile's three
// RabbitMQ nodes (RABBITMQ_URL lists them all) with quorum queues, under
// a steady load of single POST /tasks; the node it is connected to is
// killed with SIGKILL. The service reconnects to another node by itself,
// goes on taking and delivering tasks there, and every task answered 202
// is done: none lost. A task may have been worked twice (its delivery
// redelivered while in work after the consumer's connection died):
// at-least-once, and its record finished once. The node is started again
// at the end.
func TestClusterNodeKilled(t *testing.T) {
	urls := clusterURLs(t)
	ctx := kittest.Context(t, 5*time.Minute)
	e := env{pgURL: kittest.PostgresURL(t), amqpURL: strings.Join(urls, ","), fanouts: new([]string)}
	e.schema = kittest.Schema(t, e.pgURL)
	e.queue = kittest.UniqueName(t, "failover")
	t.Cleanup(func() { deleteTopology(t, e.amqpURL, e.queue, nil) })
	tg := startTarget(t, e, conformance.Settings{Workers: 4}, map[string]string{"QUEUE_TYPE": "quorum", "WORK_MS": "5"})
	q := tg.App()
	kittest.Eventually(t, 30*time.Second, "a session", func() bool { return q.node() >= 0 })
	node := q.node()
	name := fmt.Sprintf("rmq%d", node+1)

	load := &clusterLoad{others: map[string]int{}}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { load.run(tg.URL(), stop) })
	stopLoad := sync.OnceFunc(func() { close(stop); wg.Wait() })
	t.Cleanup(stopLoad)
	kittest.Eventually(t, time.Minute, "50 tasks accepted before the kill", func() bool { return load.count() >= 50 })

	t.Logf("killing %s, the service's node", name)
	if err := killClusterNode(ctx, name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if out, err := clusterScript(context.Background(), "up", "rabbitmq"); err != nil {
			t.Errorf("restarting %s: %v", name, err)
		} else {
			t.Logf("%s started again: %s", name, lastLine(out))
		}
	})
	before := load.count()
	kittest.Eventually(t, 2*time.Minute, "a session on another node", func() bool {
		n := q.node()
		return n >= 0 && n != node
	})
	t.Logf("reconnected to rmq%d", q.node()+1)
	kittest.Eventually(t, 2*time.Minute, "50 more tasks accepted after the reconnect", func() bool { return load.count() >= before+50 })
	stopLoad()

	ids := load.acked
	var done, twice int
	kittest.Eventually(t, 2*time.Minute, "every task answered 202 done", func() bool {
		if err := tg.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status = 'done'), count(*) FILTER (WHERE attempts > 1)
		   FROM tasks WHERE id = ANY($1::uuid[])`, ids).Scan(&done, &twice); err != nil {
			t.Fatal(err)
		}
		return done == len(ids)
	})
	t.Logf("%d tasks answered 202, all done; %d of them worked twice (redelivered while in work: at-least-once); other answers: %v", len(ids), twice, load.others)
	if n := q.node(); n == node {
		t.Errorf("back on the killed node %s", name)
	}
}

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
