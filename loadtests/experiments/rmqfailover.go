package experiments

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/localport"
)

// Names of the RabbitMQ failover experiments.
const (
	// RabbitMQLeaderKill kills the node leading the quorum queue.
	RabbitMQLeaderKill = "rabbitmq-quorum-leader-kill"
	// RabbitMQLeaderCut cuts that node off from the others.
	RabbitMQLeaderCut = "rabbitmq-quorum-leader-cut"
)

// rabbitmqClusterExperiments are issue 25's failover experiments for
// RabbitMQ, on the cluster profile's three nodes: the node that leads the
// service's quorum queue killed, or cut off, under load.
func rabbitmqClusterExperiments() []Experiment {
	return []Experiment{
		// Full: the service's start, 5 s of load, the kill, a new leader
		// within seconds, 5 s held, the node's restart (15-25 s), 5 s of
		// load, the settle and the probe: 42-62 s here.
		{Name: RabbitMQLeaderKill, Full: 60 * time.Second, Text: leaderKillText,
			Run: func(ctx context.Context, env Env, size Size) (Result, error) {
				return runRMQLeaderFault(ctx, env, size, rmqFault{name: RabbitMQLeaderKill})
			}},
		// Full: as the kill, with the node cut off for 100 s instead.
		{Name: RabbitMQLeaderCut, Full: 120 * time.Second, Text: leaderCutText,
			Run: func(ctx context.Context, env Env, size Size) (Result, error) {
				return runRMQLeaderFault(ctx, env, size, rmqFault{name: RabbitMQLeaderCut, cut: true})
			}},
	}
}

// rmqFault is how the leader goes: killed with SIGKILL and started again,
// or cut off (its link down) and healed.
type rmqFault struct {
	name string
	cut  bool
}

// rmqFaultLoad is a size's load: the rate of single POST /tasks, how
// long it runs before the fault, how long the node stays away (killed:
// after a new leader is seen; cut: from the cut, 100 s at full size,
// well past the Erlang net tick of 60 s after which the others declare
// the cut node down and pause_minority pauses it; 20 s small, within
// it), and how long the load runs once the cluster is whole again.
func rmqFaultLoad(size Size, f rmqFault) (rate float64, before, hold, after time.Duration) {
	rate, before, hold, after = 50, 5*time.Second, 5*time.Second, 5*time.Second
	if f.cut {
		hold = 100 * time.Second
	}
	if size == Small {
		rate, before, after = 20, 3*time.Second, 3*time.Second
		hold = map[bool]time.Duration{false: 2 * time.Second, true: 20 * time.Second}[f.cut]
	}
	return rate, before, hold, after
}

// probeMessages is how many messages the phantom probe holds across the
// fault.
const probeMessages = 200

// runRMQLeaderFault runs the rabbitmq service on the cluster (all three
// nodes in RABBITMQ_URL, quorum queues), finds its queue's leader, starts
// the probe, runs the load across the fault and the node's return, and
// counts.
func runRMQLeaderFault(ctx context.Context, env Env, size Size, f rmqFault) (Result, error) {
	began := time.Now()
	res := Result{Name: f.name, Metrics: map[driver.Metric]float64{}}
	logf := env.prefixed(f.name)
	c, err := openRMQCluster(env)
	if err != nil {
		return res, err
	}
	if env.PostgresURL == "" {
		env.PostgresURL = defaultPostgresURL
	}
	svc, err := startRMQService(ctx, env, c, logf)
	if err != nil {
		return res, err
	}
	defer svc.close()
	leaderName, err := c.waitLeader(ctx, 0, svc.queue, "", time.Minute)
	if err != nil {
		return res, err
	}
	leader := c.index(leaderName)
	probe, err := startProbe(ctx, c, svc.queue+".probe", leader, probeMessages)
	if err != nil {
		return res, err
	}
	defer probe.close()
	logf("quorum queue %s led by %s; probe holds %d deliveries on %s", svc.queue, leaderName, probe.held, c.node(probe.holderNode))
	fault := rmqLeaderFault{c: c, leader: leader, f: f, logf: logf}
	o, err := fault.underLoad(ctx, svc, size)
	if err != nil {
		return res, err
	}
	if err := o.count(ctx, svc); err != nil {
		return res, err
	}
	if o.probeBack, err = probe.giveBack(ctx, probe.holderNode); err != nil {
		return res, err
	}
	o.probeHeld = probe.held
	o.serviceNodes, o.newSession = svc.sessions(c, o.t.fault)
	o.reconnects = stats(&http.Client{Timeout: 10 * time.Second}, svc.base)["reconnects"]
	o.record(&res, size)
	res.setting("partition_handling", c.partitionHandling(ctx))
	res.setting("rabbitmq_version", c.version())
	logf("%d of %d acknowledged lost, %d processed twice, %d phantom of %d held; service on %s", o.lost, o.acked, o.duplicated, o.probeHeld-o.probeBack, o.probeHeld, o.serviceNodes)
	res.DurationS = math.Round(time.Since(began).Seconds()*10) / 10
	return res, nil
}

