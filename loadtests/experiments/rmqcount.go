package experiments

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
)

// rmqOutcome is what one RabbitMQ failover run measured.
type rmqOutcome struct {
	t                       rmqTimes
	rate                    float64
	before, hold, after     time.Duration
	oldLeader, serviceNodes string
	sent, acked, refused503 int
	otherErrors             int
	kinds                   map[string]int // 503s by kind
	others                  map[string]int // the other answers, by status ("transport error" for none)
	ids, unknownIDs         []string       // answered 202; named by 503s of kind unknown
	// publishStall is the longest stretch without a 202 answer that
	// ends after the fault, and publishResume when it ended, from the
	// fault (-1: no 202 after the fault). deliveryStall and
	// deliveryResume are the same for the deliveries of the tasks
	// answered 202 (their records' delivered_at).
	publishStall, publishResume   time.Duration
	deliveryStall, deliveryResume time.Duration
	// lost: answered 202, not done after the settle; duplicated: done,
	// but delivered to a worker more than once (attempts > 1; no task
	// of the load fails).
	lost, duplicated int64
	// unknownDelivered and unknownStranded split the tasks of 503s of
	// kind unknown: delivered after all, or left queued (the dual-write
	// gap; the reconciler is off). unexplained counts records no answer
	// accounts for.
	unknownDelivered, unknownStranded, unexplained int64
	probeHeld, probeBack                           int
	// reconnects is the service's reconnects counter: attempts at a new
	// session after a lost one; newSession is when its first session
	// after the fault began (zero: none did).
	reconnects int64
	newSession time.Time
}

// tally counts the answers.
func (o *rmqOutcome) tally(answers []answer) {
	o.kinds, o.others = map[string]int{}, map[string]int{}
	// Never nil: a nil slice is sent as NULL, and "NOT id = ANY(NULL)"
	// is never true.
	o.ids, o.unknownIDs = []string{}, []string{}
	var ends []time.Time
	for _, a := range answers {
		o.sent++
		switch a.status {
		case http.StatusAccepted:
			o.acked++
			o.ids = append(o.ids, a.id)
			ends = append(ends, a.sent.Add(a.took))
		case http.StatusServiceUnavailable:
			o.refused503++
			o.kinds[a.kind]++
			if a.kind == "unknown" {
				o.unknownIDs = append(o.unknownIDs, a.ids...)
			}
		default:
			o.otherErrors++
			k := strconv.Itoa(a.status)
			if a.status == 0 {
				k = "transport error"
			}
			o.others[k]++
		}
	}
	o.publishStall, o.publishResume = stallAfter(ends, o.t.fault)
}

// stallAfter finds, in the moments ts, the longest stretch without one
// that ends after fault: its length, and when it ended from fault (-1
// when nothing is after fault).
func stallAfter(ts []time.Time, fault time.Time) (stall, resume time.Duration) {
	sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
	resume = -1
	prev := fault
	for _, t := range ts {
		if !t.After(fault) {
			prev = t
			continue
		}
		if gap := t.Sub(prev); resume < 0 || gap > stall {
			stall, resume = gap, t.Sub(fault)
		}
		prev = t
	}
	return stall, resume
}

