package experiments

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/launch"
)

// brokerExperiments are the broker-restart experiments (issue 14, item
// 7): each restarts a private broker node of its own under light load,
// RabbitMQ's (broker-restart) and Kafka's (kafka-broker-restart).
func brokerExperiments() []Experiment {
	// Full: four cases, each a node restart (about 10 s for RabbitMQ to
	// stop and start) between 5 s of load before and after.
	return []Experiment{{Name: "broker-restart", Run: runBrokerRestart, Full: 90 * time.Second}, kafkaBrokerRestart()}
}

// brokerCase is one service configuration the broker restart is tried on.
type brokerCase struct {
	queueType, publishMode string
}

func (c brokerCase) name() string { return c.queueType + "." + c.publishMode }

// brokerCases are the configurations at size: Small tries the classic
// queue in both publish modes, Full adds quorum queues.
func brokerCases(size Size) []brokerCase {
	cs := []brokerCase{{"classic", "dual-write"}, {"classic", "outbox"}}
	if size == Full {
		cs = append(cs, brokerCase{"quorum", "dual-write"}, brokerCase{"quorum", "outbox"})
	}
	return cs
}

// brokerLoad is the light load of a size: the rate, how long it runs
// before the restart and after the broker is back.
func brokerLoad(size Size) (rate float64, before, after time.Duration) {
	if size == Full {
		return 100, 5 * time.Second, 5 * time.Second
	}
	return 50, 2 * time.Second, 2 * time.Second
}

