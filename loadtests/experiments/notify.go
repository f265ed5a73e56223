package experiments

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/raw"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/versions"
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
// reading), for a result measured on PostgreSQL 15 alone.
const notifyVersionNote = "Which versions take the lock (read in src/backend/commands/async.c, not measured; docs/queue.md): " +
	notifySourceReading + "Verified by measurement here on PostgreSQL 15 only; 16–19 are not measured."

// notifySourceReading is the reading of the sources every version note
// carries.
const notifySourceReading = "PreCommit_Notify takes LockSharedObject(DatabaseRelationId, InvalidOid, 0, AccessExclusiveLock), one heavyweight lock for the whole cluster, " +
	"held until the transaction ends (across its commit record's flush), so that queue entries appear in commit order. " +
	"Every version read has it: 9.x, 13+ and master after the PostgreSQL 19 rework. " +
	"The reference's \"fixed only in PostgreSQL 19\" is contradicted by the source: the 19 change, commit 282b1cde9dedf456ecf02eb27caf086023a7bb71, " +
	"stops waking listeners with no interest in the channel and keeps the commit lock (its direct advancement relies on it). "

// notifyVersionsNote is notifyVersionNote for a result that measured
// the majors of measured.
func notifyVersionsNote(measured []string) string {
	return "Which versions take the lock (read in src/backend/commands/async.c; docs/queue.md): " + notifySourceReading +
		"Verified by measurement here on PostgreSQL " + strings.Join(measured, " and ") + " only; the other versions are read, not measured."
}

// notifyText is notify-serializes-commits' prose.
var notifyText = Text{
	Title:    "NOTIFY serializes commits",
	Happens:  "A transaction that calls pg_notify takes one cluster-wide lock at commit and holds it across the commit's flush: notifying commits run one at a time, so adding committers stops adding throughput.",
	UserMust: "Keep pg_notify out of the hot transaction: commit, then send one debounced NOTIFY for many commits (NOTIFY_MODE=debounced, the default here), and treat it as a wake-up only.",
	Figure:   notifyFigure,
	Notes:    notifyNotes,
}

// notifyNotes are notify-serializes-commits' notes: how it ran, what the
// sources say about each version, and what the acknowledged count is.
func notifyNotes(f *Figures) []string {
	point := secondsDur(f.Num(MetricPointSeconds))
	interval := msDur(f.Num(MetricDebounceIntervalMS))
	notes := []string{
		fmt.Sprintf("Measured on PostgreSQL %s: one-row INSERT commits on a logged table, %v per point, one LISTENing connection; "+
			"notify_in_tx: INSERT and pg_notify in one statement's transaction; notify_debounced: pglisten.Debouncer, at most one NOTIFY per %v after the commits.",
			f.Str("server_version"), point, interval),
	}
	others := comparedPrefixes(f)
	if len(others) == 0 {
		return append(notes, notifyVersionNote,
			"The acknowledged-writes count is committed NOTIFYs the listening connection did not receive (in the committing transaction and debounced).")
	}
	measured := []string{versions.PostgresMajorText(f.Str("server_version"))}
	for _, p := range others {
		v := f.Str(p + "server_version")
		measured = append(measured, versions.PostgresMajorText(v))
		notes = append(notes, fmt.Sprintf("PostgreSQL %s: the same series, after the shared server's, on a private server of its own (own data directory, in the temporary directory, and own port) "+
			"given the shared server's settings (shared_buffers, synchronous_commit, fsync, wal_level, …: versions.PostgresSettingNames), "+
			"so that the two differ in version, not in settings; the shared server may also be serving other work.", v))
	}
	return append(notes, notifyVersionsNote(measured),
		"The acknowledged-writes count is committed NOTIFYs the listening connections did not receive (in the committing transaction and debounced, on every version measured).")
}

// comparedPrefixes are the metric prefixes ("pg18.") of the other
// versions the result measured (its "compared" setting), in order.
func comparedPrefixes(f *Figures) []string {
	var out []string
	for _, p := range strings.Split(f.StrOr("compared", ""), ",") {
		if p != "" {
			out = append(out, p+".")
		}
	}
	return out
}