// rmqService is the rabbitmq service on the cluster: its address, schema,
// queue and log, and a connection to its Postgres for the counts.
type rmqService struct {
	base, schema, queue, log string
	pg                       *pgx.Conn
	close                    func()
}

// startRMQService starts the rabbitmq service (a schema and queue of its
// own) with RABBITMQ_URL listing the cluster's three nodes, quorum
// queues, the default heartbeat and BACKEND_TIMEOUT, and the reconciler
// off (RECONCILE_AFTER=0) so that a message the broker lost shows as a
// lost task instead of being published again a minute later. close
// stops it and removes its schema, queues and logs.
func startRMQService(ctx context.Context, env Env, c *rmqCluster, logf func(string, ...any)) (*rmqService, error) {
	l, logDir, err := env.launcher("wpe-rmq-failover-logs-")
	if err != nil {
		return nil, err
	}
	suffix := uniqueName("exp_rmqfail")
	s := &rmqService{schema: suffix, queue: strings.ReplaceAll(suffix, "_", "-")}
	var pgConn *pgx.Conn
	s.close = func() {
		_ = l.StopAll(30 * time.Second)
		if pgConn != nil {
			pgConn.Close(context.WithoutCancel(ctx))
		}
		_ = dropSchema(env.PostgresURL, s.schema)
		if err := c.deleteQueues(s.topology()); err != nil {
			logf("cleanup: %v", err)
		}
		_ = os.RemoveAll(logDir)
	}
	port, err := localport.Free()
	if err != nil {
		s.close()
		return nil, err
	}
	p, err := l.Start(ctx, "rabbitmq", port, map[string]string{
		"RABBITMQ_URL": strings.Join(c.urls, ","), "QUEUE_TYPE": "quorum", "RABBITMQ_QUEUE": s.queue,
		"DATABASE_URL": env.PostgresURL, "DATABASE_SCHEMA": s.schema, "RECONCILE_AFTER": "0",
		"LOG_LEVEL": "info", "LOG_FORMAT": "text",
	}, 2*time.Minute)
	if err != nil {
		s.close()
		return nil, err
	}
	s.base, s.log = fmt.Sprintf("http://127.0.0.1:%d", port), p.Log
	if pgConn, err = pgx.Connect(ctx, env.PostgresURL); err != nil {
		s.close()
		return nil, fmt.Errorf("postgres: %w", err)
	}
	s.pg = pgConn
	return s, nil
}

// topology is every queue and exchange the service and the probe
// declared for s.queue (the retry queues of the default RETRY_BASE and
// MAX_ATTEMPTS).
func (s *rmqService) topology() (queues, exchanges []string) {
	queues = []string{s.queue, s.queue + ".dead", s.queue + ".probe"}
	for n := 1; n < queue.DefaultMaxAttempts; n++ {
		queues = append(queues, s.queue+".retry."+strconv.FormatInt(queue.Backoff(queue.DefaultRetryBase, n).Milliseconds(), 10))
	}
	return queues, []string{s.queue + ".dlx"}
}

// nodeLogRE finds each session the service made in its log: when
// (slog's text time) and on which node.
var nodeLogRE = regexp.MustCompile(`(?m)^time=(\S+) [^\n]*?msg="rabbitmq (?:re)?connected"[^\n]*? node=amqp://[^@]*@([^/\s]+)`)

