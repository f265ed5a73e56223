package experiments

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/raw"
)

// Names of the stack experiments.
const (
	// NotifySerializes is issue 14's item 1: pg_notify in the committing
	// transaction serializes commits.
	NotifySerializes = "notify-serializes-commits"
	// ListenThroughPgBouncer is item 2: LISTEN through pgbouncer in
	// transaction mode receives nothing.
	ListenThroughPgBouncer = "listen-through-pgbouncer"
	// CommitOrderGap is item 8: a global_pos cursor skips events that
	// commit out of order.
	CommitOrderGap = "commit-order-gap"
	// ToastRewrite is item 9: rewriting a large jsonb document writes it
	// whole.
	ToastRewrite = "toast-rewrite"
)

// notifyVersionNote is what the PostgreSQL sources say about the lock
// (read in src/backend/commands/async.c; docs/queue.md has the whole
// reading).
const notifyVersionNote = "Which versions take the lock (read in src/backend/commands/async.c, not measured; docs/queue.md): " +
	"PreCommit_Notify takes LockSharedObject(DatabaseRelationId, InvalidOid, 0, AccessExclusiveLock), one heavyweight lock for the whole cluster, " +
	"held until the transaction ends (across its commit record's flush), so that queue entries appear in commit order. " +
	"Every version read has it: 9.x, 13+ and master after the PostgreSQL 19 rework. " +
	"The reference's \"fixed only in PostgreSQL 19\" is contradicted by the source: the 19 change, commit 282b1cde9dedf456ecf02eb27caf086023a7bb71, " +
	"stops waking listeners with no interest in the channel and keeps the commit lock (its direct advancement relies on it). " +
	"Verified by measurement here on PostgreSQL 15 only; 16–19 are not measured."

// notifySerializes runs loadtests/raw's NOTIFY series: 1, 2, 4, 8 and 16
// committers, each committing one-row INSERTs without pg_notify, with
// pg_notify in the transaction, and debounced (at most one NOTIFY per
// interval, after the commits, in a transaction of its own).
func notifySerializes(ctx context.Context, env Env, size Size) (Result, error) {
	r := Result{
		Title:     "NOTIFY serializes commits",
		Happens:   "A transaction that calls pg_notify takes one cluster-wide lock at commit and holds it across the commit's flush: notifying commits run one at a time, so adding committers stops adding throughput.",
		UserMust:  "Keep pg_notify out of the hot transaction: commit, then send one debounced NOTIFY for many commits (NOTIFY_MODE=debounced, the default here), and treat it as a wake-up only.",
		AckedLost: -1,
		Metrics:   map[string]float64{},
	}
	o := raw.DefaultOptions()
	o.PostgresURL = env.PostgresURL
	o.Name = uniqueName("x")[2:]
	o.Duration = 400 * time.Millisecond // 200 ms per point
	if size == Full {
		o.Duration = 2 * time.Second // 1 s per point
	}
	o.Log = func(format string, args ...any) { env.logf(format, args...) }
	s := raw.MeasureNotify(ctx, o)
	if s.Error != "" {
		return r, errors.New(s.Error)
	}
	var lost int64
	for _, p := range s.Points {
		if p.Error != "" {
			return r, fmt.Errorf("%s ×%d: %s", p.Mode, p.Committers, p.Error)
		}
		k := p.Mode + "_" + strconv.Itoa(p.Committers)
		r.Metrics["tps_"+k] = p.TPS
		r.Metrics["p99_ms_"+k] = p.P99Ms
		if p.Mode != raw.NotifyNone {
			r.Metrics["sent_"+k] = float64(p.Sent)
			r.Metrics["received_"+k] = float64(p.Received)
			lost += max(p.Sent-p.Received, 0)
		}
	}
	// Committed NOTIFYs the listener never heard: each announced commits.
	r.AckedLost = lost
	n := raw.NotifyCommitters[len(raw.NotifyCommitters)-1]
	series := func(mode string) (string, bool) {
		var parts []string
		for _, c := range raw.NotifyCommitters {
			p, ok := s.Find(mode, c)
			if !ok {
				return "", false
			}
			parts = append(parts, num(p.TPS))
		}
		return strings.Join(parts, " / "), true
	}
	none, ok1 := series(raw.NotifyNone)
	intx, ok2 := series(raw.NotifyInTx)
	deb, ok3 := series(raw.NotifyDebounced)
	pn, _ := s.Find(raw.NotifyNone, n)
	pi, _ := s.Find(raw.NotifyInTx, n)
	pd, _ := s.Find(raw.NotifyDebounced, n)
	if !ok1 || !ok2 || !ok3 {
		return r, errors.New("the series lacks a point")
	}
	r.Metrics["in_tx_over_none_at_16"] = pi.TPS / pn.TPS
	r.Metrics["debounced_over_none_at_16"] = pd.TPS / pn.TPS
	r.Figure = fmt.Sprintf("Commits/s at %s committers: without pg_notify %s; with pg_notify in the transaction %s; debounced %s. At %d committers pg_notify in the transaction gives %s× the commits/s, commit p99 %s ms vs %s ms (debounced %s ms)",
		committers(), none, intx, deb, n, ratio(pi.TPS, pn.TPS), num(pi.P99Ms), num(pn.P99Ms), num(pd.P99Ms))
	r.Notes = []string{
		fmt.Sprintf("Measured on PostgreSQL %s: %s.", s.ServerVersion, s.Desc),
		notifyVersionNote,
		"The acknowledged-writes count is committed NOTIFYs the listening connection did not receive (in the committing transaction and debounced).",
	}
	return r, nil
}

// committers is "1, 2, 4, 8, 16".
func committers() string {
	var parts []string
	for _, c := range raw.NotifyCommitters {
		parts = append(parts, strconv.Itoa(c))
	}
	return strings.Join(parts, ", ")
}

// num formats a figure with up to 3 significant digits, no exponent.
func num(v float64) string {
	switch {
	case v >= 100 || v == float64(int64(v)):
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}

// ratio formats a ÷ b with two digits, or "–" when b is 0.
func ratio(a, b float64) string {
	if b == 0 {
		return "–"
	}
	return strconv.FormatFloat(a/b, 'f', 2, 64)
}
