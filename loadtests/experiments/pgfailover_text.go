package experiments

import (
	"fmt"
	"strings"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
)

// pgText is a Postgres failover experiment's prose: t's sentences, with
// the figure and the notes of them all, how saying what happened to the
// old primary.
func pgText(t Text, how string) Text {
	return Text{Title: t.Title, Happens: t.Happens, UserMust: t.UserMust,
		Figure: func(f *Figures) string { return pgFailoverFigure(f, how) }, Notes: pgFailoverNotes}
}

// pgSwitchoverText is pg-switchover's prose.
var pgSwitchoverText = pgText(Text{
	Title: "Postgres: a clean switchover to the synchronous standby under load (both sides)",
	Happens: "The primary is stopped cleanly (pg_ctl stop -m fast: its sessions end, its standbys flush its shutdown checkpoint) and the synchronous standby is promoted. " +
		"Every session ends, and until the promotion a new connection through the multi-host URL is refused by each host (shutting down, then connection refused, then read-only standbys), so both services answer 503 for the promotion's seconds, then land on the new primary by themselves (target_session_attrs=read-write). " +
		"no-rabbitmq finds its UNLOGGED queue table empty on the promoted standby and rebuilds it from the task records when its LISTEN connection comes back; no-kafka resumes from its slot: made again and resynced from the messages table on 15-16 (the slot lived only on the old primary), the synchronized failover slot on 17+. " +
		"Nothing acknowledged is lost; tasks whose completion the switchover cut off run again after their lease, and events the slot had sent but not confirmed come again (at-least-once, allowed).",
	UserMust: "Give the services every node in one multi-host URL with target_session_attrs=read-write and retry 503s with backoff for a few seconds; keep the task handling and the event consumers idempotent. On 15-16, expect a resync of the log's consumers after every promotion (a burst of redelivery from the messages table); on 17+ create the slot with failover = true and run the standbys with sync_replication_slots, and wait until the standby's copy is persistent before a planned switchover. Rejoin the old primary (scripts/cluster.sh rejoin) so that the next failover has a synchronous standby again.",
}, "stopped cleanly")

// pgFailoverSyncText is pg-failover-sync's prose.
var pgFailoverSyncText = pgText(Text{
	Title: "Postgres: the primary killed, the synchronous standby promoted under load (both sides)",
	Happens: "The primary's postmaster is killed (kill -9) and the synchronous standby promoted: statements in flight fail (unexpected EOF), new connections are refused until the promotion, then both services go on on the new primary as after a switchover. " +
		"No acknowledged write is lost: every commit waited for the synchronous standby's flush (synchronous_standby_names), the consumers' records included, so nothing a consumer was shown is missing afterwards (no phantom). " +
		"A write whose answer the kill cut off may have committed (a 503 or a transport error, possibly written: retry idempotently); work whose completion was lost runs again (at-least-once, allowed).",
	UserMust: "As for a switchover, plus: treat a failed write as possibly committed and retry it idempotently; promote the synchronous standby, never the asynchronous one, when losing an acknowledged write is not allowed (scripts/cluster.sh promote <sync standby> --kill-primary); then rejoin the old primary (its data directory is rebuilt: it may hold WAL the new primary never had).",
}, "killed")

// pgFailoverAsyncText is pg-failover-async's prose.
var pgFailoverAsyncText = pgText(Text{
	Title: "Postgres: the primary killed, the asynchronous standby promoted under load (both sides)",
	Happens: "The primary is killed and the asynchronous standby promoted: every commit the primary acknowledged (after the synchronous standby's flush) that the asynchronous standby had not yet received is gone, the loss an asynchronous standby allows; the synchronous standby, if it had WAL past the fork, cannot follow and is rebuilt. " +
		"A lost task or event is lost for good (its record went with the WAL); a consumer may have been shown an event or worked a task whose record is gone (phantom), also allowed here. " +
		"How much is lost is how far the asynchronous standby was behind at the kill: caught up on this machine it is milliseconds behind and usually loses nothing, so the experiment cuts it off for a few seconds first (as a slow link or a busy standby would leave it behind), then kills the primary and heals it as the promotion begins: what the primary acknowledged meanwhile is the loss.",
	UserMust: "Do not promote an asynchronous standby when acknowledged writes must survive: promote the synchronous one (or use quorum commit, ANY 1 of several standbys). If you must (the synchronous standby is gone too), compare the standbys' received LSNs first (pg_last_wal_receive_lsn) and promote the furthest, and expect to reconcile with the producers: what they were told was written may not be.",
}, "killed")

