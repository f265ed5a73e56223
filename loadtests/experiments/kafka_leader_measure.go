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
func (o *leaderOutcome) measure(ctx context.Context, k *kafkaCluster, pg *pgx.Conn, schema, topic, base string, shots []shot) error {
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
	p := c.name() + "."
	for k, v := range map[string]float64{
		"sent": float64(o.sent), "acked": float64(o.acked), "failed": float64(o.failed), "slowest_ms": ms(o.slowest),
		"lost": float64(o.lost), "undelivered": float64(o.undelivered), "phantom": float64(o.phantom),
		"acked_during_fault": float64(o.ackedFault), "lost_during_fault": float64(o.lostFault),
		"log_duplicates": float64(o.logDuplicates), "consumer_duplicates": float64(o.consumerDuplicates),
		"election_s": secsSince(o.t.fault, o.t.elected), "min_isr_after_election": float64(o.t.minISR), "appends_resume_s": recoverS(o.appendsResume),
		"deliveries_resume_s": recoverS(o.deliveriesResume), "held_s": secs(o.t.heal.Sub(o.t.fault)),
		"back_s": secs(o.t.healed.Sub(o.t.heal)), "whole_s": secs(o.t.whole.Sub(o.t.heal)), "writable_s": secsSince(o.t.whole, o.t.writable),
		"503_unknown": float64(o.kinds["unknown"]), "503_not_recorded": float64(o.kinds["not_recorded"]),
		"503_shed": float64(o.kinds["shed"]), "503_without_kind": float64(o.kinds[""]),
	} {
		res.metric(p+k, v)
	}
	res.setting(p+"answers", o.codes)
	res.setting(p+"fault_errors", o.topErrors())
	res.setting(p+"leader", fmt.Sprintf("kafka%d", o.leader))
	res.setting(p+"new_leader", fmt.Sprintf("kafka%d", o.t.newLeader))
}
