package scenario

import (
	"context"
	"fmt"
	"maps"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue"
)

// Fan-out (issue 23, item 2): one instance of each queue side whose
// FANOUT gives FanoutKind N subscribers, offered FanoutKind tasks at one
// fixed rate. rabbitmq publishes each task once to the kind's fanout
// exchange, which copies it into one durable queue per subscriber;
// no-rabbitmq inserts the N copies in the enqueue's one transaction
// (pgmq's copy-per-bound-queue design). Each copy is an ordinary task,
// processed by the instance's workers.

// FanoutKind is the kind the fan-out points post ("order.placed", the
// issue's example); its subscribers are s1 … sN.
const FanoutKind = "order.placed"

// Fan-out metric names, per side (besides the client.* of the attack,
// whose p99 is the enqueue's, and the processing p99, backlog and
// drained of the other scale-out points): the number of subscribers,
// the copies processed per second during the attack (N × the published
// rate when the side keeps up), the copies of accepted tasks not
// processed or dead at the drain bound (0 unless copies are lost or the
// side fell behind), the Postgres WAL bytes written per published task
// from the attack's start to the drain (both sides record their tasks
// in Postgres; only no-rabbitmq keeps the queue there too), and
// cpu.<group>.per_1k, the CPU-seconds per 1,000 published tasks of each
// process group (costSetAt: the service, Postgres, RabbitMQ, Kafka).
const (
	MetricFanoutSubscribers = "subscribers"
	MetricFanoutCopies      = "copies_per_s"
	MetricFanoutMissing     = "copies_missing"
	MetricFanoutWAL         = "wal_bytes_per_published"
)

// FanoutSetting is FANOUT for n subscribers of FanoutKind:
// "order.placed:s1,s2,…,sn".
func FanoutSetting(n int) string {
	subs := make([]string, n)
	for i := range subs {
		subs[i] = "s" + strconv.Itoa(i+1)
	}
	return FanoutKind + ":" + strings.Join(subs, ",")
}

// fanoutName names the fan-out point of n subscribers at rate:
// "200/s → 1 subscriber", "200/s → 8 subscribers".
func fanoutName(rate float64, n int) string {
	return driver.Label(rate) + " → " + SubscribersName(n)
}

// fanoutBody is the n-th FanoutKind task posted.
func fanoutBody(n uint64) []byte {
	return []byte(`{"kind":"` + FanoutKind + `","payload":{"n":` + strconv.FormatUint(n, 10) + `},"fail_times":0}`)
}

// fanoutPoints measures svc's side of the fan-out points of n
// subscribers: the fixed rate, then the sustainable search (when run),
// each on the cursors design too (when run) on its side.
func (pts *scaleOutPoints) fanoutPoints(ctx context.Context, e *Env, svc string, n int, o ScaleOutOptions) {
	pts.fanout(ctx, e, scaleOutSide{svc: svc, p: pts.fanouts[n]}, n, o)
	if p := pts.cursorFanouts[n]; p != nil && svc == fanoutCursors.side {
		pts.fanout(ctx, e, scaleOutSide{svc: svc, p: p, extra: fanoutCursors.settings()}, n, o)
	}
	if p := pts.fanoutSustains[n]; p != nil && ctx.Err() == nil {
		pts.fanoutSustain(ctx, e, scaleOutSide{svc: svc, p: p}, n, o)
	}
	if p := pts.cursorFanoutSustains[n]; p != nil && svc == fanoutCursors.side && ctx.Err() == nil {
		pts.fanoutSustain(ctx, e, scaleOutSide{svc: svc, p: p, extra: fanoutCursors.settings()}, n, o)
	}
}

