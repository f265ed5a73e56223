package scenario

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/segmentio/kafka-go"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	logc "github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/log"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// Consumer groups (issue 23, item 3): one instance of each log service
// with N groups in all (the default one and N-1 created from latest), at
// one fixed rate of single POST /events. Each group receives every event:
// on Kafka one more consumer group on the topic, which is written once;
// on no-kafka one more logical replication slot, each decoding all of
// the database's WAL.

// ScaleOutGroups is a fixed rate of events to one log instance with N
// consumer groups.
const ScaleOutGroups = "scaleout.groups"

// Group metric names, per side (besides the client.* of the attack and
// the default group's server.delivery.* latencies): the number of
// groups, the events each group received per second during the attack
// (every group's deliveries over N), the deliveries missing at the drain
// bound (written × N − delivered, 0 unless a group fell behind), and
// cpu.<group>.per_1k, the CPU-seconds per 1,000 written events of each
// process group (costSetAt: the service, Postgres, RabbitMQ, Kafka).
const (
	MetricGroups          = "groups"
	MetricGroupDelivered  = "delivered_per_group_per_s"
	MetricGroupMissing    = "deliveries_missing"
	MetricGroupsSlotBytes = "slots_retained_wal_bytes"
)

// groupsName is the schema, slot and Kafka name prefix of the groups
// points: the driver drops what carries it before and after each point.
const groupsName = "scaleout_groups"

// groupPointName names the point of n groups at rate.
func groupPointName(rate float64, n int) string {
	if n == 1 {
		return driver.Label(rate) + " → 1 group"
	}
	return fmt.Sprintf("%s → %d groups", driver.Label(rate), n)
}

// groups measures at.svc's side of at.p, n groups: a fresh instance (with
// at.extra, a second design's setting, in its environment), its groups
// created, o.GroupRate events/s for o.Duration, the drain and the CPU;
// then the groups deleted and everything the point made dropped.
func (pts *scaleOutPoints) groups(ctx context.Context, e *Env, at scaleOutSide, n int, o ScaleOutOptions) {
	svc, extra := at.svc, at.extra
	e.logf("scaleout: %s with %d consumer groups at %s %v", svc, n, driver.Label(o.GroupRate), extra)
	measureOne(ctx, pts, at,
		func() (*groupFleet, error) { return startGroups(ctx, e, svc, n, extra) },
		func(g *groupFleet) (*driver.SideResult, error) { return g.measure(ctx, n, o) })
}

// groupFleet is one log instance of the groups points.
type groupFleet struct {
	e         *Env
	svc, name string
	url       string
	port      int
	// topic is the kafka side's fresh topic, deleted by drop ("" on
	// no-kafka).
	topic  string
	schema string
	// env is the instance's environment (a second instance of the
	// takeover point starts with the same).
	env map[string]string
	// extra are the groups created besides the default one, deleted by
	// stop.
	extra []string
}

// startGroups drops what an earlier point left, starts one instance of
// svc on its own schema (and, on kafka, a fresh topic and group id;
// on no-kafka its own slot) with extra added to its environment, and
// creates n-1 groups from latest.
func startGroups(ctx context.Context, e *Env, svc string, n int, extra map[string]string) (*groupFleet, error) {
	suffix := strconv.FormatInt(time.Now().Unix(), 36)
	g := &groupFleet{e: e, svc: svc, name: svc + "@scaleout-groups", schema: groupsName + "_" + strings.ReplaceAll(svc, "-", "_")}
	if err := g.reset(ctx); err != nil {
		return nil, err
	}
	env := map[string]string{"DATABASE_SCHEMA": g.schema, "MAX_GROUPS": strconv.Itoa(max(n, 2)), "GROUP_POLL_INTERVAL": "500ms"}
	if svc == LogPair.A.Name {
		env["SLOT_NAME"] = groupsName
	} else {
		g.topic = "scaleout-groups-" + suffix
		env["KAFKA_TOPIC"], env["KAFKA_GROUP"] = g.topic, groupsName+"_"+suffix
	}
	maps.Copy(env, extra)
	g.env = env
	g.port = ServiceOf(svc).Port + e.PortOffset + scaleOutPortOffset
	g.url = fmt.Sprintf("http://%s:%d", e.host(), g.port)
	timeout := e.ReadyTimeout
	if timeout == 0 {
		timeout = 90 * time.Second
	}
	if _, err := e.Launcher.Start(ctx, g.name, g.port, env, timeout); err != nil {
		g.drop(context.WithoutCancel(ctx))
		return nil, err
	}
	for i := 1; i < n; i++ {
		name := "g" + strconv.Itoa(i)
		code, body, err := driver.Do(ctx, http.MethodPut, g.url+"/groups/"+name, []byte(`{"from":"latest"}`))
		if err == nil && code != http.StatusCreated && code != http.StatusOK {
			err = fmt.Errorf("PUT /groups/%s: %d %s", name, code, body)
		}
		if err != nil {
			g.stop(ctx)
			return nil, err
		}
		g.extra = append(g.extra, name)
	}
	if err := g.waitRunning(ctx, groupsRunning(env, n), 60*time.Second); err != nil {
		g.stop(ctx)
		return nil, err
	}
	return g, nil
}

