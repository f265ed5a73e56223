package experiments

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/launch"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/localport"
)

// The cluster profile's Kafka experiments (issue 25, item 4): the kafka
// service on the three brokers, its topic at replication factor 3 and
// min.insync.replicas=2, under an open load of single POST /events with
// its consumer group reading them; the broker leading the topic's one
// partition is killed (kafka-leader-kill) or cut off
// (kafka-leader-cut), then brought back.
const (
	// KafkaLeaderKill kills (kill -9) the partition leader, then starts it
	// again.
	KafkaLeaderKill = "kafka-leader-kill"
	// KafkaLeaderCut cuts the partition leader off, then heals it.
	KafkaLeaderCut = "kafka-leader-cut"
)

// kafkaClusterExperiments are the experiments on the cluster profile's
// Kafka (in Cluster, not All).
func kafkaClusterExperiments() []Experiment {
	// Full: each case starts a service and a topic (about 10 s), loads
	// 5 s, holds the fault 25 s, brings the node back (a restart through
	// cluster.sh takes 20-40 s, a heal a moment), waits for the ISR, loads
	// 10 s more and settles: about 80 s a case.
	return []Experiment{
		{Name: KafkaLeaderKill, Run: runKafkaLeaderKill, Full: 170 * time.Second, Text: kafkaLeaderKillText},
		{Name: KafkaLeaderCut, Run: runKafkaLeaderCut, Full: 300 * time.Second, Text: kafkaLeaderCutText},
	}
}

// leaderCase is one fault of the partition leader, with the service's
// producer at one acks setting.
type leaderCase struct {
	// fault is the cluster.sh command: "kill" (kill -9, then `up kafka`),
	// "cut" (its link down: nobody reaches it, then heal) or "isolate"
	// (cut off from the other brokers only: the service still reaches it,
	// then heal).
	fault string
	// acks is the service's KAFKA_ACKS: "all" or "1".
	acks string
}

// name is the case's prefix in the results, e.g. "isolate.acks_all".
func (c leaderCase) name() string { return c.fault + ".acks_" + c.acks }

// leaderKillCases are kafka-leader-kill's cases: acks=all, and at Full
// acks=1 too.
func leaderKillCases(size Size) []leaderCase {
	if size == Full {
		return []leaderCase{{"kill", "all"}, {"kill", "1"}}
	}
	return []leaderCase{{"kill", "all"}}
}

// leaderCutCases are kafka-leader-cut's cases: the leader isolated from
// its peers with acks=all and acks=1, and at Full its link cut too.
func leaderCutCases(size Size) []leaderCase {
	cs := []leaderCase{{"isolate", "all"}, {"isolate", "1"}}
	if size == Full {
		cs = append(cs, leaderCase{"cut", "all"}, leaderCase{"cut", "1"})
	}
	return cs
}

// leaderLoad is a size's load: the rate of single POSTs, how long it runs
// before the fault, how long the fault is held, and how long the load
// runs once the partition's replicas are all in sync again.
func leaderLoad(size Size) (rate float64, before, hold, after time.Duration) {
	if size == Full {
		return 50, 5 * time.Second, 25 * time.Second, 10 * time.Second
	}
	return 25, 3 * time.Second, 20 * time.Second, 5 * time.Second
}

// leaderServiceTimeout is the service's KAFKA_WRITE_TIMEOUT and
// BACKEND_TIMEOUT here.
const leaderServiceTimeout = 5 * time.Second

func runKafkaLeaderKill(ctx context.Context, env Env, size Size) (Result, error) {
	return runLeaderCases(ctx, env, KafkaLeaderKill, leaderKillCases(size), size)
}

func runKafkaLeaderCut(ctx context.Context, env Env, size Size) (Result, error) {
	return runLeaderCases(ctx, env, KafkaLeaderCut, leaderCutCases(size), size)
}

