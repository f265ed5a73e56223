package experiments

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// The automatic failover experiments (issue 40): the same two Postgres
// sides and load as the scripted ones, on the cluster profile's Postgres
// under pg_auto_failover (`bash scripts/cluster.sh up postgres-auto`: a
// monitor and a keeper per node, the formation's defaults). Nobody
// promotes: the fault is all the experiment does, and the monitor
// detects it and promotes a standby, so that the time to the first
// acknowledged write counts the detection, as the brokers' experiments
// do. The scripted promotions stay as their own rows.
const (
	// PGAutoKill kills the primary's node: its keeper and its Postgres
	// (SIGKILL to both).
	PGAutoKill = "pg-auto-kill"
	// PGAutoCut takes the primary's network link down: neither its
	// peers nor the clients reach it.
	PGAutoCut = "pg-auto-cut"
	// PGAutoIsolate cuts the primary off from its peers (the monitor and
	// the standbys) while the clients still reach it.
	PGAutoIsolate = "pg-auto-isolate"
	// PGAutoStandbyCut takes a standby's link down: a follower cut off,
	// the primary untouched.
	PGAutoStandbyCut = "pg-auto-standby-cut"
)

// The faults of the automatic failover experiments (pgPromotion.auto).
const (
	autoKill       = "kill"
	autoCut        = "cut"
	autoIsolate    = "isolate"
	autoStandbyCut = "standby-cut"
)

// pgNodes are the cluster profile's Postgres nodes (scripts/cluster.sh
// PG_NODES).
var pgNodes = []string{"pg1", "pg2", "pg3"}

// HAAuto is CLUSTER_PG_HA's value while the cluster profile's Postgres
// runs under pg_auto_failover (scripts/cluster.sh env).
const HAAuto = "auto"

// pgAutoExperiments are the automatic failover experiments (in Cluster).
// Full: the services start (about 5 s), 10 s of load, the fault and
// pgAutoAfter of load after it (the monitor's detection and promotion
// took 51-59 s with its defaults), the old primary back (a keeper started again, or
// the link healed: it rejoins as a standby, pg_rewind) and the settle.
func pgAutoExperiments() []Experiment {
	return []Experiment{
		{Name: PGAutoKill, Full: 150 * time.Second, Text: pgAutoKillText, Run: pgFailoverRun(pgPromotion{name: PGAutoKill, auto: autoKill, kill: true})},
		{Name: PGAutoCut, Full: 150 * time.Second, Text: pgAutoCutText, Run: pgFailoverRun(pgPromotion{name: PGAutoCut, auto: autoCut})},
		{Name: PGAutoIsolate, Full: 150 * time.Second, Text: pgAutoIsolateText, Run: pgFailoverRun(pgPromotion{name: PGAutoIsolate, auto: autoIsolate})},
		{Name: PGAutoStandbyCut, Full: 150 * time.Second, Text: pgAutoStandbyCutText, Run: pgFailoverRun(pgPromotion{name: PGAutoStandbyCut, auto: autoStandbyCut})},
	}
}

// pgAutoAfter is how long the load goes on after an automatic
// failover's fault: past the monitor's detection and promotion (with its
// defaults node_considered_unhealthy_timeout, 20 s, then
// primary_demote_timeout, 30 s: measured 51-59 s on 6 December 2026,
// when 60 s left one run 0.7 s to spare), with time to spare.
func pgAutoAfter(size Size) time.Duration {
	if size == Full {
		return 90 * time.Second
	}
	return 75 * time.Second
}

// checkFormation says "not run" when the formation that runs is not the
// one p needs: the scripted promotions need the scripted roles
// (`up postgres`), the automatic failovers pg_auto_failover's
// (`up postgres-auto`).
func checkFormation(env Env, p pgPromotion) error {
	switch auto := env.ClusterPGHA == HAAuto; {
	case p.auto != "" && !auto:
		return notRun("the cluster profile's Postgres does not run under pg_auto_failover (CLUSTER_PG_HA=%q): as root, bash scripts/cluster.sh down postgres && bash scripts/cluster.sh up postgres-auto, then eval \"$(bash scripts/cluster.sh env running)\"", env.ClusterPGHA)
	case p.auto == "" && auto:
		return notRun("the cluster profile's Postgres runs under pg_auto_failover (CLUSTER_PG_HA=auto): the scripted promotions need the scripted formation (bash scripts/cluster.sh down postgres && bash scripts/cluster.sh up postgres)")
	}
	return nil
}

