package experiments

import (
	"fmt"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
)

// leaderKillText is rabbitmq-quorum-leader-kill's prose.
var leaderKillText = Text{
	Title: "RabbitMQ: the quorum queue's leader killed under load (3 nodes)",
	Happens: "The node that leads the quorum queue is killed (kill -9): the two others elect a new leader within seconds, and the rabbitmq service, given all three nodes in RABBITMQ_URL, finds its connection gone (it was on the killed node) and reconnects to the next node by itself. " +
		"A publish in flight at the kill is not confirmed: the service publishes it again on the new connection (the task may then be delivered twice: the record drops the second) or, past BACKEND_TIMEOUT, answers 503 of kind unknown. " +
		"No task answered 202 is lost and no delivered message goes missing: a confirm means a majority has the message, and deliveries held unacknowledged come back from the new leader. A task may run twice: a delivery in work when the consumer's connection died is redelivered while it runs (at-least-once, allowed).",
	UserMust: "List every node in RABBITMQ_URL and use QUEUE_TYPE=quorum (a classic queue lives on one node and is gone with it); keep the handling idempotent (the task record decides: a redelivery of a finished task is dropped, one of a task in work runs it twice); keep the reconciler on (RECONCILE_AFTER) for the 503s of kind unknown; restart the dead node soon: with two of three left, one more loss leaves no majority and the queue stops.",
	Figure:   func(f *Figures) string { return rmqFigure(f, "killed") },
	Notes:    func(f *Figures) []string { return rmqNotes(f, false) },
}

// leaderCutText is rabbitmq-quorum-leader-cut's prose.
var leaderCutText = Text{
	Title: "RabbitMQ: the quorum queue's leader cut off under load (a partition)",
	Happens: "The leader is cut off from the other two nodes (its link down) and keeps running. Raft on the two others elects a new leader within seconds, but the queue stalls for clients far longer: a publish through a node of the majority waits until the Erlang distribution declares the cut node down (the net tick, net_ticktime 60 s: seen here 60-70 s after the cut) and is then nacked; writes came back about 70 s after the cut at best, and in most runs here only at the heal. " +
		"A client connected to the cut node hears nothing: the service finds its connection dead only by the AMQP heartbeat (1.5 times RABBITMQ_HEARTBEAT), reconnects to the next node, and waits there the same way. Meanwhile writes answer 503: not_recorded while it has no session, unknown when a publish was not confirmed within BACKEND_TIMEOUT, shed once requests waiting on confirms fill MAX_IN_FLIGHT. " +
		"No task answered 202 is lost and no held delivery goes missing: only a majority confirms, and with pause_minority the cut node pauses once the partition is detected and rejoins when healed.",
	UserMust: "Expect a partition of the leader to stop the queue for about net_ticktime on this RabbitMQ (3.10), although Raft fails over in seconds: retry 503s with backoff for a minute or more, and treat those of kind unknown as possibly written (the reconciler publishes them); a shorter net_ticktime shortens the stall at the price of false alarms on a slow network (not measured here). Keep RABBITMQ_HEARTBEAT short: it alone frees a client stuck on the cut-off node. Keep pause_minority (or pause_if_all_down) if the cluster also holds classic queues, which have no Raft to protect them.",
	Figure:   func(f *Figures) string { return rmqFigure(f, "cut off") },
	Notes:    func(f *Figures) []string { return rmqNotes(f, true) },
}

// rmqFigure is a RabbitMQ failover result's figure in words; how is
// what happened to the leader.
func rmqFigure(f *Figures, how string) string {
	session := "no new session after the fault"
	if f.Num(MetricNewSession) != 0 {
		session = fmt.Sprintf("its new session began %.1f s after the fault", f.Num(MetricNewSessionSeconds))
	}
	return fmt.Sprintf("leader %s %s: Raft's new leader %s seen %.1f s later; the service's sessions %s (%d reconnect attempts; %s); "+
		"%s; %s; %d of %d answered 503 (%d not_recorded, %d shed, %d unknown: %d of their tasks delivered anyway, %d left queued, the dual-write gap), %d other errors; "+
		"all three nodes running again %.1f s after the fault; of %d tasks answered 202: %d lost, %d processed twice (at-least-once, allowed); probe: %d phantom of %d deliveries held unacknowledged across the fault",
		f.Str("old_leader"), how, f.Str("new_leader"), f.Num(MetricLeaderMovedSeconds), f.Str("service_nodes"), f.Int(MetricServiceReconnects), session,
		rmqStall(f, "writes", "202", rmqPublishStall), rmqStall(f, "deliveries", "delivery", rmqDeliveryStall),
		f.Int(MetricRefused503), f.Int(MetricSent), f.Int(Metric503NotRecorded), f.Int(Metric503Shed), f.Int(Metric503Unknown), f.Int(MetricUnknownDelivered), f.Int(MetricUnknownStranded), f.Int(MetricOtherErrors),
		f.Num(MetricRestoredSeconds), f.Int(MetricAcked), f.Int(MetricAckedLost), f.Int(MetricDuplicated), f.Int(MetricPhantom), f.Int(MetricProbeHeld))
}

