package experiments

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/cluster"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/launch"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/localport"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// The settings these experiments run the two sides with.
const (
	// pgQueueTable is no-rabbitmq's QUEUE_TABLE here: its default
	// (docs/queue.md's table of settings), an UNLOGGED queue table that a
	// promoted standby has empty and the service rebuilds.
	pgQueueTable = "unlogged"
	// failoverSlotsFrom is the first server_version_num with failover
	// slots (PostgreSQL 17): no-kafka decodes with pgoutput there (18.4
	// from npm has no wal2json), with wal2json before, as make
	// test-cluster-services does.
	failoverSlotsFrom = 170000
	// pgSettle bounds the wait for every acknowledged write to be done or
	// delivered: a task whose completion the promotion cut off waits for
	// its lease (LEASE, 30 s by default).
	pgSettle = 2 * time.Minute
	// slotSafeWait bounds the wait for the promoted standby's persistent
	// copy of the log's failover slot (17+).
	slotSafeWait = 3 * time.Minute
)

// Recovery of no-kafka after a promotion (the "recovery" setting).
const (
	// recoveryResync: the service found its slot missing on the promoted
	// standby, made it again and delivered from the messages table what
	// its group had not had (consumer.onMissing; 15, 16).
	recoveryResync = "resync"
	// recoveryFailoverSlot: the promoted standby held the synchronized
	// failover slot and the service streamed from it (17+).
	recoveryFailoverSlot = "failover_slot"
	// recoveryUnknown: neither was seen.
	recoveryUnknown = "unknown"
)

// The lines of no-kafka's log that say it resynced (services/no-kafka:
// consumer.go's slot found missing, main.go's slot made again).
const (
	logSlotMissing = "replication slot is missing"
	logSlotMade    = "made the missing replication slot again"
)

// resyncEventsRE finds how many events the resync delivered
// (LOG_FORMAT=text: "events=N").
var resyncEventsRE = regexp.MustCompile(logSlotMade + `[^\n]* events=(\d+)`)

// pgRun is one experiment's run: the two services on the cluster, a pool
// on the multi-host URL for the watchers and the cleanup, and what the
// run measured beside the sides.
type pgRun struct {
	prof        *pgProfile
	num         int // server_version_num
	plugin      string
	l           *launch.Launcher
	logDir      string
	pool        *pgxpool.Pool
	queue, log  *pgFailSide
	slotSafe    time.Duration // 17+: until the promoted standby's copy was persistent; -1 not within slotSafeWait
	recovery    string
	resynced    int64
	promotion   time.Duration
	rejoined    bool
	rejoinTaken time.Duration
	lag         time.Duration // pg-failover-async: the standby cut off before the kill
}

// startPGRun starts no-rabbitmq and no-kafka on the cluster, each with a
// schema of its own (no-kafka's slot named after it). close stops them
// and drops what they made.
func startPGRun(ctx context.Context, env Env, prof *pgProfile, num int, logf func(string, ...any)) (*pgRun, error) {
	r := &pgRun{prof: prof, num: num, plugin: "wal2json", slotSafe: -1, recovery: recoveryUnknown}
	if num >= failoverSlotsFrom {
		r.plugin = "pgoutput"
	}
	var err error
	if r.l, r.logDir, err = env.launcher("wpe-pg-failover-logs-"); err != nil {
		return nil, err
	}
	if r.pool, err = pgxpool.New(ctx, prof.url); err != nil {
		_ = os.RemoveAll(r.logDir)
		return nil, err
	}
	r.queue = newQueueSide(uniqueName("exp_pgfail_q"))
	r.log = newLogSide(uniqueName("exp_pgfail_l"))
	for _, s := range r.sides() {
		if err := r.startSide(ctx, s); err != nil {
			r.close()
			return nil, err
		}
	}
	logf("%s on schema %s (QUEUE_TABLE=%s), %s on schema %s (SLOT_PLUGIN=%s)", pairs.NoRabbitMQ, r.queue.schema, pgQueueTable, pairs.NoKafka, r.log.schema, r.plugin)
	return r, nil
}