// autoWait waits (5 minutes at most) until the formation is whole and
// returns the node the monitor has as primary.
func (p *pgProfile) autoWait(ctx context.Context) (string, error) {
	out, err := runClusterScript(ctx, p.script, 6*time.Minute, "auto-wait", "300")
	if err != nil {
		return "", fmt.Errorf("the pg_auto_failover formation is not whole (a primary and two secondaries): %w", err)
	}
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "primary="); ok && v != "" {
			return v, nil
		}
	}
	return "", fmt.Errorf("cluster.sh auto-wait named no primary: %q", lastLines(out, 3))
}

// autoTarget is the node p's fault hits: the primary, or for
// autoStandbyCut the first other node (a standby).
func autoTarget(p pgPromotion, primary string) string {
	if p.auto != autoStandbyCut {
		return primary
	}
	for _, n := range pgNodes {
		if n != primary {
			return n
		}
	}
	return ""
}

// autoFault applies p's fault to its target node (autoTarget of the
// primary) and returns how long the command took.
func (r *pgRun) autoFault(ctx context.Context, p pgPromotion, primary string) (time.Duration, error) {
	cmd := map[string]string{autoKill: "auto-kill", autoCut: "cut", autoIsolate: "isolate", autoStandbyCut: "cut"}[p.auto]
	return r.prof.run(ctx, cmd, autoTarget(p, primary))
}

// autoRestore undoes p's fault on its target (its keeper started again,
// or its link healed), waits until the formation is whole again and
// returns the node the monitor then has as primary; whether and when it
// was whole is recorded as a rejoin.
func (r *pgRun) autoRestore(ctx context.Context, p pgPromotion, primary string) string {
	t0 := time.Now()
	cmd := "heal"
	if p.auto == autoKill {
		cmd = "auto-start"
	}
	_, err := r.prof.run(ctx, cmd, autoTarget(p, primary))
	var now string
	if err == nil {
		now, err = r.prof.autoWait(ctx)
	}
	r.rejoinTaken, r.rejoined = time.Since(t0), err == nil
	if err != nil {
		r.prof.logf("the formation is not whole after %s %s: %v", cmd, autoTarget(p, primary), err)
	}
	return now
}

// pgAutoText is an automatic failover experiment's prose: t's sentences
// with the figure and notes of them all; how says what the fault did to
// the old primary.
func pgAutoText(t Text, how string) Text {
	return Text{Title: t.Title, Happens: t.Happens, UserMust: t.UserMust,
		Figure: func(f *Figures) string { return pgAutoFigure(f, how) }, Notes: pgAutoNotes}
}

// pgAutoUserMust is what every automatic failover asks of the user.
const pgAutoUserMust = "Give the services every node in one multi-host URL with target_session_attrs=read-write and retry 503s with backoff for longer than the monitor's detection and promotion (with pg_auto_failover's defaults a primary is unhealthy after node_considered_unhealthy_timeout, 20 s, and the monitor then waits primary_demote_timeout, 30 s, for an old primary it cannot reach to have stopped serving: about 50 s; shorter settings bring failovers on a slow node, and a demote timeout shorter than the old primary's own network_partition_timeout risks two primaries); keep the task handling and the event consumers idempotent, and treat a failed write as possibly committed. " +
	"Keep the formation's synchronous replication (ANY 1 of the standbys, its default with two): the monitor promotes only a standby that has every acknowledged commit. Run the monitor on its own host: without it nothing fails over. On 15-16, expect a resync of the log's consumers after every failover (the slot lived only on the old primary)."

