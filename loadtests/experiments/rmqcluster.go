package experiments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// rmqCluster is the cluster profile's RabbitMQ (scripts/cluster.sh,
// docs/cluster.md) as an experiment uses it: three nodes rmq1, rmq2,
// rmq3, whose AMQP URLs CLUSTER_RABBITMQ_URLS lists in that order, and
// the script that kills, cuts off, heals and restarts them. Its nodes
// are shared: an experiment puts back every node it took down.
type rmqCluster struct {
	urls   []string
	script string
	// serverVersion is what the first node says it runs.
	serverVersion string
}

// notRun is the error of an experiment that needs a part that is not
// there: the report prints it as the reason, never a figure.
func notRun(format string, args ...any) error {
	return fmt.Errorf("not run: "+format, args...)
}

// openRMQCluster checks that the cluster profile's RabbitMQ is there and
// usable (CLUSTER_RABBITMQ_URLS set, three nodes each answering, root for
// kill and cut) and returns it; otherwise an error saying "not run" and
// why.
func openRMQCluster(env Env) (*rmqCluster, error) {
	if len(env.ClusterRabbitMQURLs) == 0 {
		return nil, notRun(`CLUSTER_RABBITMQ_URLS is not set: this experiment needs the cluster profile's RabbitMQ (as root: bash scripts/cluster.sh up rabbitmq, then eval "$(bash scripts/cluster.sh env running)")`)
	}
	if n := len(env.ClusterRabbitMQURLs); n != 3 {
		return nil, notRun("CLUSTER_RABBITMQ_URLS names %d nodes; the cluster profile has 3 (rmq1, rmq2, rmq3)", n)
	}
	if os.Geteuid() != 0 {
		return nil, notRun("killing or cutting off a cluster node needs root")
	}
	root, err := env.root()
	if err != nil {
		return nil, notRun("no repository root for scripts/cluster.sh: %v", err)
	}
	c := &rmqCluster{urls: env.ClusterRabbitMQURLs, script: filepath.Join(root, "scripts", "cluster.sh")}
	if _, err := os.Stat(c.script); err != nil {
		return nil, notRun("%v", err)
	}
	for i := range c.urls {
		conn, err := c.dial(i)
		if err != nil {
			return nil, notRun("%s does not answer (%v): is the cluster running? bash scripts/cluster.sh status", c.node(i), err)
		}
		if v, ok := conn.Properties["version"].(string); ok && c.serverVersion == "" {
			c.serverVersion = v
		}
		_ = conn.Close()
	}
	return c, nil
}

// version is the RabbitMQ version the nodes run ("unknown" when the
// first did not say).
func (c *rmqCluster) version() string {
	if c.serverVersion == "" {
		return "unknown"
	}
	return c.serverVersion
}

// partitionHandling is the cluster_partition_handling setting the first
// node that answers runs with (pause_minority as the profile builds it),
// or "unknown".
func (c *rmqCluster) partitionHandling(ctx context.Context) string {
	for i := range c.urls {
		out, err := c.ctl(ctx, i, "eval", "application:get_env(rabbit, cluster_partition_handling).")
		if err != nil {
			continue
		}
		// {ok,pause_minority}
		v := strings.TrimSpace(lastLines(out, 1))
		if rest, ok := strings.CutPrefix(v, "{ok,"); ok {
			return strings.TrimSuffix(rest, "}")
		}
		return v
	}
	return "unknown"
}

// node is the name of the node at index i (rmq1 for 0).
func (c *rmqCluster) node(i int) string { return "rmq" + strconv.Itoa(i+1) }

// index is the index of node (rmq2: 1), or -1.
func (c *rmqCluster) index(node string) int {
	i, err := strconv.Atoi(strings.TrimPrefix(node, "rmq"))
	if err != nil || i < 1 || i > len(c.urls) || !strings.HasPrefix(node, "rmq") {
		return -1
	}
	return i - 1
}

// host is the address (host:port) of node i's AMQP listener.
func (c *rmqCluster) host(i int) string {
	u, err := url.Parse(c.urls[i])
	if err != nil {
		return ""
	}
	return u.Host
}

// dial connects to node i, waiting at most 3 s for it.
func (c *rmqCluster) dial(i int) (*amqp.Connection, error) {
	return amqp.DialConfig(c.urls[i], amqp.Config{Dial: amqp.DefaultDial(3 * time.Second), Heartbeat: 10 * time.Second})
}

// run runs scripts/cluster.sh with args (the environment passed on, so
// STACK_DIR holds), for at most timeout, and returns its output.
func (c *rmqCluster) run(ctx context.Context, timeout time.Duration, args ...string) (string, error) {
	return runClusterScript(ctx, c.script, timeout, args...)
}

// runClusterScript runs script (scripts/cluster.sh) with args, the
// environment passed on (STACK_DIR), for at most timeout, and returns its
// output; its error quotes the output's last lines.
func runClusterScript(ctx context.Context, script string, timeout time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", append([]string{script}, args...)...)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("cluster.sh %s: %w: %s", strings.Join(args, " "), err, lastLines(string(out), 5))
	}
	return string(out), nil
}