// count waits (two minutes at most) until every task answered 202 is
// done, then counts the lost, the duplicated, the fate of the "unknown"
// tasks, the records no answer accounts for, and when deliveries
// resumed.
func (o *rmqOutcome) count(ctx context.Context, svc *rmqService) error {
	tasks := pgx.Identifier{svc.schema, "tasks"}.Sanitize()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var done int64
		if err := svc.pg.QueryRow(ctx, `SELECT count(*) FROM `+tasks+` WHERE status = 'done' AND id = ANY($1::uuid[])`, o.ids).Scan(&done); err != nil {
			return fmt.Errorf("count tasks: %w", err)
		}
		o.lost = int64(len(o.ids)) - done
		if o.lost == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	err := svc.pg.QueryRow(ctx, `SELECT
	    count(*) FILTER (WHERE id = ANY($1::uuid[]) AND status = 'done' AND attempts > 1),
	    count(*) FILTER (WHERE id = ANY($2::uuid[]) AND delivered_at IS NOT NULL),
	    count(*) FILTER (WHERE id = ANY($2::uuid[]) AND delivered_at IS NULL),
	    count(*) FILTER (WHERE NOT id = ANY($1::uuid[]) AND NOT id = ANY($2::uuid[]))
	  FROM `+tasks, o.ids, o.unknownIDs).Scan(&o.duplicated, &o.unknownDelivered, &o.unknownStranded, &o.unexplained)
	if err != nil {
		return fmt.Errorf("count tasks: %w", err)
	}
	rows, err := svc.pg.Query(ctx, `SELECT delivered_at FROM `+tasks+` WHERE id = ANY($1::uuid[]) AND delivered_at IS NOT NULL`, o.ids)
	if err != nil {
		return fmt.Errorf("deliveries: %w", err)
	}
	delivered, err := pgx.CollectRows(rows, pgx.RowTo[time.Time])
	if err != nil {
		return fmt.Errorf("deliveries: %w", err)
	}
	o.deliveryStall, o.deliveryResume = stallAfter(delivered, o.t.fault)
	return nil
}

// record writes o's figures and settings into res.
func (o *rmqOutcome) record(res *Result, size Size) {
	phantom := int64(o.probeHeld - o.probeBack)
	// The service's tasks lost; the probe's phantoms are counted apart
	// (FailoverLosses), each write once.
	res.AckedLost = o.lost
	for k, v := range map[driver.Metric]float64{
		MetricRate: o.rate, MetricBeforeSeconds: o.before.Seconds(), MetricHoldSeconds: o.hold.Seconds(), MetricAfterSeconds: o.after.Seconds(), MetricFullSize: b2f(size == Full),
		MetricSent: float64(o.sent), MetricAcked: float64(o.acked), MetricAckedLost: float64(o.lost), MetricDuplicated: float64(o.duplicated),
		MetricProbeHeld: float64(o.probeHeld), MetricProbeBack: float64(o.probeBack), MetricPhantom: float64(phantom),
		MetricRefused503: float64(o.refused503), Metric503NotRecorded: float64(o.kinds["not_recorded"]), Metric503Unknown: float64(o.kinds["unknown"]),
		Metric503Shed: float64(o.kinds["shed"]), Metric503WithoutKind: float64(o.refused503 - o.kinds["not_recorded"] - o.kinds["unknown"] - o.kinds["shed"]),
		MetricOtherErrors: float64(o.otherErrors), MetricUnknownDelivered: float64(o.unknownDelivered), MetricUnknownStranded: float64(o.unknownStranded),
		MetricUnexplainedRecords: float64(o.unexplained),
		MetricLeaderMovedSeconds: secs(o.t.leaderMoved.Sub(o.t.fault)), MetricRestoredSeconds: secs(o.t.restored.Sub(o.t.fault)),
		MetricPublishResumed: b2f(o.publishResume >= 0), MetricPublishResumeSeconds: recoverS(o.publishResume), MetricPublishStallSeconds: secs(o.publishStall),
		MetricDeliveryResumed: b2f(o.deliveryResume >= 0), MetricDeliveryResumeSeconds: recoverS(o.deliveryResume), MetricDeliveryStallSeconds: secs(o.deliveryStall),
		MetricServiceReconnects: float64(o.reconnects), MetricNewSession: b2f(!o.newSession.IsZero()), MetricNewSessionSeconds: secs(o.newSession.Sub(o.t.fault)),
	} {
		res.Metrics[k] = v
	}
	res.setting("old_leader", o.oldLeader)
	res.setting("new_leader", o.t.newLeader)
	res.setting("service_nodes", o.serviceNodes)
	var others []string
	for k, n := range o.others {
		others = append(others, fmt.Sprintf("%s×%d", k, n))
	}
	sort.Strings(others)
	res.setting("other_answers", strings.Join(others, ", "))
}