// pgAutoKillText is pg-auto-kill's prose.
var pgAutoKillText = pgAutoText(Text{
	Title: "Postgres under pg_auto_failover: the primary's node killed under load (both sides)",
	Happens: "The primary's node dies (SIGKILL to its keeper and its Postgres) and nobody promotes by hand: the monitor's health checks fail, it declares the node unhealthy and promotes a standby of the replication quorum, and the other standby follows it. " +
		"Until then every write fails (connections refused by the dead address, the standbys read-only); then both services go on on the new primary through the multi-host URL, no-rabbitmq rebuilding its UNLOGGED queue table and no-kafka resyncing its slot from the messages table. " +
		"No acknowledged write is lost: every commit waited for a standby of the quorum. The old node, started again, rejoins as a standby.",
	UserMust: pgAutoUserMust,
}, "killed (keeper and Postgres)")

// pgAutoCutText is pg-auto-cut's prose.
var pgAutoCutText = pgAutoText(Text{
	Title: "Postgres under pg_auto_failover: the primary cut off from everyone under load (both sides)",
	Happens: "The primary's network link goes down: neither the monitor, the standbys nor the clients reach it. Statements in flight hang until the services' connections give up (TCP keepalives and timeouts), new connections to it time out, and the monitor promotes a standby once its health checks have failed; meanwhile the old primary, losing the monitor and its standbys, demotes itself (network_partition_timeout). " +
		"No acknowledged write is lost: a commit the old primary acknowledged reached a standby of the quorum first. The link healed, the old primary rejoins as a standby (pg_rewind).",
	UserMust: pgAutoUserMust,
}, "cut off (its link down)")

// pgAutoIsolateText is pg-auto-isolate's prose.
var pgAutoIsolateText = pgAutoText(Text{
	Title: "Postgres under pg_auto_failover: the primary cut off from its peers under load, the clients still reaching it (both sides)",
	Happens: "The primary loses the monitor and both standbys while the services still reach it: it accepts connections and statements, but no commit can finish, since each waits for a standby of the quorum that no longer answers, so the writes hang and fail at the services' timeouts (503) instead of being acknowledged. " +
		"The monitor promotes a standby once its health checks have failed, and the old primary demotes itself when it has had neither the monitor nor a standby for network_partition_timeout; the services then reconnect to the new primary. " +
		"No acknowledged write is lost and none can be on both sides: the old primary acknowledged nothing it could not replicate. Healed, it rejoins as a standby.",
	UserMust: pgAutoUserMust,
}, "cut off from its peers (the clients still reaching it)")

// pgAutoStandbyCutText is pg-auto-standby-cut's prose.
var pgAutoStandbyCutText = pgAutoText(Text{
	Title: "Postgres under pg_auto_failover: a standby cut off under load (both sides)",
	Happens: "A standby's network link goes down while the primary runs on: with both standbys in the replication quorum (ANY 1), a commit waits for one of them, so the other one carries every commit and the writes go on; the monitor marks the lost standby unhealthy. " +
		"Nothing is lost and nothing fails over. The link healed, the standby catches up from the primary.",
	UserMust: "Keep two standbys in the quorum (the formation's default with three nodes): with one, the primary's commits would wait for it while it is away, as the scripted formation's synchronous standby does. " + pgAutoUserMust,
}, "")

// pgAutoFigure is an automatic failover result's figure in words; how
// is what the fault did to the old primary.
func pgAutoFigure(f *Figures, how string) string {
	if f.Str("fault") == autoStandbyCut {
		return pgAutoStandbyFigure(f)
	}
	promoted := f.Str("promoted")
	after := fmt.Sprintf("the monitor promoted %s", promoted)
	switch {
	case promoted == "":
		after = "failed: the formation was not whole again, so which node was promoted is not known"
	case promoted == f.Str("old_primary"):
		after = fmt.Sprintf("no failover: %s was the primary again afterwards", promoted)
	}
	back := fmt.Sprintf("%s back as a standby, the formation whole %.1f s after the load", f.Str("old_primary"), f.Num(MetricRejoinSeconds))
	if f.Num(MetricRejoined) == 0 {
		back = fmt.Sprintf("failed: the formation was not whole after %s came back (cluster.sh auto-wait), see the run's log", f.Str("old_primary"))
	}
	return fmt.Sprintf("PostgreSQL %s under pg_auto_failover: %s %s, %s; queue: %s; log: %s; %s",
		f.Str("server_version"), f.Str("old_primary"), how, after,
		pgSideFigure(f, pgQueueKey, "done", "processed twice"), pgSideFigure(f, pgLogKey, "delivered", "redelivered")+"; "+pgRecoveryText(f), back)
}