// pgFailoverFigure is a Postgres failover result's figure in words; how
// is what happened to the old primary.
func pgFailoverFigure(f *Figures, how string) string {
	rejoin := fmt.Sprintf("%s rejoined as a standby, the cluster whole %.1f s after the load", f.Str("old_primary"), f.Num(MetricRejoinSeconds))
	if f.Num(MetricRejoined) == 0 {
		rejoin = fmt.Sprintf("failed: %s did not rejoin, or the cluster was not whole after it (cluster.sh status postgres), see the run's log", f.Str("old_primary"))
	}
	return fmt.Sprintf("PostgreSQL %s: %s %s, %s promoted (the script took %.1f s); queue: %s; log: %s; %s",
		f.Str("server_version"), f.Str("old_primary"), how, f.Str("promoted"), f.Num(MetricPromotionSeconds),
		pgSideFigure(f, pgQueueKey, "done", "processed twice"), pgSideFigure(f, pgLogKey, "delivered", "redelivered")+"; "+pgRecoveryText(f), rejoin)
}

// pgSideFigure is one side's figures in words: what a write counts as
// once settled (done, delivered) and what a duplicate is.
func pgSideFigure(f *Figures, key, settled, twice string) string {
	p := SidePrefix(key + ".")
	lost := fmt.Sprintf("%d lost (not %s; %d without a record)", f.Int(p.Of(MetricLost)), settled, f.Int(p.Of(MetricAbsent)))
	if f.Result().LossDocumented && f.Int(p.Of(MetricLost))+f.Int(p.Of(MetricPhantom)) > 0 {
		lost += " (allowed: the asynchronous standby had not received them)"
	}
	phantom := ""
	if why := PhantomAllowed(f.Result()); why != "" && !f.Result().LossDocumented && f.Int(p.Of(MetricPhantom)) > 0 {
		phantom = " (allowed: " + why + ")"
	}
	return fmt.Sprintf("of %d answered 2xx, %s, %d %s (at-least-once, allowed), %d phantom of %d seen %s by a reader on the old primary"+phantom+"; "+
		"writes: %s; deliveries: %s; %d of %d writes failed (%s)",
		f.Int(p.Of(MetricAcked)), lost, f.Int(p.Of(MetricDuplicated)), twice, f.Int(p.Of(MetricPhantom)), f.Int(p.Of(MetricSeen)), settled,
		pgStall(f, p.Of(MetricWritesStallSeconds), p.Of(MetricWritesResumeSeconds)), pgStall(f, p.Of(MetricDeliveriesStallSeconds), p.Of(MetricDeliveriesResumeSeconds)), f.Int(p.Of(MetricFailed)), f.Int(p.Of(MetricSent)), f.Str(string(p)+"answers"))
}

// pgStall is the longest stall of the writes or the deliveries (the keys
// of its length and of when it ended) in words: how long, and when it ended from the fault; "never resumed"
// (within the load and the settle) when nothing came after the fault;
// "never stalled" when its longest gap was under NoStall (a fault that
// stopped nothing, whose longest gap can end anywhere in the load).
func pgStall(f *Figures, stall, resume driver.Metric) string {
	if f.Num(resume) < 0 {
		return "never resumed after the fault (within the load and the settle)"
	}
	if s, ok := f.Result().Metrics[stall]; ok && s < NoStall.Seconds() {
		return fmt.Sprintf("never stalled (the longest gap after the fault %.2f s)", s)
	}
	return fmt.Sprintf("stalled %.1f s at most, again %.1f s after the fault", f.Num(stall), f.Num(resume))
}

