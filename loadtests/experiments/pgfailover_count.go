package experiments

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/cluster"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// The prefixes of each side's figures in a Postgres failover result.
const (
	pgQueueKey = "queue"
	pgLogKey   = "log"
)

// pgFailSide is one Postgres side across a promotion: its service, the
// queries that count it, and what it measured.
type pgFailSide struct {
	key    string // pgQueueKey or pgLogKey
	side   pgSide
	schema string
	// watchQuery reads what the consumer recorded (cluster.StartSeen);
	// settleQuery counts, of the acknowledged ids ($1), the settled (done;
	// delivered), the absent (no record) and the duplicated;
	// deliveredFrom is readDeliveries' from (each delivered id and when);
	// absentQuery counts the ids ($1) the new primary does not hold.
	watchQuery, settleQuery, deliveredFrom, absentQuery string

	base, logPath string
	stop          func() []shot
	watch         *cluster.Seen
	shots         []shot
	seen          []string
	o             pgSideOutcome
}

// pgSideOutcome is what one side measured.
type pgSideOutcome struct {
	sent, acked, failed int
	codes               string
	// lost: acknowledged (2xx) and not done / not delivered after the
	// settle; absent: of those, without a record at all (the write itself
	// is gone); duplicated: delivered more than once (tasks with attempts
	// > 1; the consumer's redeliveries absorbed by id); seen: ids a reader
	// saw worked or delivered through the URL; phantom: of those, absent
	// on the new primary.
	lost, absent, duplicated, seen, phantom int64
	// writesStall is the longest stretch without an acknowledgement (an
	// answer 2xx) that ends after the fault, writesResume when it ended,
	// from the fault (-1: no acknowledgement after the fault);
	// deliveriesStall and deliveriesResume the same for the deliveries of
	// the acknowledged writes (delivered_at).
	writesStall, writesResume, deliveriesStall, deliveriesResume time.Duration
}

// newQueueSide is no-rabbitmq on schema: a task is worked when done.
func newQueueSide(schema string) *pgFailSide {
	tasks := schema + ".tasks"
	return &pgFailSide{key: pgQueueKey, side: pgSides[pairs.NoRabbitMQ], schema: schema,
		watchQuery: `SELECT id::text, (extract(epoch FROM processed_at) * 1e6)::bigint FROM ` + tasks +
			` WHERE status = 'done' AND processed_at > to_timestamp($1::float8 / 1e6) - interval '2 seconds' ORDER BY processed_at LIMIT 5000`,
		settleQuery: `SELECT count(*) FILTER (WHERE t.status = 'done'), count(*) FILTER (WHERE t.id IS NULL), count(*) FILTER (WHERE t.attempts > 1)
			FROM unnest($1::uuid[]) AS a(id) LEFT JOIN ` + tasks + ` t ON t.id = a.id`,
		deliveredFrom: tasks + ` WHERE delivered_at IS NOT NULL`,
		absentQuery:   `SELECT count(*) FROM unnest($1::uuid[]) AS a(id) WHERE NOT EXISTS (SELECT 1 FROM ` + tasks + ` t WHERE t.id = a.id)`,
	}
}

// newLogSide is no-kafka on schema, its default consumer group recording
// deliveries: an event is delivered when it has a deliveries row.
func newLogSide(schema string) *pgFailSide {
	return &pgFailSide{key: pgLogKey, side: pgSides[pairs.NoKafka], schema: schema,
		watchQuery: `SELECT id::text, seq FROM ` + schema + `.deliveries WHERE seq > $1 ORDER BY seq LIMIT 5000`,
		settleQuery: `SELECT count(d.id), count(*) FILTER (WHERE m.id IS NULL), 0::bigint
			FROM unnest($1::uuid[]) AS a(id) LEFT JOIN ` + schema + `.messages m ON m.id = a.id LEFT JOIN ` + schema + `.deliveries d ON d.id = a.id`,
		deliveredFrom: schema + `.deliveries`,
		absentQuery:   `SELECT count(*) FROM unnest($1::uuid[]) AS a(id) WHERE NOT EXISTS (SELECT 1 FROM ` + schema + `.messages m WHERE m.id = a.id)`,
	}
}