// ctl runs rabbitmqctl against node i (from its namespace) and returns
// its output.
func (c *rmqCluster) ctl(ctx context.Context, i int, args ...string) (string, error) {
	return c.run(ctx, 60*time.Second, append([]string{"rabbitmqctl", c.node(i)}, args...)...)
}

// leader asks node i which member of queue's Raft cluster is its
// leader (rabbit_quorum_queue:status, the members' own view: each is
// asked, one cut off answers timeout after a few seconds) and returns
// its node name ("rmq2"; "" while there is none). Not rabbitmqctl
// list_queues' leader column: that is the queue's metadata record,
// which here stayed on a cut-off leader until the Erlang distribution
// gave it up (the net tick, about 60 s), long after Raft had elected
// another.
func (c *rmqCluster) leader(ctx context.Context, i int, queue string) (string, error) {
	expr := `case [proplists:get_value(<<"Node Name">>, P) || P <- rabbit_quorum_queue:status(<<"/">>, <<"` + queue +
		`">>), proplists:get_value(<<"Raft State">>, P) =:= leader] of [N | _] -> N; [] -> none end.`
	out, err := c.ctl(ctx, i, "eval", expr)
	if err != nil {
		return "", err
	}
	v := strings.Trim(strings.TrimSpace(lastLines(out, 1)), "'")
	if v == "none" {
		return "", nil
	}
	// rabbit@rmq2.cluster.wpe → rmq2
	_, host, ok := strings.Cut(v, "@")
	if !ok {
		return "", fmt.Errorf("status of %s on %s: %q", queue, c.node(i), lastLines(out, 3))
	}
	name, _, _ := strings.Cut(host, ".")
	return name, nil
}

// waitLeader asks node i until queue has a leader other than not (""
// for any) and returns it, or fails after timeout.
func (c *rmqCluster) waitLeader(ctx context.Context, i int, queue, not string, timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) && ctx.Err() == nil {
		l, err := c.leader(ctx, i, queue)
		if err == nil && l != "" && l != not {
			return l, nil
		}
		last = err
		sleep(ctx, 200*time.Millisecond)
	}
	return "", fmt.Errorf("no leader of %s other than %q seen from %s within %s (last error: %v)", queue, not, c.node(i), timeout, last)
}

// pid is node i's OS process, as the node names it itself (rabbitmqctl
// eval 'os:getpid().'): the process to kill, so that nothing else is
// ever signalled.
func (c *rmqCluster) pid(ctx context.Context, i int) (int, error) {
	out, err := c.ctl(ctx, i, "eval", "os:getpid().")
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.Trim(strings.TrimSpace(lastLines(out, 1)), `"`))
	if err != nil || pid <= 1 {
		return 0, fmt.Errorf("%s's pid: %q", c.node(i), out)
	}
	return pid, nil
}

// restart starts every node that is not running (cluster.sh up rabbitmq
// is idempotent: it waits for each node to run).
func (c *rmqCluster) restart(ctx context.Context) error {
	_, err := c.run(ctx, 5*time.Minute, "up", "rabbitmq")
	return err
}

// cut takes node i's network link down; heal brings it back.
func (c *rmqCluster) cut(ctx context.Context, i int) error {
	_, err := c.run(ctx, 30*time.Second, "cut", c.node(i))
	return err
}

func (c *rmqCluster) heal(ctx context.Context, i int) error {
	_, err := c.run(ctx, 30*time.Second, "heal", c.node(i))
	return err
}

// waitWhole waits until node i sees all three nodes running (after a
// restart or a heal), or fails after timeout.
func (c *rmqCluster) waitWhole(ctx context.Context, i int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) && ctx.Err() == nil {
		out, err := c.ctl(ctx, i, "cluster_status", "--formatter", "json", "--quiet")
		var st struct {
			Running []string `json:"running_nodes"`
		}
		if j := strings.Index(out, "{"); err == nil && j >= 0 && json.Unmarshal([]byte(out[j:]), &st) == nil && len(st.Running) == len(c.urls) {
			return nil
		}
		last = lastLines(out, 2)
		sleep(ctx, time.Second)
	}
	return fmt.Errorf("%s does not see all %d nodes running within %s: %s", c.node(i), len(c.urls), timeout, last)
}

// deleteQueues deletes queues and exchanges through the first node that
// answers (each on a channel of its own: deleting a missing one closes
// the channel).
func (c *rmqCluster) deleteQueues(queues, exchanges []string) error {
	var errs []error
	for i := range c.urls {
		conn, err := c.dial(i)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		defer conn.Close()
		for _, q := range queues {
			if ch, err := conn.Channel(); err == nil {
				_, _ = ch.QueueDelete(q, false, false, false)
				_ = ch.Close()
			}
		}
		for _, x := range exchanges {
			if ch, err := conn.Channel(); err == nil {
				_ = ch.ExchangeDelete(x, false, false)
				_ = ch.Close()
			}
		}
		return nil
	}
	return errors.Join(errs...)
}