// runBrokerRestart starts a private RabbitMQ node, then for each case runs
// the rabbitmq service on it (a schema and queue of its own) under light
// load, stops and starts the node, and measures the three figures: how
// the service answered during the outage (503s and how fast), how long
// after the node was back the service was ready again, and how many
// acknowledged tasks were never processed.
func runBrokerRestart(ctx context.Context, env Env, size Size) (Result, error) {
	start := time.Now()
	res := Result{
		Name: "broker-restart", Title: "RabbitMQ restart under load",
		Metrics: map[string]float64{},
	}
	logf := func(format string, args ...any) {
		if env.Out != nil {
			fmt.Fprintf(env.Out, "broker-restart: "+format+"\n", args...)
		}
	}
	node, err := startPrivateRabbit(ctx)
	if err != nil {
		return res, err
	}
	defer node.close()
	logf("private node %s on :%d", node.name, node.port)

	root, err := env.root()
	if err != nil {
		return res, err
	}
	l, logDir, err := newLauncher(root, "wpe-broker-restart-logs-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(logDir)
	defer func() { _ = l.StopAll(30 * time.Second) }()
	pgURL := env.PostgresURL
	if pgURL == "" {
		pgURL = defaultPostgresURL
	}

	var figures []string
	var totalLost int64
	for _, c := range brokerCases(size) {
		o, err := brokerCaseRun(ctx, l, node, pgURL, c, size, logf)
		if err != nil {
			return res, fmt.Errorf("%s: %w", c.name(), err)
		}
		totalLost += o.lost
		for k, v := range o.metrics() {
			res.Metrics[c.name()+"."+k] = v
		}
		figures = append(figures, o.figure(c))
	}
	res.AckedLost = totalLost
	res.Happens = "While the broker is down, dual-write refuses writes with 503 before recording anything, and outbox mode keeps accepting them into its outbox; once the node is back the service reconnects by itself, and every task answered 202 is processed."
	res.Figure = strings.Join(figures, "; ")
	res.UserMust = "Retry on 503 (dual-write), or run PUBLISH_MODE=outbox to take writes through a broker outage; keep the reconciler on (RECONCILE_AFTER) for publishes lost in the outage's first instant."
	res.Notes = append(res.Notes, fmt.Sprintf("a private single RabbitMQ node (own node name, ports and mnesia directory) stopped with rabbitmqctl stop and started again; load %g tasks/s of single POST /tasks", func() float64 { r, _, _ := brokerLoad(size); return r }()),
		"the Kafka broker restart is its own experiment, kafka-broker-restart")
	res.DurationS = math.Round(time.Since(start).Seconds()*10) / 10
	return res, nil
}

const defaultPostgresURL = "postgres://postgres:postgres@localhost:5432/wpe?sslmode=disable"

// brokerOutcome is what one case measured.
type brokerOutcome struct {
	accepted, refused503, otherErrors int
	max503                            time.Duration // slowest 503 answer
	downFor                           time.Duration // stop begun → node ready again
	readyAfter                        time.Duration // node ready → the service's /readyz 200
	firstAcceptAfter                  time.Duration // node ready → first 202 to a request sent after it
	acceptedWhileDown                 int
	lost                              int64 // answered 202, not done after the settle
	stranded                          int64 // records (202 or not) left undone
	republished, relayed              int64
}

func (o brokerOutcome) metrics() map[string]float64 {
	return map[string]float64{
		"accepted": float64(o.accepted), "refused_503": float64(o.refused503), "other_errors": float64(o.otherErrors),
		"max_503_ms": ms(o.max503), "down_s": secs(o.downFor), "ready_after_s": secs(o.readyAfter),
		"first_accept_after_s": secs(o.firstAcceptAfter), "accepted_while_down": float64(o.acceptedWhileDown),
		"acked_lost": float64(o.lost), "stranded": float64(o.stranded),
		"republished": float64(o.republished), "relayed": float64(o.relayed),
	}
}

func (o brokerOutcome) figure(c brokerCase) string {
	return fmt.Sprintf("%s %s: node stopped and started again in %.1f s; %d answered 503 (slowest %.0f ms), %d accepted while down, %d other errors; service ready %.1f s after the node; %d of %d acknowledged lost",
		c.queueType, c.publishMode, secs(o.downFor), o.refused503, ms(o.max503), o.acceptedWhileDown, o.otherErrors, secs(o.readyAfter), o.lost, o.accepted)
}

func ms(d time.Duration) float64   { return math.Round(float64(d.Microseconds())/100) / 10 }
func secs(d time.Duration) float64 { return math.Round(d.Seconds()*100) / 100 }

// answer is one request of the load.
type answer struct {
	sent    time.Time
	took    time.Duration
	status  int
	id      string
	errText string
}

// brokerCaseRun runs one case: service up, load, restart, load, settle,
// count.
func brokerCaseRun(ctx context.Context, l *launch.Launcher, node *rabbitNode, pgURL string, c brokerCase, size Size, logf func(string, ...any)) (brokerOutcome, error) {
	var o brokerOutcome
	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
	schema := "exp_broker_" + suffix
	pg, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		return o, fmt.Errorf("postgres: %w", err)
	}
	defer pg.Close(context.WithoutCancel(ctx))
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_, _ = pg.Exec(dctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
	}()
	port, err := freePort()
	if err != nil {
		return o, err
	}
	_ = l.Stop("rabbitmq", 30*time.Second)
	_, err = l.Start(ctx, "rabbitmq", port, map[string]string{
		"RABBITMQ_URL": node.url(), "RABBITMQ_QUEUE": "exp-" + suffix, "QUEUE_TYPE": c.queueType,
		"PUBLISH_MODE": c.publishMode, "DATABASE_URL": pgURL, "DATABASE_SCHEMA": schema,
		"RECONCILE_AFTER": "5s", "RECONCILE_INTERVAL": "1s", "LOG_LEVEL": "warn",
	}, 2*time.Minute)
	if err != nil {
		return o, err
	}
	defer func() { _ = l.Stop("rabbitmq", 30*time.Second) }()
	base := fmt.Sprintf("http://127.0.0.1:%d", port)

	rate, before, after := brokerLoad(size)
	var mu sync.Mutex
	var answers []answer
	loadCtx, stopLoad := context.WithCancel(ctx)
	var inflight sync.WaitGroup
	client := &http.Client{Timeout: 20 * time.Second}
	loadDone := make(chan struct{})
	go func() {
		defer close(loadDone)
		t := time.NewTicker(time.Duration(float64(time.Second) / rate))
		defer t.Stop()
		for {
			select {
			case <-loadCtx.Done():
				return
			case <-t.C:
			}
			inflight.Go(func() {
				a := post(client, base+"/tasks")
				mu.Lock()
				answers = append(answers, a)
				mu.Unlock()
			})
		}
	}()
	sleep(ctx, before)
	logf("%s: stopping the node", c.name())
	down := time.Now()
	if err := node.stop(ctx); err != nil {
		stopLoad()
		return o, err
	}
	if err := node.start(ctx); err != nil {
		stopLoad()
		return o, err
	}
	up := time.Now()
	o.downFor = up.Sub(down)
	for ctx.Err() == nil && time.Since(up) < 2*time.Minute {
		if ready(client, base) {
			o.readyAfter = time.Since(up)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	logf("%s: node back after %.1f s, service ready %.1f s later", c.name(), o.downFor.Seconds(), o.readyAfter.Seconds())
	sleep(ctx, after)
	stopLoad()
	<-loadDone
	inflight.Wait()

	var ids []string
	first := time.Duration(-1)
	for _, a := range answers {
		switch {
		case a.status == http.StatusAccepted:
			o.accepted++
			ids = append(ids, a.id)
			if a.sent.After(down) && a.sent.Add(a.took).Before(up) {
				o.acceptedWhileDown++
			}
			if a.sent.After(up) && (first < 0 || a.sent.Sub(up) < first) {
				first = a.sent.Sub(up)
			}
		case a.status == http.StatusServiceUnavailable:
			o.refused503++
			o.max503 = max(o.max503, a.took)
		default:
			o.otherErrors++
		}
	}
	o.firstAcceptAfter = max(first, 0)
	if o.accepted == 0 {
		return o, errors.New("no request was accepted")
	}
	// Settle: every accepted task processed, and every record done (the
	// reconciler republishes what a lost publish left, after 5 s).
	deadline := time.Now().Add(time.Minute)
	tasks := pgx.Identifier{schema, "tasks"}.Sanitize()
	for {
		var done, undone int64
		err := pg.QueryRow(ctx, `SELECT count(*) FILTER (WHERE id = ANY($1::uuid[]) AND status = 'done'),
		        count(*) FILTER (WHERE status <> 'done') FROM `+tasks, ids).Scan(&done, &undone)
		if err != nil {
			return o, fmt.Errorf("count tasks: %w", err)
		}
		o.lost, o.stranded = int64(o.accepted)-done, undone
		if (o.lost == 0 && o.stranded == 0) || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	counters := stats(client, base)
	o.republished, o.relayed = counters["republished"], counters["relayed"]
	logf("%s: %s", c.name(), o.figure(c))
	return o, ctx.Err()
}

// post sends one task.
func post(client *http.Client, url string) answer {
	a := answer{sent: time.Now()}
	resp, err := client.Post(url, "application/json", bytes.NewBufferString(`{"kind":"broker-restart"}`))
	a.took = time.Since(a.sent)
	if err != nil {
		a.errText = err.Error()
		return a
	}
	defer resp.Body.Close()
	a.status = resp.StatusCode
	var body struct {
		ID string `json:"id"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&body)
	a.id = body.ID
	return a
}

func ready(client *http.Client, base string) bool {
	resp, err := client.Get(base + "/readyz")
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func stats(client *http.Client, base string) map[string]int64 {
	var s struct {
		Counters map[string]int64 `json:"counters"`
	}
	resp, err := client.Get(base + "/stats")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	_ = json.NewDecoder(resp.Body).Decode(&s)
	return s.Counters
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// rabbitNode is a private RabbitMQ node: its own node name, AMQP and
// distribution ports, mnesia and log directories under a temporary
// directory, and no plugins. It shares epmd (which maps node names to
// ports) and the Erlang cookie with the stack's node, nothing else.
type rabbitNode struct {
	name, dir, runAs, home string
	port, distPort         int
}

func (n *rabbitNode) url() string { return fmt.Sprintf("amqp://guest:guest@127.0.0.1:%d/", n.port) }

// startPrivateRabbit prepares and starts a node; close stops it and
// removes its directory.
func startPrivateRabbit(ctx context.Context) (*rabbitNode, error) {
	bindir := "/usr/lib/rabbitmq/bin"
	if _, err := os.Stat(filepath.Join(bindir, "rabbitmq-server")); err != nil {
		return nil, fmt.Errorf("rabbitmq-server not found in %s (scripts/stack.sh deps installs it): %w", bindir, err)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dist, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "wpe-rabbit-exp-")
	if err != nil {
		return nil, err
	}
	n := &rabbitNode{name: fmt.Sprintf("wpe-exp-%d-%d@localhost", os.Getpid(), port), dir: dir, port: port, distPort: dist}
	if os.Geteuid() == 0 {
		// As scripts/stack.sh: the node runs as the rabbitmq user, whose
		// home holds the cookie.
		u, err := user.Lookup("rabbitmq")
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("running as root needs the rabbitmq user: %w", err)
		}
		n.runAs, n.home = "rabbitmq", u.HomeDir
	} else {
		n.home = os.Getenv("HOME")
	}
	files := map[string]string{
		"rabbitmq.conf":   fmt.Sprintf("listeners.tcp.default = 127.0.0.1:%d\nloopback_users.guest = true\nlog.console = false\nlog.file.level = warning\n", port),
		"enabled_plugins": "[].\n", "advanced.config": "[].\n", "rabbitmq-env.conf": "",
	}
	for _, d := range []string{"mnesia", "log"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	for f, body := range files {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(body), 0o644); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	if n.runAs != "" {
		if out, err := exec.Command("chown", "-R", n.runAs+":", dir).CombinedOutput(); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("chown %s: %w: %s", dir, err, out)
		}
	}
	if err := n.start(ctx); err != nil {
		n.close()
		return nil, err
	}
	return n, nil
}

// cmd runs a RabbitMQ script with the node's environment, as its user.
func (n *rabbitNode) cmd(ctx context.Context, timeout time.Duration, tool string, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	argv := []string{"env", "HOME=" + n.home, "RABBITMQ_NODENAME=" + n.name, "RABBITMQ_NODE_IP_ADDRESS=127.0.0.1",
		"RABBITMQ_NODE_PORT=" + strconv.Itoa(n.port), "RABBITMQ_DIST_PORT=" + strconv.Itoa(n.distPort),
		"RABBITMQ_CONF_ENV_FILE=" + filepath.Join(n.dir, "rabbitmq-env.conf"),
		"RABBITMQ_CONFIG_FILE=" + filepath.Join(n.dir, "rabbitmq.conf"),
		"RABBITMQ_ADVANCED_CONFIG_FILE=" + filepath.Join(n.dir, "advanced.config"),
		"RABBITMQ_ENABLED_PLUGINS_FILE=" + filepath.Join(n.dir, "enabled_plugins"),
		"RABBITMQ_MNESIA_BASE=" + filepath.Join(n.dir, "mnesia"), "RABBITMQ_LOG_BASE=" + filepath.Join(n.dir, "log"),
		"RABBITMQ_PID_FILE=" + n.pidFile(), "/usr/lib/rabbitmq/bin/" + tool}
	argv = append(argv, args...)
	if n.runAs != "" {
		argv = append([]string{"runuser", "-u", n.runAs, "--"}, argv...)
	}
	c := exec.CommandContext(ctx, argv[0], argv[1:]...)
	c.WaitDelay = 5 * time.Second
	out, err := c.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", tool, strings.Join(args, " "), err, lastLines(string(out), 5))
	}
	return nil
}

func (n *rabbitNode) pidFile() string { return filepath.Join(n.dir, "rabbitmq.pid") }

// start starts the node and waits until its applications run.
func (n *rabbitNode) start(ctx context.Context) error {
	if err := n.cmd(ctx, 30*time.Second, "rabbitmq-server", "-detached"); err != nil {
		return err
	}
	return n.cmd(ctx, 100*time.Second, "rabbitmqctl", "-n", n.name, "wait", "--timeout", "90", n.pidFile())
}

// stop stops the node and waits for its OS process to exit.
func (n *rabbitNode) stop(ctx context.Context) error {
	return n.cmd(ctx, 60*time.Second, "rabbitmqctl", "-n", n.name, "stop", n.pidFile())
}

// close stops the node if it runs (its pid file exists), then removes its
// directory.
func (n *rabbitNode) close() {
	if _, err := os.Stat(n.pidFile()); err == nil {
		if err := n.stop(context.Background()); err != nil {
			// Last resort: the node's own process, by the pid it wrote,
			// and only if that process is still this node's (its command
			// line names the node), never a process that reused the pid.
			if b, rerr := os.ReadFile(n.pidFile()); rerr == nil {
				if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil && pid > 1 {
					cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
					if bytes.Contains(cmdline, []byte(n.name)) {
						if p, ferr := os.FindProcess(pid); ferr == nil {
							_ = p.Kill()
						}
					}
				}
			}
		}
	}
	_ = os.RemoveAll(n.dir)
}

func lastLines(s string, k int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-k):], " | ")
}