// count counts both sides on the new primary (conn through the URL) once
// every acknowledged write is settled or pgSettle has passed, and finds
// which way the log resumed.
func (r *pgRun) count(ctx context.Context, t pgTimes) error {
	conn, err := pgx.Connect(ctx, r.prof.url)
	if err != nil {
		return fmt.Errorf("postgres after the promotion: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	deadline := time.Now().Add(pgSettle) // both sides settle meanwhile
	for _, s := range r.sides() {
		if err := s.count(ctx, conn, t.fault, deadline); err != nil {
			return fmt.Errorf("%s: %w", s.side.name, err)
		}
	}
	if r.log.o.duplicated, err = consumerDuplicates(ctx, r.log.base); err != nil {
		return err
	}
	r.readRecovery(ctx, conn)
	return nil
}

// count tallies s's shots and counts them on conn, waiting until
// deadline for every acknowledged write to settle.
func (s *pgFailSide) count(ctx context.Context, conn *pgx.Conn, fault, deadline time.Time) error {
	s.o.tally(s.shots, s.side, fault)
	ids := acked(s.shots, s.side)
	if len(ids) == 0 {
		return fmt.Errorf("no write was acknowledged (answers: %s)", s.o.codes)
	}
	var settled int64
	for {
		err := conn.QueryRow(ctx, s.settleQuery, ids).Scan(&settled, &s.o.absent, &s.o.duplicated)
		if err != nil {
			return fmt.Errorf("count: %w", err)
		}
		if settled == int64(len(ids)) || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		sleep(ctx, 500*time.Millisecond)
	}
	s.o.lost = int64(len(ids)) - settled
	delivered, err := readDeliveries(ctx, conn, s.deliveredFrom)
	if err != nil {
		return err
	}
	s.o.deliveriesStall, s.o.deliveriesResume = stallAfter(deliveriesOf(ids, delivered), fault)
	s.o.seen = int64(len(s.seen))
	if err := conn.QueryRow(ctx, s.absentQuery, s.seen).Scan(&s.o.phantom); err != nil {
		return fmt.Errorf("phantoms: %w", err)
	}
	return nil
}

// tally counts the answers, and the longest stretch without an
// acknowledgement that ends after fault.
func (o *pgSideOutcome) tally(shots []shot, side pgSide, fault time.Time) {
	o.sent, o.acked, o.failed = 0, 0, 0
	var ends []time.Time
	for _, s := range shots {
		o.sent++
		if s.err != nil || s.code != side.okCode || s.id == "" {
			o.failed++
			continue
		}
		o.acked++
		ends = append(ends, s.end())
	}
	o.writesStall, o.writesResume = stallAfter(ends, fault)
	o.codes = codeCounts(shots, side)
}

// deliveriesOf are the delivery times (delivered) of the acknowledged ids.
func deliveriesOf(ids []string, delivered map[string]time.Time) []time.Time {
	var ts []time.Time
	for _, id := range ids {
		if at, ok := delivered[id]; ok {
			ts = append(ts, at)
		}
	}
	return ts
}

// record writes the run's figures and settings into res: each side's
// under its key, the promotion's, and the acknowledged writes lost (both
// sides), documented for a promotion of the asynchronous standby. A
// phantom is a lost write a reader had seen: it is among the lost, and
// counted apart in its own metric (FailoverLosses), never added to them.
func (r *pgRun) record(res *Result, p pgPromotion, size Size) {
	rate, before, after := p.load(size)
	for k, v := range map[driver.Metric]float64{
		MetricRate: rate, MetricBeforeSeconds: before.Seconds(), MetricAfterSeconds: after.Seconds(), MetricFullSize: b2f(size == Full),
		MetricPromotionSeconds: secs(r.promotion), MetricRejoined: b2f(r.rejoined), MetricRejoinSeconds: secs(r.rejoinTaken),
		MetricSlotSafeSeconds: recoverS(r.slotSafe), MetricResyncEvents: float64(r.resynced), MetricSettleSeconds: pgSettle.Seconds(),
		MetricServerVersionNum: float64(r.num), MetricAsyncCutSeconds: r.lag.Seconds(),
	} {
		res.metric(k, v)
	}
	var lost int64
	for _, s := range r.sides() {
		s.o.record(res, SidePrefix(s.key+"."))
		lost += s.o.lost
	}
	res.AckedLost = lost
	res.LossDocumented = p.async && lost > 0
	res.setting("queue_table", pgQueueTable)
	res.setting("slot_plugin", r.plugin)
	res.setting("recovery", r.recovery)
	res.setting("kill_primary", fmt.Sprint(p.kill))
}

// record writes o's figures under prefix p.
func (o *pgSideOutcome) record(res *Result, p SidePrefix) {
	for k, v := range map[driver.Metric]float64{
		MetricSent: float64(o.sent), MetricAcked: float64(o.acked), MetricFailed: float64(o.failed),
		MetricLost: float64(o.lost), MetricAbsent: float64(o.absent), MetricDuplicated: float64(o.duplicated),
		MetricSeen: float64(o.seen), MetricPhantom: float64(o.phantom),
		MetricWritesResumeSeconds: recoverS(o.writesResume), MetricDeliveriesResumeSeconds: recoverS(o.deliveriesResume),
		MetricWritesStallSeconds: secs(o.writesStall), MetricDeliveriesStallSeconds: secs(o.deliveriesStall),
	} {
		res.metric(p.Of(k), v)
	}
	res.setting(string(p)+"answers", o.codes)
}