// waitRunning waits, up to bound, until GET /groups lists n groups
// ready and running on the instance.
func (g *groupFleet) waitRunning(ctx context.Context, n int, bound time.Duration) error {
	deadline := time.Now().Add(bound)
	for {
		var list logc.GroupList
		code, body, err := driver.Do(ctx, http.MethodGet, g.url+"/groups", nil)
		if err == nil && code == http.StatusOK {
			err = json.Unmarshal(body, &list)
		}
		running := 0
		if err == nil && code == http.StatusOK {
			for _, gr := range list.Groups {
				if gr.Ready && gr.Running {
					running++
				}
			}
		}
		if running >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d groups running after %v (GET /groups: %d %v)", running, n, bound, code, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// measure offers o.GroupRate events/s for o.Duration, waits until every
// group has every event (bounded by the settle bound), and records the
// rate each group received, what is missing, the default group's
// latencies, the CPU of each process group and, on no-kafka, the WAL the
// slots retained at the attack's end.
func (g *groupFleet) measure(ctx context.Context, n int, o ScaleOutOptions) (*driver.SideResult, error) {
	res := &driver.SideResult{Metrics: map[driver.Metric]float64{MetricGroups: float64(n)}}
	if err := driver.ResetStats(ctx, g.url); err != nil {
		return res, err
	}
	groups := costSetAt(ctx, g.e, g.port, o.StackDir)
	cpu0 := groups.Sample()
	spec := g.eventsSpec(fmt.Sprintf("%-12s %d groups %s", g.svc, n, driver.Label(o.GroupRate)), o.GroupRate, o.Duration)
	if err := g.write(ctx, res, spec, float64(n)); err != nil {
		return res, err
	}
	if b, ok := g.slotsRetained(ctx); ok {
		res.Metrics[MetricGroupsSlotBytes] = float64(b)
	}
	final, err := g.drain(ctx, n, g.e.settle())
	if err != nil {
		return res, err
	}
	used := groups.Sample().Sub(cpu0)
	written := final.Counters[logc.StatWritten]
	sideCPU(res.Metrics, groups, used, written)
	res.Metrics[MetricGroupMissing] = float64(max(written*int64(n)-groupDeliveries(final), 0))
	res.Stats = final
	driver.FlattenServer(res.Metrics, final)
	return res, nil
}

// eventsSpec is the attack named name that posts the log scenario's
// events to g's instance at rate for d.
func (g *groupFleet) eventsSpec(name string, rate float64, d time.Duration) driver.AttackSpec {
	return driver.AttackSpec{
		Name: name, Rate: rate, Duration: d,
		MaxWorkers: g.e.MaxWorkers, Progress: g.e.Progress,
		Next: func(i uint64) driver.Request {
			return driver.Request{Method: http.MethodPost, URL: g.url + "/events", Body: LogScenario.Load.Body(i)}
		},
	}
}

// write runs spec against g's instance, records its write phase and
// client figures in res and, from the instance's stats at its end, the
// events each of the consumers running groups received per second.
func (g *groupFleet) write(ctx context.Context, res *driver.SideResult, spec driver.AttackSpec, consumers float64) error {
	c := driver.Attack(ctx, spec)
	res.Phases = append(res.Phases, driver.Phase{Name: "write", Client: c})
	driver.FlattenClient(res.Metrics, driver.ClientPrefix, c)
	atEnd, err := driver.GetStats(ctx, g.url)
	if err != nil {
		return err
	}
	if c.DurationS > 0 {
		res.Metrics[MetricGroupDelivered] = round1(float64(groupDeliveries(atEnd)) / consumers / c.DurationS)
	}
	return nil
}

// groupDeliveries is every group's first deliveries in st: the default
// group's and the others' sum.
func groupDeliveries(st *driver.ServerStats) int64 {
	return st.Counters[logc.StatDelivered] + st.Counters[logc.StatGroupDelivered]
}

// drain waits, up to bound, until every group received every event
// written, and returns the last stats read.
func (g *groupFleet) drain(ctx context.Context, n int, bound time.Duration) (*driver.ServerStats, error) {
	st, _, err := g.waitStats(ctx, bound, func(st *driver.ServerStats) bool {
		return groupDeliveries(st) >= st.Counters[logc.StatWritten]*int64(n)
	})
	return st, err
}

// waitStats reads the instance's /stats every 100 ms until done says so
// or bound passes, and returns the last stats read and whether done.
func (g *groupFleet) waitStats(ctx context.Context, bound time.Duration, done func(*driver.ServerStats) bool) (*driver.ServerStats, bool, error) {
	deadline := time.Now().Add(bound)
	for {
		st, err := driver.GetStats(ctx, g.url)
		if err != nil {
			return nil, false, err
		}
		if ok := done(st); ok || time.Now().After(deadline) {
			return st, ok, nil
		}
		select {
		case <-ctx.Done():
			return st, false, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// slotsRetained sums the WAL the point's slots retain (no-kafka only).
func (g *groupFleet) slotsRetained(ctx context.Context) (int64, bool) {
	if g.svc != LogPair.A.Name {
		return 0, false
	}
	conn, err := g.e.connect(ctx)
	if err != nil {
		return 0, false
	}
	defer conn.Close(context.Background())
	var b int64
	if err := conn.QueryRow(ctx, `SELECT coalesce(sum(pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)), 0)::int8
		FROM pg_replication_slots WHERE slot_name LIKE $1`, groupsName+"%").Scan(&b); err != nil {
		return 0, false
	}
	return b, true
}

// stop deletes the groups (the service drops their slots and Kafka
// groups), stops the instance and drops what the point made.
func (g *groupFleet) stop(ctx context.Context) {
	g.deleteGroups(ctx, g.url)
	if err := g.e.Launcher.Stop(g.name, 30*time.Second); err != nil {
		g.e.logf("scaleout: %v", err)
	}
	g.drop(context.WithoutCancel(ctx))
}

// deleteGroups deletes g's extra groups through the instance at url (the
// service drops their slots and Kafka groups); once done, stop has none
// left to delete.
func (g *groupFleet) deleteGroups(ctx context.Context, url string) {
	for _, name := range g.extra {
		if code, body, err := driver.Do(ctx, http.MethodDelete, url+"/groups/"+name, nil); err != nil || code != http.StatusNoContent {
			g.e.logf("scaleout: DELETE /groups/%s on %s: %d %s %v", name, g.svc, code, body, err)
		}
	}
	g.extra = nil
}

// drop removes the point's schema, its slots and its topic.
func (g *groupFleet) drop(ctx context.Context) {
	if err := g.reset(ctx); err != nil {
		g.e.logf("scaleout: cleaning up %s: %v", g.schema, err)
	}
	if g.topic != "" {
		if err := deleteTopic(ctx, kafkaBrokers(), g.topic); err != nil {
			g.e.logf("scaleout: %v", err)
		}
	}
}

// reset drops the side's schema and every inactive slot named after
// groupsName (an active one belongs to a running instance: the next
// reset gets it).
func (g *groupFleet) reset(ctx context.Context) error {
	conn, err := g.e.connect(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots
		WHERE slot_name LIKE $1 AND NOT active`, groupsName+"%"); err != nil {
		return fmt.Errorf("drop the %s slots: %w", groupsName, err)
	}
	if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{g.schema}.Sanitize()+" CASCADE"); err != nil {
		return fmt.Errorf("drop schema %s: %w", g.schema, err)
	}
	return nil
}

// kafkaBrokers is KAFKA_BROKERS, or the stack's broker.
func kafkaBrokers() string {
	if b := os.Getenv("KAFKA_BROKERS"); b != "" {
		return b
	}
	return pairs.DefaultKafkaBrokers
}

// deleteTopic deletes topic on the first of brokers.
func deleteTopic(ctx context.Context, brokers, topic string) error {
	b, _, _ := strings.Cut(brokers, ",")
	c := &kafka.Client{Addr: kafka.TCP(strings.TrimSpace(b)), Timeout: 10 * time.Second}
	resp, err := c.DeleteTopics(ctx, &kafka.DeleteTopicsRequest{Topics: []string{topic}})
	if err == nil {
		err = resp.Errors[topic]
	}
	if err != nil && !errors.Is(err, kafka.UnknownTopicOrPartition) {
		return fmt.Errorf("delete topic %s: %w", topic, err)
	}
	return nil
}