// pgAutoStandbyFigure is pg-auto-standby-cut's figure in words.
func pgAutoStandbyFigure(f *Figures) string {
	stayed := fmt.Sprintf("%s stayed the primary", f.Str("old_primary"))
	if p := f.Str("promoted"); p != f.Str("old_primary") {
		stayed = fmt.Sprintf("the primary moved to %s", p)
		if p == "" {
			stayed = "failed: the formation was not whole again afterwards"
		}
	}
	return fmt.Sprintf("PostgreSQL %s under pg_auto_failover: a standby of %s cut off, %s; queue: %s; log: %s",
		f.Str("server_version"), f.Str("old_primary"), stayed,
		pgSideFigure(f, pgQueueKey, "done", "processed twice"), pgSideFigure(f, pgLogKey, "delivered", "redelivered"))
}

// pgAutoNotes are an automatic failover result's notes.
func pgAutoNotes(f *Figures) []string {
	return []string{
		fmt.Sprintf("the cluster profile's Postgres under pg_auto_failover (docs/cluster.md, \"Automatic failover\": a monitor in a namespace of its own and a keeper on each of three nodes, the formation's defaults: synchronous replication to ANY 1 of the two standbys, health checks every 5 s, a node unhealthy after 20 s), PostgreSQL %s; both services on the multi-host CLUSTER_DATABASE_URL (target_session_attrs=read-write), each in a schema of its own: no-rabbitmq with QUEUE_TABLE=%s (its default) and TASK_RETENTION=0, its other settings default (LEASE 30 s), no-kafka with SLOT_PLUGIN=%s and its default consumer group",
			f.Str("server_version"), f.Str("queue_table"), f.Str("slot_plugin")),
		fmt.Sprintf("open load of single POST /tasks and single POST /events at %g/s each: %s before the fault and %s after it, nobody promoting; then the old primary came back (its keeper started again, or its link healed), the formation was waited for until whole (bash scripts/cluster.sh auto-wait), and the counts waited up to %s for every acknowledged write to be done or delivered",
			f.Num(MetricRate), secondsDur(f.Num(MetricBeforeSeconds)), secondsDur(f.Num(MetricAfterSeconds)), secondsDur(f.Num(MetricSettleSeconds))),
		"lost, duplicated and phantom as in the scripted promotions; the fault = the start of the command that applies it (scripts/cluster.sh auto-kill, cut or isolate), so that the writes' \"again\" counts the monitor's detection and promotion and the services' reconnection, as the brokers' experiments count theirs",
	}
}

// PhantomAllowed says why r's phantoms (writes a reader on the old
// primary had seen, absent after the failover) are a loss its settings
// allow, or "" when they are not (or r is no Postgres failover): a
// promoted asynchronous standby had not received them; or, on
// pg-auto-isolate before PostgreSQL 17, the old primary's logical
// decoding sent its consumer commits that no standby had. A commit
// waiting for the synchronous standby is already committed locally (the
// writer, cut off, gets its 503 at the timeout); PostgreSQL 15 and 16
// decode it for a slot as soon as it is flushed locally, so no-kafka's
// consumer on the old primary delivered it, and the promoted standby
// never had it. PostgreSQL 17's synchronized_standby_slots makes a
// logical slot wait for the named physical standbys.
func PhantomAllowed(r Result) string {
	switch {
	case r.Name == PGFailoverAsync && r.LossDocumented:
		return "the asynchronous standby had not received them"
	case r.Name == PGAutoIsolate && PGMajor(r) > 0 && PGMajor(r) < 17:
		return "commits that waited for the cut-off standbys were already committed on the old primary, and its logical decoding (before PostgreSQL 17's synchronized_standby_slots) sent them to its consumer before any standby had them; none was answered 2xx"
	}
	return ""
}

// NoStall is the longest gap between acknowledged writes (or deliveries)
// after a fault that still counts as no stall: 50 arrivals a second
// leave 20 ms between two, and a fault that stops nothing (a standby cut
// off from a quorum of two) leaves gaps of a few of them, the longest of
// which can end anywhere in the load: its end is no time to recover.
const NoStall = time.Second