// notifyFigure is the commits/s of each mode at each count of committers
// and the ratio at the most; per version when the result measured other
// versions than the shared server's (or says why it did not), led by
// each version's ratio at the most committers.
func notifyFigure(f *Figures) string {
	others, none := comparedPrefixes(f), f.StrOr("not_compared", "")
	if len(others) == 0 && none == "" {
		return notifySeriesFigure(f, "")
	}
	n := raw.NotifyCommitters[len(raw.NotifyCommitters)-1]
	share := func(prefix string) string {
		at := func(mode string) float64 { return f.Num(NotifyKey(prefix, MetricNotifyTPSOf, mode, n)) }
		return ratio(at(raw.NotifyInTx), at(raw.NotifyNone)) + "×"
	}
	lead := fmt.Sprintf("At %d committers pg_notify in the transaction gives %s the commits/s on PostgreSQL %s (the shared stack)", n, share(""), firstWord(f.Str("server_version")))
	for _, p := range others {
		lead += fmt.Sprintf(", %s on %s (a private server)", share(p), firstWord(f.Str(p+"server_version")))
	}
	parts := []string{lead, "PostgreSQL " + f.Str("server_version") + " (the shared stack): " + notifySeriesFigure(f, "")}
	for _, p := range others {
		parts = append(parts, "PostgreSQL "+f.Str(p+"server_version")+" (a private server, the stack's settings): "+notifySeriesFigure(f, p))
	}
	if none != "" {
		parts = append(parts, "other PostgreSQL versions not measured: "+none)
	}
	return strings.Join(parts, ". ")
}

// firstWord is a server_version's number ("15.18" of "15.18 (Debian
// 15.18-0+deb12u1)").
func firstWord(version string) string {
	w, _, _ := strings.Cut(strings.TrimSpace(version), " ")
	return w
}

// notifySeriesFigure is notifyFigure of the series whose metrics start
// with prefix ("" for the shared server's).
func notifySeriesFigure(f *Figures, prefix string) string {
	series := func(mode string) string {
		var parts []string
		for _, c := range raw.NotifyCommitters {
			parts = append(parts, num(f.Num(NotifyKey(prefix, MetricNotifyTPSOf, mode, c))))
		}
		return strings.Join(parts, " / ")
	}
	n := raw.NotifyCommitters[len(raw.NotifyCommitters)-1]
	at := func(what driver.MetricPrefix, mode string) float64 { return f.Num(NotifyKey(prefix, what, mode, n)) }
	return fmt.Sprintf("Commits/s at %s committers: without pg_notify %s; with pg_notify in the transaction %s; debounced %s. At %d committers pg_notify in the transaction gives %s× the commits/s, commit p99 %s ms vs %s ms (debounced %s ms)",
		committers(), series(raw.NotifyNone), series(raw.NotifyInTx), series(raw.NotifyDebounced), n,
		ratio(at(MetricNotifyTPSOf, raw.NotifyInTx), at(MetricNotifyTPSOf, raw.NotifyNone)),
		num(at(MetricNotifyP99MSOf, raw.NotifyInTx)), num(at(MetricNotifyP99MSOf, raw.NotifyNone)), num(at(MetricNotifyP99MSOf, raw.NotifyDebounced)))
}

// notifySerializes runs loadtests/raw's NOTIFY series: 1, 2, 4, 8 and 16
// committers, each committing one-row INSERTs without pg_notify, with
// pg_notify in the transaction, and debounced (at most one NOTIFY per
// interval, after the commits, in a transaction of its own).
func notifySerializes(ctx context.Context, env Env, size Size) (Result, error) {
	r := Result{AckedLost: -1, Metrics: map[driver.Metric]float64{}}
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
	lost, err := notifyMetrics(&r, "", s)
	if err != nil {
		return r, err
	}
	r.metric(MetricPointSeconds, s.PointSeconds)
	r.metric(MetricDebounceIntervalMS, s.IntervalMs)
	r.setting("server_version", s.ServerVersion)
	// Committed NOTIFYs the listeners never heard: each announced commits.
	r.AckedLost = lost + notifyOnVersions(ctx, env, o, &r)
	return r, nil
}