// runLeaderCases runs cases in turn, each on a service, topic and schema
// of its own. AckedLost counts every case's acknowledged events missing;
// the loss is documented when only acks=1 cases lost any.
func runLeaderCases(ctx context.Context, env Env, name string, cases []leaderCase, size Size) (Result, error) {
	began := time.Now()
	res := Result{Name: name, Metrics: map[driver.Metric]float64{}}
	logf := env.prefixed(name)
	k, err := newKafkaCluster(ctx, env, logf)
	if err != nil {
		return res, err
	}
	l, logDir, err := env.launcher("wpe-kafka-leader-logs-")
	if err != nil {
		return res, err
	}
	defer func() { _ = os.RemoveAll(logDir) }()
	defer func() { _ = l.StopAll(30 * time.Second) }()
	run := leaderRun{env: env, k: k, l: l, size: size}
	var names []string
	var lostAll int64
	for _, c := range cases {
		o, err := run.runCase(ctx, c)
		if err != nil {
			return res, fmt.Errorf("%s: %w", c.name(), err)
		}
		o.record(&res, c)
		names = append(names, c.name())
		res.AckedLost += o.lost + o.undelivered
		if c.acks == "all" {
			lostAll += o.lost + o.undelivered
		}
	}
	res.LossDocumented = res.AckedLost > 0 && lostAll == 0
	rate, before, hold, after := leaderLoad(size)
	for key, v := range map[driver.Metric]float64{MetricRate: rate, MetricBeforeSeconds: before.Seconds(), MetricHoldSeconds: hold.Seconds(), MetricAfterSeconds: after.Seconds(),
		MetricTimeoutMS: ms(leaderServiceTimeout)} {
		res.Metrics[key] = v
	}
	res.setting("cases", strings.Join(names, ","))
	res.setting("brokers", strings.Join(k.brokers(0), ","))
	res.DurationS = math.Round(time.Since(began).Seconds()*10) / 10
	return res, nil
}

// leaderRun is what every case of a leader-fault experiment shares: its
// environment, the cluster, the launcher its services run by, and the
// size.
type leaderRun struct {
	// env holds the Postgres the services record deliveries in.
	env Env
	// k is the three-broker cluster whose leader is faulted.
	k *kafkaCluster
	// l starts and stops the kafka service, once per case.
	l *launch.Launcher
	// size sets the load and the fault's hold (leaderLoad).
	size Size
}

// leaderService is one case's service: the cluster it writes to, its
// topic, the schema its consumer group records deliveries in, and its
// URL (base).
type leaderService struct {
	// k is the cluster the service writes to.
	k *kafkaCluster
	// topic is the case's topic (one partition, three replicas).
	topic string
	// schema holds the service's tables (deliveries among them).
	schema string
	// base is the service's URL.
	base string
}

// runCase starts the service on a new topic, runs the fault under load
// and measures.
func (lr leaderRun) runCase(ctx context.Context, c leaderCase) (leaderOutcome, error) {
	env, k, l := lr.env, lr.k, lr.l
	o := leaderOutcome{}
	schema := uniqueName("exp_leader")
	topic := strings.ReplaceAll(schema, "_", "-")
	defer func() { _ = dropSchema(env.PostgresURL, schema) }()
	defer k.deleteTopic(topic)
	defer func() { _ = l.Stop("kafka", 30*time.Second) }()
	port, err := localport.Free()
	if err != nil {
		return o, err
	}
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	if _, err := l.Start(ctx, "kafka", port, map[string]string{
		"KAFKA_BROKERS": strings.Join(k.brokers(0), ","), "KAFKA_TOPIC": topic, "KAFKA_GROUP": topic,
		"KAFKA_PARTITIONS": "1", "KAFKA_REPLICATION_FACTOR": "3", "KAFKA_MIN_INSYNC_REPLICAS": "2", "KAFKA_ACKS": c.acks,
		"DATABASE_URL": env.PostgresURL, "DATABASE_SCHEMA": schema,
		"KAFKA_WRITE_TIMEOUT": leaderServiceTimeout.String(), "BACKEND_TIMEOUT": leaderServiceTimeout.String(),
		"LOG_LEVEL": "warn", "LOG_FORMAT": "text",
	}, 2*time.Minute); err != nil {
		return o, err
	}
	leader, err := k.waitISR(ctx, k.brokers(0), topic, 3, time.Minute)
	if err != nil {
		return o, err
	}
	o.leader = leader
	svc := leaderService{k: k, topic: topic, schema: schema, base: base}
	shots, t, err := leaderFault(ctx, svc, c, lr.size, leader)
	o.t = t
	if err != nil {
		return o, err
	}
	pg, err := pgx.Connect(ctx, env.PostgresURL)
	if err != nil {
		return o, fmt.Errorf("postgres: %w", err)
	}
	defer pg.Close(context.WithoutCancel(ctx))
	if err := o.measure(ctx, svc, pg, shots); err != nil {
		return o, err
	}
	k.logf("%s: leader %s, new leader %s; %d acknowledged, %d lost, %d undelivered, %d phantom; answers other than 201: %s",
		c.name(), k.node(o.leader), k.node(o.t.newLeader), o.acked, o.lost, o.undelivered, o.phantom, o.codes)
	return o, ctx.Err()
}

