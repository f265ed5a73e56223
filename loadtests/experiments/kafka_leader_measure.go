package experiments

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
)

// leaderOutcome is what one leader-fault case measured.
type leaderOutcome struct {
	leader int // the faulted node's id
	t      leaderTimes
	// sent, acked (201) and failed requests; codes names the answers
	// other than 201, kinds counts the 503s by their kind.
	sent, acked, failed int
	codes               string
	kinds               map[string]int
	slowest             time.Duration
	// lost: acknowledged events absent from the topic's log once the
	// partition is whole again; undelivered: acknowledged events in the
	// log that the consumer group had not delivered a minute later;
	// phantom: events the consumer group delivered (a deliveries row)
	// that are absent from that log.
	lost, undelivered, phantom int64
	// ackedFault and lostFault are the acknowledgements answered between
	// the fault and the partition's return to three in sync, and how many
	// of those are lost.
	ackedFault, lostFault int64
	// logDuplicates counts acknowledged events at more than one offset
	// (a produce retried after a lost answer: kafka-go has no idempotent
	// producer); consumerDuplicates the redeliveries the consumer absorbed
	// by id (GET /consumer).
	logDuplicates, consumerDuplicates int64
	// appendsResume is the fault → the first 201 to a request sent after
	// the fault whose event is in the log; deliveriesResume the fault →
	// the first delivery of an event sent after the fault; -1 never.
	appendsResume, deliveriesResume time.Duration
	// faultErrors counts the errors the 503s named during the fault (their
	// "error", clipped), the most frequent first when recorded.
	faultErrors map[string]int
}

// measure waits (a minute at most) for the consumer group to deliver
// every acknowledged event the partition's log holds, takes the
// deliveries, then reads the log again and counts against that read. In
// that order: the producer may still write batches of requests answered
// 503 (kafka-go keeps them), and such an event, delivered after a log
// read, would look like a phantom against it; every delivered event was
// in the log when it was delivered, so one absent from a later read was
// truncated.
func (o *leaderOutcome) measure(ctx context.Context, svc leaderService, pg *pgx.Conn, shots []shot) error {
	k, topic, schema, base := svc.k, svc.topic, svc.schema, svc.base
	first, err := k.readLog(ctx, k.brokers(0), topic)
	if err != nil {
		return err
	}
	var inFirst []string
	for _, s := range shots {
		if s.err == nil && s.code == http.StatusCreated && first[s.id] > 0 {
			inFirst = append(inFirst, s.id)
		}
	}
	deliveries := pgx.Identifier{schema, "deliveries"}.Sanitize()
	var ko kafkaOutcome
	if err := ko.settle(ctx, pg, deliveries, inFirst); err != nil {
		return err
	}
	delivered, err := readDeliveries(ctx, pg, deliveries)
	if err != nil {
		return err
	}
	inLog, err := k.readLog(ctx, k.brokers(0), topic)
	if err != nil {
		return err
	}
	for _, id := range o.tally(shots, inLog) {
		if _, ok := delivered[id]; !ok {
			o.undelivered++
		}
	}
	if o.acked == 0 {
		return fmt.Errorf("no write was acknowledged (answers: %s)", o.codes)
	}
	o.resumes(shots, inLog, delivered)
	o.consumerDuplicates, err = consumerDuplicates(ctx, base)
	return err
}

// readDeliveries reads each delivered id and when (delivered_at) from
// from: the deliveries table, or a table with a WHERE clause whose rows
// have an id and a delivered_at.
func readDeliveries(ctx context.Context, pg *pgx.Conn, from string) (map[string]time.Time, error) {
	rows, err := pg.Query(ctx, `SELECT id::text, delivered_at FROM `+from)
	if err != nil {
		return nil, fmt.Errorf("read deliveries: %w", err)
	}
	delivered := map[string]time.Time{}
	for rows.Next() {
		var id string
		var at time.Time
		if err := rows.Scan(&id, &at); err != nil {
			return nil, err
		}
		delivered[id] = at
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read deliveries: %w", err)
	}
	return delivered, nil
}

// tally counts the shots against the log and returns the acknowledged
// ids the log holds.
func (o *leaderOutcome) tally(shots []shot, inLog map[string]int) (kept []string) {
	var ko kafkaOutcome
	ko.kinds = map[string]int{}
	for _, s := range shots {
		o.sent++
		o.slowest = max(o.slowest, s.lat)
		if s.err != nil || s.code != http.StatusCreated {
			o.failed++
			ko.readAnswer(s)
			if !s.end().Before(o.t.fault) && s.end().Before(o.t.whole) {
				o.noteError(s)
			}
			continue
		}
		o.acked++
		during := !s.end().Before(o.t.fault) && s.end().Before(o.t.whole)
		if during {
			o.ackedFault++
		}
		switch n := inLog[s.id]; {
		case n == 0:
			o.lost++
			if during {
				o.lostFault++
			}
			continue
		case n > 1:
			o.logDuplicates++
		}
		kept = append(kept, s.id)
	}
	o.kinds = ko.kinds
	o.codes = codeCounts(shots, kafkaSide)
	return kept
}