// pgRecoveryText says which way no-kafka resumed.
func pgRecoveryText(f *Figures) string {
	switch f.Str("recovery") {
	case recoveryResync:
		n := "failed: the log does not say how many events"
		if e := f.Int(MetricResyncEvents); e >= 0 {
			n = fmt.Sprintf("%d events", e)
		}
		return "resumed by a resync: the slot was missing on the promoted standby, made again, and the resync delivered " + n + " from the messages table"
	case recoveryFailoverSlot:
		return "resumed from the synchronized failover slot the promoted standby held (failover, synced): no resync"
	}
	return "failed: neither a resync in the service's log nor a synchronized failover slot on the new primary was seen"
}

// pgFailoverNotes are a Postgres failover result's notes.
func pgFailoverNotes(f *Figures) []string {
	notes := []string{
		fmt.Sprintf("the cluster profile's Postgres (docs/cluster.md: a primary, a synchronous and an asynchronous standby, each in its own network namespace), PostgreSQL %s; both services on the multi-host CLUSTER_DATABASE_URL (target_session_attrs=read-write), each in a schema of its own: no-rabbitmq with QUEUE_TABLE=%s (its default) and TASK_RETENTION=0, its other settings default (LEASE 30 s), no-kafka with SLOT_PLUGIN=%s and its default consumer group",
			f.Str("server_version"), f.Str("queue_table"), f.Str("slot_plugin")),
		fmt.Sprintf("open load of single POST /tasks and single POST /events at %g/s each: %s before the promotion, %s after the script returned; then the old primary rejoined (bash scripts/cluster.sh rejoin) and the counts waited up to %s for every acknowledged write to be done or delivered",
			f.Num(MetricRate), secondsDur(f.Num(MetricBeforeSeconds)), secondsDur(f.Num(MetricAfterSeconds)), secondsDur(f.Num(MetricSettleSeconds))),
		"lost = answered 2xx and not done (task) or without a deliveries row (event) on the promoted primary after the settle; duplicated = tasks given to a worker more than once (attempts > 1) and the redeliveries no-kafka's consumer absorbed by id (GET /consumer); phantom = a task a reader saw done, or an event it saw delivered (a deliveries row), through the URL during the run, whose record (tasks; messages) is absent on the promoted primary; the fault = the promote command's start (the switchover's clean stop begins a moment later, after the script's checks); the writes' stall = the longest stretch without a 2xx answer that ends after the fault, and \"again\" when it ended: writes resumed; the deliveries' the same for the delivered_at of the acknowledged writes",
	}
	if f.Num(MetricServerVersionNum) >= failoverSlotsFrom {
		safe := "failed: the copy was not persistent within 3 minutes, promoted anyway"
		if s := f.Num(MetricSlotSafeSeconds); s >= 0 {
			safe = fmt.Sprintf("persistent after %.1f s of load", s)
		}
		notes = append(notes, "17+: before the promotion the load ran until the promoted standby held a synchronized, persistent copy of no-kafka's failover slot (pg_log_standby_snapshot every 2 s): "+safe)
	}
	if c := f.Num(MetricAsyncCutSeconds); c > 0 {
		notes = append(notes, fmt.Sprintf("the asynchronous standby was cut off (bash scripts/cluster.sh cut) %s before the kill, the load going on (commits wait for the synchronous standby only), and healed %s after the promote command began", secondsDur(c), asyncHealAfter))
	}
	return append(notes, "the promotion's time is scripts/cluster.sh promote's own (the fault, the standby's replay, pg_ctl promote, the other standby repointed and, after an asynchronous promotion, rebuilt if it was past the fork): "+strings.TrimSpace(fmt.Sprintf("%.1f s", f.Num(MetricPromotionSeconds))))
}