// leaderTimes are the moments of one fault.
type leaderTimes struct {
	// fault is when the cluster.sh command returned, elected when the other
	// brokers first named a new leader (zero if not within the hold),
	// heal when the node was brought back (the restart or heal began),
	// healed when that command returned, whole when the partition had its
	// three replicas in sync again.
	fault, elected, heal, healed, whole time.Time
	// writable is when a write sent after whole was first answered 201
	// (the zero time if not within a minute): the load's own figures
	// are read after it.
	writable time.Time
	// newLeader is the leader the others elected, minISR the fewest
	// replicas in sync they showed from then until the heal.
	newLeader, minISR int
}

// leaderFault runs the open load on svc while the leader (node id
// leader) is faulted with c.fault, held so for the size's hold, and
// brought back; the load goes on until the partition is whole again and
// the size's after has passed. On error the node is still brought back.
func leaderFault(ctx context.Context, svc leaderService, c leaderCase, size Size, leader int) ([]shot, leaderTimes, error) {
	k, base, topic := svc.k, svc.base, svc.topic
	var t leaderTimes
	rate, before, hold, after := leaderLoad(size)
	stopLoad := startLoad(ctx, base, kafkaSide, rate)
	defer stopLoad()
	sleep(ctx, before)
	node := k.node(leader)
	back := func(ctx context.Context) error {
		if c.fault == "kill" {
			return k.run(ctx, "up", "kafka")
		}
		return k.run(ctx, "heal", node)
	}
	if err := k.run(ctx, c.fault, node); err != nil {
		return nil, t, err
	}
	t.fault = time.Now() // the command returns once the fault is in place
	t.elected, t.newLeader, t.minISR = k.watchLeader(ctx, k.brokers(leader), topic, leader, t.fault.Add(hold))
	t.heal = time.Now()
	if err := back(context.WithoutCancel(ctx)); err != nil {
		return nil, t, err
	}
	t.healed = time.Now()
	if _, err := k.waitISR(ctx, k.brokers(0), topic, 3, 2*time.Minute); err != nil {
		return nil, t, err
	}
	t.whole = time.Now()
	t.writable = awaitWrite(ctx, base, time.Minute)
	k.logf("%s: %s %s; new leader %s after %.1f s (at least %d in sync then); whole again %.1f s after the %s began, a write taken %.1f s after that",
		c.name(), c.fault, node, k.node(t.newLeader), secsSince(t.fault, t.elected), t.minISR, t.whole.Sub(t.heal).Seconds(), backWord(c), secsSince(t.whole, t.writable))
	sleep(ctx, after)
	return stopLoad(), t, ctx.Err()
}

// awaitWrite posts one event every 500 ms until one is answered 201 or
// timeout passes, and returns when (the zero time if never).
func awaitWrite(ctx context.Context, base string, timeout time.Duration) time.Time {
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline) && ctx.Err() == nil; {
		if _, code, _, err := kafkaSide.write(ctx, base, 0); err == nil && code == http.StatusCreated {
			return time.Now()
		}
		sleep(ctx, 500*time.Millisecond)
	}
	return time.Time{}
}

// backWord names how c's node is brought back.
func backWord(c leaderCase) string {
	if c.fault == "kill" {
		return "restart"
	}
	return "heal"
}

// secsSince is b-a in seconds, or -1 when b is zero (never happened).
func secsSince(a, b time.Time) float64 {
	if b.IsZero() {
		return -1
	}
	return secs(b.Sub(a))
}

// consumerDuplicates reads the service's GET /consumer: the redeliveries
// its consumer absorbed by id.
func consumerDuplicates(ctx context.Context, base string) (int64, error) {
	var st struct {
		Duplicates int64 `json:"duplicates"`
	}
	code, b, err := driver.Do(ctx, http.MethodGet, base+"/consumer", nil)
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("GET /consumer: %d %s", code, b)
	}
	if err == nil {
		err = json.Unmarshal(b, &st)
	}
	return st.Duplicates, err
}