// rmqStall is the longest stall of what (writes: answers 202;
// deliveries) in words, from the metrics k names.
func rmqStall(f *Figures, what, one string, k stallKeys) string {
	if f.Num(k.resumed) == 0 {
		return what + " never resumed after the fault"
	}
	return fmt.Sprintf("%s: the longest stretch without a %s %.1f s, ending %.1f s after the fault", what, one, f.Num(k.stall), f.Num(k.resume))
}

// rmqNotes are a RabbitMQ failover result's notes.
func rmqNotes(f *Figures, cut bool) []string {
	away := fmt.Sprintf("the node restarted (bash scripts/cluster.sh up rabbitmq) %s after the new leader was seen", secondsDur(f.Num(MetricHoldSeconds)))
	if cut {
		away = fmt.Sprintf("the node cut off (bash scripts/cluster.sh cut) for %s, then healed", secondsDur(f.Num(MetricHoldSeconds)))
	}
	notes := []string{
		fmt.Sprintf("the cluster profile's three RabbitMQ %s nodes (docs/cluster.md), cluster_partition_handling = %s; the rabbitmq service with RABBITMQ_URL listing all three (rmq1 first), QUEUE_TYPE=quorum, default RABBITMQ_HEARTBEAT and BACKEND_TIMEOUT, on the shared stack's Postgres in a schema of its own",
			f.Str("rabbitmq_version"), f.Str("partition_handling")),
		fmt.Sprintf("open load of single POST /tasks at %g/s: %s before the fault, %s, %s more once all three nodes ran again", f.Num(MetricRate), secondsDur(f.Num(MetricBeforeSeconds)), away, secondsDur(f.Num(MetricAfterSeconds))),
		"the reconciler is off (RECONCILE_AFTER=0) so that a message the broker lost shows as a lost task instead of being published again a minute later; with it on, the unknown tasks left queued are published again and run",
		"lost = answered 202 and not done 2 minutes after the load; processed twice = answered 202, done, and given to a worker more than once (attempts > 1; no task of the load fails); Raft's leader is read from the next node with rabbitmqctl eval rabbit_quorum_queue:status (the members' own view; rabbitmqctl list_queues' leader column is the queue's metadata record, which stayed on a cut-off leader until the net tick), each call 3-6 s here, so its time is that coarse; the stalls are the longest stretches without a 202 answer, and without a delivery of a task answered 202, that end after the fault",
		"phantom, for a queue: a message a consumer was given, had not acknowledged, and the cluster does not give again afterwards (the queue's counterpart of a row read on an old primary and missing on the promoted one). The service's records cannot show one (it finishes every delivery it holds when its channel dies), so a probe measures it: a second quorum queue led by the same node, 200 messages published with confirms and held unacknowledged by a consumer on another node across the fault, then given back (the consumer's connection closed) and consumed again; phantom = held − given back. Lost (the service's tasks) and phantom (the probe's messages) are counted apart, each message once",
	}
	if o := f.StrOr("other_answers", ""); o != "" {
		notes = append(notes, "answers neither 202 nor 503: "+o)
	}
	if cut {
		notes = append(notes, "pause_minority acts on the Erlang distribution's view (a peer silent for the net tick, 60 s): within a shorter cut the cut node never pauses, while the quorum queue's Raft (its own failure detector) elects a new leader in seconds either way")
	}
	return notes
}

// stallKeys name the figures of one stream's longest stall after the
// fault: whether it resumed, how long it stalled, when it resumed.
type stallKeys struct{ resumed, stall, resume driver.Metric }

// The RabbitMQ failover's publishes and deliveries (rmqcount.go).
var (
	rmqPublishStall  = stallKeys{resumed: MetricPublishResumed, stall: MetricPublishStallSeconds, resume: MetricPublishResumeSeconds}
	rmqDeliveryStall = stallKeys{resumed: MetricDeliveryResumed, stall: MetricDeliveryStallSeconds, resume: MetricDeliveryResumeSeconds}
)
