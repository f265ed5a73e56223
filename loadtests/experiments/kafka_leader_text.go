package experiments

import (
	"fmt"
	"strings"
)

// kafkaLeaderKillText is kafka-leader-kill's prose.
var kafkaLeaderKillText = Text{
	Title: "Kafka partition leader killed under load (3 brokers)",
	Happens: "With replication factor 3, min.insync.replicas=2 and acks=all, killing the broker that leads the topic's partition (kill -9) loses no acknowledged event: " +
		"writes answer 503 until the controller fences the dead broker (broker.session.timeout.ms, 9 s), an in-sync follower leads and the service's producer learns of it at its next metadata refresh, then go on; the consumer group follows the new leader; the restarted broker truncates to the new leader's log and rejoins the ISR. " +
		"A 503 in the gap may still be delivered (\"delivery\": \"unknown\"), and a batch delivered but not committed is delivered again and absorbed by id.",
	UserMust: "Retry 503s with backoff for about the fencing time (KAFKA_WRITE_TIMEOUT bounds each answer); treat a 503 of kind unknown as possibly written. Keep acks=all, min.insync.replicas=2 and unclean.leader.election.enable=false: acks=1 can lose the writes the leader acknowledged and had not yet copied.",
	Figure:   func(f *Figures) string { return leaderFigures(f) },
	Notes: func(f *Figures) []string {
		return append(leaderNotes(f), "the killed broker is started again by `bash scripts/cluster.sh up kafka` (which starts the nodes that do not run and waits until all three answer) once the fault was held; \"back\" is that command's time")
	},
}

// kafkaLeaderCutText is kafka-leader-cut's prose.
var kafkaLeaderCutText = Text{
	Title: "Kafka partition leader cut off under load (3 brokers)",
	Happens: "A leader cut off from the other two brokers while the service still reaches it goes on leading in its own eyes: it cannot shrink its ISR without the controller, and the service's producer keeps sending to it until a metadata refresh names the leader the other two elected once they fenced it (9 s and more). " +
		"With acks=all it acknowledges nothing meanwhile (its writes wait for followers that never fetch, and time out: 503), and nothing acknowledged is lost. " +
		"With acks=1 it acknowledges every write at once, and when healed it truncates its log to the new leader's: every event it acknowledged alone is gone (the loss acks=1 allows). " +
		"Consumers read only up to the high watermark, which the cut-off leader cannot advance, so none of those events was delivered (no phantom). " +
		"A leader cut off from everyone (its link down) takes no writes at all, so acks=1 loses no more there than writes in flight.",
	UserMust: "Use acks=all with min.insync.replicas=2 (and unclean leader election off) if an acknowledged event must survive a partition: it costs the writes refused while the leader is cut off, about as long as a dead leader's, and the replication round trip on every write. With acks=1 expect to lose what a cut-off leader acknowledged until the producer moved: every write for seconds, not a few in flight.",
	Figure:   func(f *Figures) string { return leaderFigures(f) },
	Notes: func(f *Figures) []string {
		return append(leaderNotes(f),
			"isolate = `bash scripts/cluster.sh isolate kafkaN`: a blackhole route to each other broker in the node's namespace, so it loses its peers (and the controller quorum) while the host, where the service runs, still reaches it; cut = `cluster.sh cut kafkaN`: its link down, nobody reaches it; both undone by `cluster.sh heal kafkaN`")
	},
}

// leaderCasesOf are the cases a result ran (its "cases" setting).
func leaderCasesOf(f *Figures) []leaderCase {
	var cs []leaderCase
	for _, name := range strings.Split(f.Str("cases"), ",") {
		fault, acks, ok := strings.Cut(name, ".acks_")
		if ok {
			cs = append(cs, leaderCase{fault, acks})
		}
	}
	return cs
}

// leaderFigures joins every case's figure.
func leaderFigures(f *Figures) string { return caseFigures(f, leaderCasesOf(f), leaderCaseFigure) }