// sessions names the nodes the service had sessions on, in order, from
// its log ("rmq1→rmq2"), and when its first session after fault began
// (zero when none did).
func (s *rmqService) sessions(c *rmqCluster, fault time.Time) (nodes string, after time.Time) {
	b, _ := os.ReadFile(s.log)
	var names []string
	for _, m := range nodeLogRE.FindAllStringSubmatch(string(b), -1) {
		name := m[2]
		for i := range c.urls {
			if c.host(i) == m[2] {
				name = c.node(i)
			}
		}
		names = append(names, name)
		if t, err := time.Parse(time.RFC3339Nano, m[1]); err == nil && t.After(fault) && after.IsZero() {
			after = t
		}
	}
	if len(names) == 0 {
		return "unknown", after
	}
	return strings.Join(names, "→"), after
}

// rmqTimes are the moments of one fault: the fault, a new leader seen,
// the node back in the cluster (restarted or healed, all three running).
type rmqTimes struct {
	fault, leaderMoved, restored time.Time
	newLeader                    string
}

// rmqLeaderFault is fault f on the cluster's node leader (its index),
// the queue's leader, with the run's log.
type rmqLeaderFault struct {
	// c is the three-node cluster.
	c *rmqCluster
	// leader is the index in c of the node faulted, the queue's leader.
	leader int
	// f is the fault: a kill or a cut.
	f rmqFault
	// logf logs the fault's progress.
	logf func(string, ...any)
}

// underLoad runs the open load of the size on the service across the
// fault and the node's return, then a while more, and tallies the
// answers.
func (lf rmqLeaderFault) underLoad(ctx context.Context, svc *rmqService, size Size) (*rmqOutcome, error) {
	c, leader, f := lf.c, lf.leader, lf.f
	rate, before, hold, after := rmqFaultLoad(size, f)
	if err := crashWaitReady(ctx, svc.base, time.Minute); err != nil {
		return nil, err
	}
	stop := taskLoad(ctx, &http.Client{Timeout: 30 * time.Second}, svc.base, rate)
	sleep(ctx, before)
	t, err := lf.sequence(ctx, svc.queue, hold)
	if err != nil {
		stop()
		return nil, err
	}
	sleep(ctx, after)
	answers := stop()
	o := &rmqOutcome{t: t, rate: rate, before: before, hold: hold, after: after, oldLeader: c.node(leader)}
	o.tally(answers)
	if o.acked == 0 {
		return nil, fmt.Errorf("no task was accepted (%d sent)", o.sent)
	}
	return o, ctx.Err()
}

// sequence kills or cuts off the leader, waits for a new leader of
// queue (asked of the next node), keeps the node away for hold, and
// brings it back (a restart; a heal), waiting until all three nodes run
// together. The node is brought back whatever fails on the way.
func (lf rmqLeaderFault) sequence(ctx context.Context, queue string, hold time.Duration) (t rmqTimes, err error) {
	c, leader, f, logf := lf.c, lf.leader, lf.f, lf.logf
	watch := (leader + 1) % len(c.urls)
	back := func() error {
		if f.cut {
			return c.heal(context.WithoutCancel(ctx), leader)
		}
		return c.restart(context.WithoutCancel(ctx))
	}
	if f.cut {
		logf("cutting %s off", c.node(leader))
		t.fault = time.Now()
		err = c.cut(ctx, leader)
	} else {
		var pid int
		if pid, err = c.pid(ctx, leader); err == nil {
			logf("killing %s (SIGKILL to its process %d)", c.node(leader), pid)
			t.fault = time.Now()
			err = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	if err != nil {
		return t, errors.Join(err, back())
	}
	if t.newLeader, err = c.waitLeader(ctx, watch, queue, c.node(leader), 3*time.Minute); err != nil {
		return t, errors.Join(err, back())
	}
	t.leaderMoved = time.Now()
	logf("new leader %s %.1f s after the fault", t.newLeader, t.leaderMoved.Sub(t.fault).Seconds())
	if f.cut {
		sleep(ctx, time.Until(t.fault.Add(hold)))
	} else {
		sleep(ctx, hold)
	}
	if err := back(); err != nil {
		return t, err
	}
	if err := c.waitWhole(ctx, watch, 3*time.Minute); err != nil {
		return t, err
	}
	t.restored = time.Now()
	logf("%s back, all three nodes running, %.1f s after the fault", c.node(leader), t.restored.Sub(t.fault).Seconds())
	return t, nil
}