func (r *pgRun) sides() []*pgFailSide { return []*pgFailSide{r.queue, r.log} }

// startSide starts s's service on a free port and waits until it is ready.
func (r *pgRun) startSide(ctx context.Context, s *pgFailSide) error {
	port, err := localport.Free()
	if err != nil {
		return err
	}
	env := map[string]string{"DATABASE_URL": r.prof.url, "DATABASE_SCHEMA": s.schema, "LOG_FORMAT": "text"}
	if s == r.queue {
		env["QUEUE_TABLE"], env["TASK_RETENTION"] = pgQueueTable, "0"
	} else {
		env["SLOT_NAME"], env["SLOT_PLUGIN"] = s.schema, r.plugin
	}
	p, err := r.l.Start(ctx, s.side.name, port, env, 2*time.Minute)
	if err != nil {
		return err
	}
	s.base, s.logPath = fmt.Sprintf("http://127.0.0.1:%d", port), p.Log
	return crashWaitReady(ctx, s.base, time.Minute)
}

// close stops the services, drops the log's slot (a synchronized copy
// goes with it), its publication and both schemas on the primary, and
// removes the logs.
func (r *pgRun) close() {
	_ = r.l.StopAll(30 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	slot := r.log.schema
	for _, q := range []string{
		"SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = '" + slot + "' AND NOT active",
		"DROP PUBLICATION IF EXISTS " + slot,
		"DROP SCHEMA IF EXISTS " + r.log.schema + " CASCADE",
		"DROP SCHEMA IF EXISTS " + r.queue.schema + " CASCADE",
	} {
		if _, err := r.pool.Exec(ctx, q); err != nil {
			r.prof.logf("cleanup: %s: %v", q, err)
		}
	}
	r.pool.Close()
	_ = os.RemoveAll(r.logDir)
}

// promoteUnderLoad runs both sides' open loads and watchers, promotes
// target (on 17+ once it holds a persistent copy of the log's slot, or
// after slotSafeWait), or applies an automatic failover's fault to the
// primary, and loads a while more.
func (r *pgRun) promoteUnderLoad(ctx context.Context, roles cluster.Roles, target string, p pgPromotion, size Size) (pgTimes, error) {
	var t pgTimes
	rate, before, after := p.load(size)
	for _, s := range r.sides() {
		s.stop = startLoad(ctx, s.base, s.side, rate)
		s.watch = cluster.StartSeen(ctx, r.pool, s.watchQuery)
	}
	defer r.stopLoads()
	sleep(ctx, before)
	if p.auto != "" {
		// Nobody promotes: the fault is all, and the monitor does the rest
		// while the load goes on.
		t.fault = time.Now()
		d, err := r.autoFault(ctx, p, roles.Primary)
		t.promoted, r.promotion = time.Now(), d
		if err != nil {
			return t, err
		}
		sleep(ctx, after)
		r.stopLoads()
		return t, ctx.Err()
	}
	if r.num >= failoverSlotsFrom {
		r.slotSafe = r.waitSlotSafe(ctx, roles, target)
	}
	if p.async {
		if err := r.lagAsync(ctx, target, size); err != nil {
			return t, err
		}
		defer func() { _, _ = r.prof.run(context.WithoutCancel(ctx), "heal", target) }()
	}
	args := []string{"promote", target}
	if p.kill {
		args = append(args, "--kill-primary")
	}
	t.fault = time.Now()
	if p.async {
		// The promotion needs the standby's link (the other standby
		// follows it): healed once the kill is done, what it had not
		// received is gone with the old primary.
		go func() {
			sleep(ctx, asyncHealAfter)
			_, _ = r.prof.run(context.WithoutCancel(ctx), "heal", target)
		}()
	}
	d, err := r.prof.run(ctx, args...)
	t.promoted = time.Now()
	r.promotion = d
	if err != nil {
		return t, err
	}
	sleep(ctx, after)
	r.stopLoads()
	return t, ctx.Err()
}

// asyncLag is how long the asynchronous standby is cut off before the
// primary is killed (pg-failover-async): it falls that far behind, as
// behind a slow link or a busy standby, so the loss it allows shows
// (caught up, on this machine it is milliseconds behind and usually
// loses nothing). asyncHealAfter is when it is healed after the promote
// command starts (its kill of the primary takes well under that).
func asyncLag(size Size) time.Duration {
	if size == Full {
		return 5 * time.Second
	}
	return 2 * time.Second
}

const asyncHealAfter = 1500 * time.Millisecond

// lagAsync cuts the asynchronous standby target off for asyncLag, the
// load going on (commits wait for the synchronous standby only).
func (r *pgRun) lagAsync(ctx context.Context, target string, size Size) error {
	if _, err := r.prof.run(ctx, "cut", target); err != nil {
		return err
	}
	r.lag = asyncLag(size)
	sleep(ctx, r.lag)
	return nil
}

// stopLoads ends the loads and the watchers (again: a no-op).
func (r *pgRun) stopLoads() {
	for _, s := range r.sides() {
		if s.stop != nil {
			s.shots = s.stop()
		}
		if s.watch != nil {
			s.seen = s.watch.Stop()
		}
	}
}

// waitSlotSafe waits until target holds a synchronized, persistent copy
// of the log's failover slot (a promotion drops a temporary one;
// docs/cluster.md), writing a running-transactions record every 2 s
// (pg_log_standby_snapshot) so that the copy need not wait for the next
// one; it returns how long that took, -1 when not within slotSafeWait.
func (r *pgRun) waitSlotSafe(ctx context.Context, roles cluster.Roles, target string) time.Duration {
	var host string
	for _, s := range roles.Top.Standbys {
		if s.Name == target {
			host = s.Host
		}
	}
	cfg, err := cluster.HostConfig(r.prof.url, host)
	if err != nil {
		r.prof.logf("slot copy on %s: %v", target, err)
		return -1
	}
	start := time.Now()
	for time.Since(start) < slotSafeWait && ctx.Err() == nil {
		_, _ = r.pool.Exec(ctx, "SELECT pg_log_standby_snapshot()")
		if conn, err := pgx.ConnectConfig(ctx, cfg); err == nil {
			wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			err = cluster.WaitSlotSynced(wctx, conn, r.log.schema)
			cancel()
			_ = conn.Close(context.WithoutCancel(ctx))
			if err == nil {
				r.prof.logf("slot %s persistent on %s after %.1f s", r.log.schema, target, time.Since(start).Seconds())
				return time.Since(start)
			}
		}
	}
	r.prof.logf("slot %s not persistent on %s within %s: promoting anyway", r.log.schema, target, slotSafeWait)
	return -1
}

// readRecovery finds, in no-kafka's log and the new primary's slots,
// which way the log resumed.
func (r *pgRun) readRecovery(ctx context.Context, conn *pgx.Conn) {
	b, _ := os.ReadFile(r.log.logPath)
	text := string(b)
	if strings.Contains(text, logSlotMissing) {
		r.recovery = recoveryResync
		if m := resyncEventsRE.FindStringSubmatch(text); m != nil {
			r.resynced, _ = strconv.ParseInt(m[1], 10, 64)
		} else {
			r.resynced = -1
		}
		return
	}
	if r.num < failoverSlotsFrom {
		return
	}
	var failover, synced bool
	err := conn.QueryRow(ctx, `SELECT failover, synced FROM pg_replication_slots WHERE slot_name = $1`, r.log.schema).Scan(&failover, &synced)
	if err == nil && failover && synced {
		r.recovery = recoveryFailoverSlot
	}
}
