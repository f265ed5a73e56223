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
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/launch"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/localport"
)

// brokerExperiments are the broker-restart experiments (issue 14, item
// 7): each restarts a private broker node of its own under light load,
// RabbitMQ's (broker-restart) and Kafka's (kafka-broker-restart).
func brokerExperiments() []Experiment {
	// Full: eight cases, each a node restart (about 10 s for RabbitMQ to
	// stop and start) between 5 s of load before and after.
	return []Experiment{{Name: "broker-restart", Run: runBrokerRestart, Full: 180 * time.Second, Text: brokerText}, kafkaBrokerRestart(), kafkaEventstoreRestart()}
}

// brokerText is broker-restart's prose.
var brokerText = Text{
	Title:    "RabbitMQ restart under load",
	Happens:  "While the broker is known down, dual-write refuses writes with 503 of kind not_recorded (nothing recorded, safe to retry); a write caught in the instant the node goes down is recorded and answered 503 of kind unknown, and the reconciler publishes it later, so it runs although it was answered 503. Outbox mode keeps accepting writes into its outbox. Once the node is back (stopped or killed with kill -9) the service reconnects by itself, and every task answered 202 is processed.",
	UserMust: "Retry a 503 of kind not_recorded or shed; on kind unknown, read GET /tasks/{id} for the ids the answer names before retrying, or accept that a retry may run the task twice; or run PUBLISH_MODE=outbox to take writes through a broker outage; keep the reconciler on (RECONCILE_AFTER) for publishes lost in the outage's first instant.",
	Figure:   func(f *Figures) string { return caseFigures(f, brokerCasesOf(f), brokerCaseFigure) },
	Notes: func(f *Figures) []string {
		return []string{
			fmt.Sprintf("a private single RabbitMQ node (own node name, ports and mnesia directory) stopped with rabbitmqctl stop, or killed with SIGKILL (cases .kill9), and started again; load %g tasks/s of single POST /tasks; every answer's time counts in the slowest", f.Num(MetricRate)),
			"the Kafka broker restart is its own experiment, kafka-broker-restart",
		}
	},
}

// brokerCasesOf are the cases a result ran (its "cases" setting), in
// order.
func brokerCasesOf(f *Figures) []brokerCase {
	var cs []brokerCase
	for _, name := range strings.Split(f.Str("cases"), ",") {
		for _, c := range brokerCases(Full) {
			if c.name() == name {
				cs = append(cs, c)
			}
		}
	}
	return cs
}

// brokerCaseFigure is case c's figure in words.
func brokerCaseFigure(f *Figures, c brokerCase) string {
	p := SidePrefix(c.name() + ".")
	how := "stopped"
	if c.kill {
		how = "killed (kill -9)"
	}
	refused := "0 answered 503" // a slowest of no answers is no figure, never "0 ms"
	if n := f.Int(p.Of(MetricRefused503)); n > 0 {
		refused = fmt.Sprintf("%d answered 503 (slowest %.0f ms: %d not_recorded, %d unknown of which %d ran later, %d shed, %d without a kind)",
			n, f.Num(p.Of(MetricMax503MS)), f.Int(p.Of(Metric503NotRecorded)), f.Int(p.Of(Metric503Unknown)), f.Int(p.Of(MetricUnknownRan)), f.Int(p.Of(Metric503Shed)), f.Int(p.Of(Metric503WithoutKind)))
	}
	return fmt.Sprintf("%s %s: node %s and started again in %.1f s; %s, %d accepted while down, %d other errors, slowest answer %.0f ms; service ready %.1f s after the node; %d of %d acknowledged lost; %d records no answer accounts for",
		c.queueType, c.publishMode, how, f.Num(p.Of(MetricDownSeconds)), refused, f.Int(p.Of(MetricAcceptedWhileDown)), f.Int(p.Of(MetricOtherErrors)), f.Num(p.Of(MetricSlowestAnswerMS)),
		f.Num(p.Of(MetricReadyAfterSeconds)), f.Int(p.Of(MetricAckedLost)), f.Int(p.Of(MetricAccepted)), f.Int(p.Of(MetricUnexplainedRecords)))
}

// brokerCase is one service configuration the broker restart is tried on,
// and how the node goes down: rabbitmqctl stop, or kill -9 (SIGKILL of
// the private node's own process: no goodbye to its clients).
type brokerCase struct {
	queueType, publishMode string
	kill                   bool
}