// noteError counts failed shot s's error message.
func (o *leaderOutcome) noteError(s shot) {
	if o.faultErrors == nil {
		o.faultErrors = map[string]int{}
	}
	var body struct {
		Error string `json:"error"`
	}
	msg := s.err.Error()
	if _, js, ok := strings.Cut(msg, " "); ok && json.Unmarshal([]byte(js), &body) == nil && body.Error != "" {
		msg = body.Error
	}
	if len(msg) > 160 {
		msg = msg[:160] + "…"
	}
	o.faultErrors[msg]++
}

// topErrors names the two most frequent errors of faultErrors with
// their counts.
func (o *leaderOutcome) topErrors() string {
	type kv struct {
		msg string
		n   int
	}
	var all []kv
	for m, n := range o.faultErrors {
		all = append(all, kv{m, n})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].n > all[j].n || all[i].n == all[j].n && all[i].msg < all[j].msg })
	var parts []string
	for _, e := range all[:min(2, len(all))] {
		parts = append(parts, fmt.Sprintf("%d× %q", e.n, e.msg))
	}
	return orNone(strings.Join(parts, ", "))
}

// resumes finds when appends and deliveries resumed after the fault, and
// counts the phantom deliveries.
func (o *leaderOutcome) resumes(shots []shot, inLog map[string]int, delivered map[string]time.Time) {
	o.appendsResume, o.deliveriesResume = -1, -1
	for id := range delivered {
		if inLog[id] == 0 {
			o.phantom++
		}
	}
	for _, s := range shots {
		if s.sent.Before(o.t.fault) || s.id == "" {
			continue
		}
		if s.err == nil && s.code == http.StatusCreated && inLog[s.id] > 0 {
			if d := s.end().Sub(o.t.fault); o.appendsResume < 0 || d < o.appendsResume {
				o.appendsResume = d
			}
		}
		if at, ok := delivered[s.id]; ok {
			if d := at.Sub(o.t.fault); o.deliveriesResume < 0 || d < o.deliveriesResume {
				o.deliveriesResume = d
			}
		}
	}
}

// record writes the case's figures into res under c's prefix.
func (o *leaderOutcome) record(res *Result, c leaderCase) {
	p := SidePrefix(c.name() + ".")
	for k, v := range map[driver.Metric]float64{
		MetricSent: float64(o.sent), MetricAcked: float64(o.acked), MetricFailed: float64(o.failed), MetricSlowestMS: ms(o.slowest),
		MetricLost: float64(o.lost), MetricUndelivered: float64(o.undelivered), MetricPhantom: float64(o.phantom),
		MetricAckedDuringFault: float64(o.ackedFault), MetricLostDuringFault: float64(o.lostFault),
		MetricLogDuplicates: float64(o.logDuplicates), MetricConsumerDuplicates: float64(o.consumerDuplicates),
		MetricElectionSeconds: secsSince(o.t.fault, o.t.elected), MetricMinISRAfterElection: float64(o.t.minISR), MetricAppendsResumeSeconds: recoverS(o.appendsResume),
		MetricDeliveriesResumeSeconds: recoverS(o.deliveriesResume), MetricHeldSeconds: secs(o.t.heal.Sub(o.t.fault)),
		MetricBackSeconds: secs(o.t.healed.Sub(o.t.heal)), MetricWholeSeconds: secs(o.t.whole.Sub(o.t.heal)), MetricWritableSeconds: secsSince(o.t.whole, o.t.writable),
		Metric503Unknown: float64(o.kinds["unknown"]), Metric503NotRecorded: float64(o.kinds["not_recorded"]),
		Metric503Shed: float64(o.kinds["shed"]), Metric503WithoutKind: float64(o.kinds[""]),
	} {
		res.metric(p.Of(k), v)
	}
	res.setting(string(p)+"answers", o.codes)
	res.setting(string(p)+"fault_errors", o.topErrors())
	res.setting(string(p)+"leader", fmt.Sprintf("kafka%d", o.leader))
	res.setting(string(p)+"new_leader", fmt.Sprintf("kafka%d", o.t.newLeader))
}