// leaderCaseFigure is case c's figure in words.
func leaderCaseFigure(f *Figures, c leaderCase) string {
	p := SidePrefix(c.name() + ".")
	lost := fmt.Sprintf("%d of %d acknowledged lost", f.Int(p.Of(MetricLost))+f.Int(p.Of(MetricUndelivered)), f.Int(p.Of(MetricAcked)))
	if n := f.Int(p.Of(MetricLost)); n > 0 && c.acks == "1" {
		lost += fmt.Sprintf(" (%d absent from the log, %d of the %d acknowledged during the fault: allowed by acks=1)", n, f.Int(p.Of(MetricLostDuringFault)), f.Int(p.Of(MetricAckedDuringFault)))
	}
	return fmt.Sprintf("%s, acks=%s: leader %s, new leader %s %s after the fault (then at fewest %d in sync); durable 201s again %s, deliveries again %s after it; "+
		"%d of %d writes failed (%s; 503s: %s; slowest answer %.0f ms); %s, %d undelivered, %d phantom; "+
		"duplicates: %d acknowledged events twice in the log (a retried produce), %d redeliveries absorbed by the consumer (both allowed: at-least-once); "+
		"held %.0f s, back in %.1f s, ISR whole %.1f s after, a write taken %s after that",
		strings.ToUpper(c.fault), c.acks, f.Str(string(p)+"leader"), f.Str(string(p)+"new_leader"), orNever(f.Num(p.Of(MetricElectionSeconds))), f.Int(p.Of(MetricMinISRAfterElection)),
		orNever(f.Num(p.Of(MetricAppendsResumeSeconds))), orNever(f.Num(p.Of(MetricDeliveriesResumeSeconds))),
		f.Int(p.Of(MetricFailed)), f.Int(p.Of(MetricSent)), f.Str(string(p)+"answers"), esKindsText(f, p), f.Num(p.Of(MetricSlowestMS)),
		lost, f.Int(p.Of(MetricUndelivered)), f.Int(p.Of(MetricPhantom)),
		f.Int(p.Of(MetricLogDuplicates)), f.Int(p.Of(MetricConsumerDuplicates)),
		f.Num(p.Of(MetricHeldSeconds)), f.Num(p.Of(MetricBackSeconds)), f.Num(p.Of(MetricWholeSeconds)), orNever(f.Num(p.Of(MetricWritableSeconds))))
}

// orNever is a time in seconds in words, "never" when it is negative.
func orNever(s float64) string {
	if s < 0 {
		return "never"
	}
	return fmt.Sprintf("%.1f s", s)
}

// leaderNotes are the notes both experiments share, and each case's
// most frequent errors during the fault.
func leaderNotes(f *Figures) []string {
	var errs []string
	for _, c := range leaderCasesOf(f) {
		errs = append(errs, fmt.Sprintf("%s: the 503s' most frequent errors between the fault and the ISR whole again: %s", c.name(), f.Str(c.name()+".fault_errors")))
	}
	return append([]string{
		fmt.Sprintf("the cluster profile's Kafka (3 KRaft nodes, broker and controller each, docs/cluster.md: %s); the kafka service with KAFKA_PARTITIONS=1, KAFKA_REPLICATION_FACTOR=3, KAFKA_MIN_INSYNC_REPLICAS=2, KAFKA_ACKS per case, KAFKA_WRITE_TIMEOUT and BACKEND_TIMEOUT %s; its Postgres is the shared stack's, a schema per case",
			f.Str("brokers"), msDur(f.Num(MetricTimeoutMS))),
		fmt.Sprintf("open load of single POST /events at %g/s: %s before the fault, the fault held %s, then the node brought back and the load run until the partition's 3 replicas are in sync again, a probe write is answered 201 (one every 500 ms, a minute at most), and %s more; the service's own consumer group reads the events",
			f.Num(MetricRate), secondsDur(f.Num(MetricBeforeSeconds)), secondsDur(f.Num(MetricHoldSeconds)), secondsDur(f.Num(MetricAfterSeconds))),
		"new leader = the first metadata answer of the other two brokers naming another leader; durable 201s again = the first 201 to a request sent after the fault whose event is in the log afterwards; deliveries again = the first delivery (delivered_at) of an event sent after the fault",
		"acknowledged lost = answered 201 and absent from the partition's log read from offset 0 once it is whole again, or in it and not delivered to the group a minute later; phantom = delivered to the group (a deliveries row) and absent from that log: read past the high watermark and then truncated, which Kafka's consumers should never see",
	}, errs...)
}