func (c brokerCase) name() string {
	if c.kill {
		return c.queueType + "." + c.publishMode + ".kill9"
	}
	return c.queueType + "." + c.publishMode
}

// brokerCases are the configurations at size: Small tries the classic
// queue in both publish modes, each stopped and killed; Full adds quorum
// queues.
func brokerCases(size Size) []brokerCase {
	types := []string{"classic"}
	if size == Full {
		types = append(types, "quorum")
	}
	var cs []brokerCase
	for _, kill := range []bool{false, true} {
		for _, qt := range types {
			cs = append(cs, brokerCase{qt, "dual-write", kill}, brokerCase{qt, "outbox", kill})
		}
	}
	return cs
}

// brokerLoad is the light load of a size: the rate, how long it runs
// before the restart and after the broker is back. Full's 3 s each way
// (5 s until 2 Dec 2026) keep make results under its hour: the figures
// are what happens during the outage, which lasts as long either way.
func brokerLoad(size Size) (rate float64, before, after time.Duration) {
	if size == Full {
		return 100, 3 * time.Second, 3 * time.Second
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
	res := Result{Name: "broker-restart", Metrics: map[driver.Metric]float64{}}
	logf := env.prefixed("broker-restart")
	node, err := startPrivateRabbit(ctx)
	if err != nil {
		return res, err
	}
	defer node.close()
	logf("private node %s on :%d", node.name, node.port)

	l, logDir, err := env.launcher("wpe-broker-restart-logs-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(logDir)
	defer func() { _ = l.StopAll(30 * time.Second) }()
	pgURL := env.PostgresURL
	if pgURL == "" {
		pgURL = defaultPostgresURL
	}
	run := brokerRun{l: l, node: node, pgURL: pgURL, size: size, logf: logf}
	var names []string
	for _, c := range brokerCases(size) {
		o, err := run.runCase(ctx, c)
		if err != nil {
			return res, fmt.Errorf("%s: %w", c.name(), err)
		}
		res.AckedLost += o.lost
		for k, v := range o.metrics() {
			res.Metrics[SidePrefix(c.name()+".").Of(k)] = v
		}
		names = append(names, c.name())
	}
	res.setting("cases", strings.Join(names, ","))
	res.Metrics[MetricRate], _, _ = brokerLoad(size)
	res.DurationS = math.Round(time.Since(start).Seconds()*10) / 10
	return res, nil
}

const defaultPostgresURL = "postgres://postgres:postgres@localhost:5432/wpe?sslmode=disable"

// brokerOutcome is what one case measured.
type brokerOutcome struct {
	accepted, refused503, otherErrors int
	max503                            time.Duration  // slowest 503 answer
	slowest                           time.Duration  // slowest answer of any status
	kinds                             map[string]int // 503s by their "kind" ("" when it has none)
	unknownIDs                        []string       // ids named by 503s of kind unknown
	unknownRan                        int64          // of unknownIDs, processed after the settle
	unexplained                       int64          // records neither answered 202 nor named by an "unknown" 503
	downFor                           time.Duration  // stop begun → node ready again
	readyAfter                        time.Duration  // node ready → the service's /readyz 200
	firstAcceptAfter                  time.Duration  // node ready → first 202 to a request sent after it
	acceptedWhileDown                 int
	lost                              int64 // answered 202, not done after the settle
	stranded                          int64 // records (202 or not) left undone
	republished, relayed              int64
}

func (o brokerOutcome) metrics() map[driver.Metric]float64 {
	return map[driver.Metric]float64{
		MetricAccepted: float64(o.accepted), MetricRefused503: float64(o.refused503), MetricOtherErrors: float64(o.otherErrors),
		MetricMax503MS: ms(o.max503), MetricDownSeconds: secs(o.downFor), MetricReadyAfterSeconds: secs(o.readyAfter),
		MetricFirstAcceptAfterSeconds: secs(o.firstAcceptAfter), MetricAcceptedWhileDown: float64(o.acceptedWhileDown),
		MetricAckedLost: float64(o.lost), MetricStranded: float64(o.stranded),
		MetricRepublished: float64(o.republished), MetricRelayed: float64(o.relayed),
		MetricSlowestAnswerMS: ms(o.slowest),
		Metric503NotRecorded:  float64(o.kinds["not_recorded"]), Metric503Unknown: float64(o.kinds["unknown"]),
		Metric503Shed: float64(o.kinds["shed"]), Metric503WithoutKind: float64(o.refused503 - o.kinds["not_recorded"] - o.kinds["unknown"] - o.kinds["shed"]),
		MetricUnknownRan: float64(o.unknownRan), MetricUnexplainedRecords: float64(o.unexplained),
	}
}

func ms(d time.Duration) float64   { return math.Round(float64(d.Microseconds())/100) / 10 }
func secs(d time.Duration) float64 { return math.Round(d.Seconds()*100) / 100 }

// answer is one request of the load.
type answer struct {
	sent    time.Time
	took    time.Duration
	status  int
	id      string
	kind    string   // a 503's "kind"
	ids     []string // a 503's "ids" (kind unknown)
	errText string
}

// brokerRun is what every case of broker-restart shares: the launcher
// its service runs by, the private node, the Postgres the service
// records in, the size and the log.
type brokerRun struct {
	// l starts and stops the rabbitmq service, once per case.
	l *launch.Launcher
	// node is the private RabbitMQ node restarted under the load.
	node *rabbitNode
	// pgURL is the Postgres the service keeps its tasks in (a schema of
	// its own per case).
	pgURL string
	// size sets the load (brokerLoad).
	size Size
	// logf logs the run's progress.
	logf func(string, ...any)
}

// runCase runs one case: service up, load, restart, load, settle,
// count.
func (br brokerRun) runCase(ctx context.Context, c brokerCase) (brokerOutcome, error) {
	l, node, pgURL, logf := br.l, br.node, br.pgURL, br.logf
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
	port, err := localport.Free()
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
	client := &http.Client{Timeout: 20 * time.Second}
	answers, down, up, err := br.restartUnderLoad(ctx, base, client, c, &o)
	if err != nil {
		return o, err
	}
	ids := o.tally(answers, down, up)
	if o.accepted == 0 {
		return o, errors.New("no request was accepted")
	}
	if err := o.settle(ctx, pg, pgx.Identifier{schema, "tasks"}.Sanitize(), ids); err != nil {
		return o, err
	}
	counters := stats(client, base)
	o.republished, o.relayed = counters["republished"], counters["relayed"]
	logf("%s: %d of %d acknowledged lost, %d records no answer accounts for", c.name(), o.lost, o.accepted, o.unexplained)
	return o, ctx.Err()
}

// restartUnderLoad runs the light load of the size on base, stops (or
// kills) the node and starts it, waits for the service to be ready again
// and loads a while more; it returns every answer, when the node went
// down and when it was back, and records the node's downtime and the
// service's readiness in o.
func (br brokerRun) restartUnderLoad(ctx context.Context, base string, client *http.Client, c brokerCase, o *brokerOutcome) ([]answer, time.Time, time.Time, error) {
	node, logf := br.node, br.logf
	rate, before, after := brokerLoad(br.size)
	stopLoad := taskLoad(ctx, client, base, rate)
	defer stopLoad()
	sleep(ctx, before)
	down := time.Now()
	if err := brokerDown(ctx, node, c, logf); err != nil {
		return nil, down, down, err
	}
	if err := node.start(ctx); err != nil {
		return nil, down, down, err
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
	return stopLoad(), down, up, nil
}

// taskLoad posts single tasks to base at rate with client, each in its
// own goroutine (an open load: an outage does not slow the sending),
// until stop is called; stop waits for every answer and returns them in
// the order they were sent (the same ones at every call).
func taskLoad(ctx context.Context, client *http.Client, base string, rate float64) (stop func() []answer) {
	lctx, cancel := context.WithCancel(ctx)
	var mu sync.Mutex
	var answers []answer
	var inflight sync.WaitGroup
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
		defer tick.Stop()
		for {
			select {
			case <-lctx.Done():
				return
			case <-tick.C:
			}
			inflight.Go(func() {
				a := post(client, base+"/tasks")
				mu.Lock()
				answers = append(answers, a)
				mu.Unlock()
			})
		}
	}()
	return sync.OnceValue(func() []answer {
		cancel()
		<-done
		inflight.Wait()
		sort.Slice(answers, func(i, j int) bool { return answers[i].sent.Before(answers[j].sent) })
		return answers
	})
}

// brokerDown stops the node, or kills it (SIGKILL) in a kill case.
func brokerDown(ctx context.Context, node *rabbitNode, c brokerCase, logf func(string, ...any)) error {
	if c.kill {
		logf("%s: killing the node (SIGKILL)", c.name())
		return node.kill()
	}
	logf("%s: stopping the node", c.name())
	return node.stop(ctx)
}

// tally counts the answers into o, with the node down from down to up,
// and returns the ids of the tasks answered 202.
func (o *brokerOutcome) tally(answers []answer, down, up time.Time) []string {
	ids := []string{}
	first := time.Duration(-1)
	o.kinds, o.unknownIDs = map[string]int{}, []string{}
	for _, a := range answers {
		o.slowest = max(o.slowest, a.took)
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
			o.kinds[a.kind]++
			if a.kind == "unknown" {
				o.unknownIDs = append(o.unknownIDs, a.ids...)
			}
		default:
			o.otherErrors++
		}
	}
	o.firstAcceptAfter = max(first, 0)
	return ids
}

// settle waits (a minute at most) until every accepted task (ids) is
// processed and every record in tasks is done (the reconciler
// republishes what a lost publish left, after 5 s), then counts the
// tasks lost and those no answer accounts for.
func (o *brokerOutcome) settle(ctx context.Context, pg *pgx.Conn, tasks string, ids []string) error {
	deadline := time.Now().Add(time.Minute)
	for {
		var done, undone int64
		err := pg.QueryRow(ctx, `SELECT count(*) FILTER (WHERE id = ANY($1::uuid[]) AND status = 'done'),
		        count(*) FILTER (WHERE status <> 'done') FROM `+tasks, ids).Scan(&done, &undone)
		if err != nil {
			return fmt.Errorf("count tasks: %w", err)
		}
		o.lost, o.stranded = int64(o.accepted)-done, undone
		if (o.lost == 0 && o.stranded == 0) || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	err := pg.QueryRow(ctx, `SELECT count(*) FILTER (WHERE id = ANY($1::uuid[]) AND status = 'done'),
	        count(*) FILTER (WHERE NOT id = ANY($1::uuid[]) AND NOT id = ANY($2::uuid[])) FROM `+tasks, o.unknownIDs, ids).Scan(&o.unknownRan, &o.unexplained)
	if err != nil {
		return fmt.Errorf("count tasks: %w", err)
	}
	return nil
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
		ID   string   `json:"id"`
		Kind string   `json:"kind"`
		IDs  []string `json:"ids"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&body)
	a.id, a.kind, a.ids = body.ID, body.Kind, body.IDs
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
	port, err := localport.Free()
	if err != nil {
		return nil, err
	}
	dist, err := localport.Free()
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

// owns reports whether process pid is this node's: its environment names
// the node (RABBITMQ_NODENAME; the Erlang VM's command line does not).
func (n *rabbitNode) owns(pid int) bool {
	environ, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	return bytes.Contains(append([]byte{0}, environ...), []byte("\x00RABBITMQ_NODENAME="+n.name+"\x00"))
}

// kill sends SIGKILL to the node's own process (the pid it wrote, and only
// if that process is this node's, owns: never a process that reused the
// pid), waits for it to exit and removes its pid file, so that
// start begins afresh: kill -9, no goodbye to its clients.
func (n *rabbitNode) kill() error {
	b, err := os.ReadFile(n.pidFile())
	if err != nil {
		return fmt.Errorf("kill the node: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return fmt.Errorf("kill the node: pid file holds %q", b)
	}
	if !n.owns(pid) {
		return fmt.Errorf("kill the node: process %d is not node %s", pid, n.name)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill the node: %w", err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		// Gone, or a zombie not yet reaped: either way the node is dead.
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if _, after, ok := bytes.Cut(stat, []byte(") ")); err != nil || ok && bytes.HasPrefix(after, []byte("Z")) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node process %d still there 30 s after SIGKILL", pid)
		}
	}
	_ = os.Remove(n.pidFile())
	return nil
}

// close stops the node if it runs (its pid file exists), then removes its
// directory.
func (n *rabbitNode) close() {
	if _, err := os.Stat(n.pidFile()); err == nil {
		if err := n.stop(context.Background()); err != nil {
			// Last resort: the node's own process, by the pid it wrote,
			// and only if that process is still this node's (owns),
			// never a process that reused the pid.
			if b, rerr := os.ReadFile(n.pidFile()); rerr == nil {
				if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil && pid > 1 {
					if n.owns(pid) {
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