// fanout measures at.svc's side of at.p, n subscribers: one fresh instance
// with FanoutSetting(n), WORK_MS o.FanoutWorkMS and at.extra (a second
// design's setting), o.FanoutRate tasks/s for o.Duration, the drain, the
// CPU and the WAL.
func (pts *scaleOutPoints) fanout(ctx context.Context, e *Env, at scaleOutSide, n int, o ScaleOutOptions) {
	svc, extra := at.svc, at.extra
	e.logf("scaleout: %s fan-out to %d subscribers at %s %v", svc, n, driver.Label(o.FanoutRate), extra)
	env := map[string]string{"FANOUT": FanoutSetting(n), "WORK_MS": strconv.Itoa(o.FanoutWorkMS)}
	maps.Copy(env, extra)
	measureOne(ctx, pts, at,
		func() (*fleet, error) { return startFleet(ctx, e, fleetSpec{svc: svc, n: 1, extra: env}, o) },
		func(f *fleet) (*driver.SideResult, error) { return f.fanoutRate(ctx, n, o) })
}

// fanoutRate offers o.FanoutRate FanoutKind tasks/s to the fleet's one
// instance for o.Duration, waits for the copies to drain, and records
// the copies' rate, what is missing, the CPU of each process group and
// the WAL per published task.
func (f *fleet) fanoutRate(ctx context.Context, subs int, o ScaleOutOptions) (*driver.SideResult, error) {
	res := &driver.SideResult{Metrics: map[driver.Metric]float64{MetricFanoutSubscribers: float64(subs)}}
	if err := f.resetStats(ctx); err != nil {
		return res, err
	}
	url := f.urls[0]
	groups := costSetAt(ctx, f.e, f.ports[0], o.StackDir)
	lsn0, err := f.walLSN(ctx)
	if err != nil {
		return res, err
	}
	cpu0 := groups.Sample()
	spec := driver.AttackSpec{
		Name: fmt.Sprintf("%-12s fan-out ×%d %s", f.svc, subs, driver.Label(o.FanoutRate)), Rate: o.FanoutRate, Duration: o.Duration,
		MaxWorkers: f.e.MaxWorkers, Progress: f.e.Progress,
		Next: func(n uint64) driver.Request {
			return driver.Request{Method: http.MethodPost, URL: url + "/tasks", Body: fanoutBody(n)}
		},
	}
	final, drained, err := f.attack(ctx, spec, res, MetricFanoutCopies)
	if err != nil {
		return res, err
	}
	used := groups.Sample().Sub(cpu0)
	lsn1, err := f.walLSN(ctx)
	if err != nil {
		return res, err
	}
	// The tasks the instance accepted: its own count of copies over the
	// subscribers (a request cut off by the attack's end may still have
	// been committed, so c.OK can be short by a few).
	published := sum(final, queue.CounterEnqueued) / int64(subs)
	sideCPU(res.Metrics, groups, used, published)
	if published > 0 {
		res.Metrics[MetricFanoutWAL] = math.Round(float64(lsn1-lsn0) / float64(published))
	}
	res.Metrics[MetricFanoutMissing] = float64(max(sum(final, queue.CounterEnqueued)-sum(final, queue.CounterProcessed)-sum(final, queue.CounterDead), 0))
	fill(res.Metrics, final, drained)
	return res, nil
}

// walLSN returns Postgres' current WAL insert position, in bytes.
func (f *fleet) walLSN(ctx context.Context) (int64, error) {
	conn, err := f.e.connect(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.Background())
	var lsn int64
	if err := conn.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::int8`).Scan(&lsn); err != nil {
		return 0, fmt.Errorf("read the WAL position: %w", err)
	}
	return lsn, nil
}

// fanoutQueues are the rabbitmq side's queues and exchange for
// FanoutSetting(n) on the work queue workQueue (the service's
// <queue>.fanout.<kind> exchange and <queue>.fanout.<kind>@<sub> queues).
func fanoutQueues(workQueue string, n int) (queues []string, exchange string) {
	for i := range n {
		queues = append(queues, workQueue+".fanout."+queue.CopyKind(FanoutKind, "s"+strconv.Itoa(i+1)))
	}
	return queues, workQueue + ".fanout." + FanoutKind
}

// dropFanout deletes the fan-out queues and exchange of n subscribers
// on the broker at url.
func dropFanout(url, workQueue string, n int) error {
	queues, exchange := fanoutQueues(workQueue, n)
	return deleteNames(url, queues, []string{exchange})
}