// notifyOnVersions measures the series again on a private server of each
// of env.CompareBindirs, given the shared server's settings, recording
// its figures under "pg<major>." and its prefix in the setting
// "compared"; a version that could not measure, or why none was asked
// (env.CompareNone), is in "not_compared". It returns the committed
// NOTIFYs their listeners did not receive.
func notifyOnVersions(ctx context.Context, env Env, o raw.Options, r *Result) (lost int64) {
	var compared, none []string
	if len(env.CompareBindirs) == 0 && env.CompareNone != "" {
		none = append(none, env.CompareNone)
	}
	var set map[string]string
	if len(env.CompareBindirs) > 0 {
		var err error
		if set, err = serverSettings(ctx, env.PostgresURL); err != nil {
			none = append(none, err.Error())
		}
	}
	for _, bin := range env.CompareBindirs {
		if set == nil {
			break
		}
		p, n, err := notifyOnPrivate(ctx, env, privateServer{bin: bin, set: set}, o, r)
		if err != nil {
			first, _, _ := strings.Cut(err.Error(), "\n") // the whole error is in the log
			none = append(none, bin+": "+first)
			env.logf("notify on %s: could not measure: %v", bin, err)
			continue
		}
		compared = append(compared, p)
		lost += n
	}
	if len(compared) > 0 {
		r.setting("compared", strings.Join(compared, ","))
	}
	if len(none) > 0 {
		r.setting("not_compared", strings.Join(none, "; "))
	}
	return lost
}

// privateServer is how a private PostgreSQL server starts: the
// directory of its binaries (bin) and the settings it runs with (set,
// postgresql.conf values).
type privateServer struct {
	// bin is the directory of the server's binaries (any version).
	bin string
	// set is the settings it runs with, as postgresql.conf values.
	set map[string]string
}

// notifyOnPrivate runs the series on a private server srv and records
// it in r under its prefix ("pg18"), which it returns with the NOTIFYs
// the listener missed.
func notifyOnPrivate(ctx context.Context, env Env, srv privateServer, o raw.Options, r *Result) (string, int64, error) {
	bin := srv.bin
	cl, err := newPGClusterAt(ctx, bin, srv.set)
	if err != nil {
		return "", 0, err
	}
	defer cl.Close()
	env.logf("notify: PostgreSQL %s, a private server (%s)", cl.Version(), bin)
	o.PostgresURL = cl.URL()
	s := raw.MeasureNotify(ctx, o)
	if s.Error != "" {
		return "", 0, errors.New(s.Error)
	}
	p := "pg" + versions.PostgresMajorText(s.ServerVersion)
	lost, err := notifyMetrics(r, p+".", s)
	if err != nil {
		return "", 0, err
	}
	r.setting(p+".server_version", s.ServerVersion)
	return p, lost, nil
}

// notifyMetrics records every point of s in r, each metric's name
// starting with prefix ("" for the shared server's), and returns the committed
// NOTIFYs the listener did not receive; an error when a point failed or
// is missing.
func notifyMetrics(r *Result, prefix string, s *raw.NotifySeries) (lost int64, err error) {
	for _, p := range s.Points {
		if p.Error != "" {
			return 0, fmt.Errorf("%s ×%d: %s", p.Mode, p.Committers, p.Error)
		}
		r.Metrics[NotifyKey(prefix, MetricNotifyTPSOf, p.Mode, p.Committers)] = p.TPS
		r.Metrics[NotifyKey(prefix, MetricNotifyP99MSOf, p.Mode, p.Committers)] = p.P99Ms
		if p.Mode != raw.NotifyNone {
			r.Metrics[NotifyKey(prefix, MetricNotifySentOf, p.Mode, p.Committers)] = float64(p.Sent)
			r.Metrics[NotifyKey(prefix, MetricNotifyReceivedOf, p.Mode, p.Committers)] = float64(p.Received)
			lost += max(p.Sent-p.Received, 0)
		}
	}
	for _, mode := range []string{raw.NotifyNone, raw.NotifyInTx, raw.NotifyDebounced} {
		for _, c := range raw.NotifyCommitters {
			if _, ok := s.Find(mode, c); !ok {
				return 0, errors.New("the series lacks a point")
			}
		}
	}
	n := raw.NotifyCommitters[len(raw.NotifyCommitters)-1]
	pn, _ := s.Find(raw.NotifyNone, n)
	pi, _ := s.Find(raw.NotifyInTx, n)
	pd, _ := s.Find(raw.NotifyDebounced, n)
	r.Metrics[SidePrefix(prefix).Of(MetricInTxOverNoneAt16)] = pi.TPS / pn.TPS
	r.Metrics[SidePrefix(prefix).Of(MetricDebouncedOverNoneAt16)] = pd.TPS / pn.TPS
	return lost, nil
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

// NotifyKey is the key of figure fig (MetricNotifyTPSOf, ...) of the
// series whose metrics start with prefix ("" for the shared server's,
// "18." for a private server's) in mode with committers committers:
// "tps_in_tx_16".
func NotifyKey(prefix string, fig driver.MetricPrefix, mode string, committers int) driver.Metric {
	return driver.MetricPrefix(prefix + string(fig)).Of(mode + "_" + strconv.Itoa(committers))
}
