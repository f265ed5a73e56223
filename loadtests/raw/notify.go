package raw

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pglisten"
)

// NOTIFY modes, the Mode of a NotifyPoint.
const (
	// NotifyNone is a one-row INSERT committed alone (autocommit): the
	// baseline.
	NotifyNone = "insert_commit"
	// NotifyInTx is the same INSERT with pg_notify in its transaction
	// (one statement, so the round trips are the baseline's): what
	// NOTIFY_MODE=commit does.
	NotifyInTx = "notify_in_tx"
	// NotifyDebounced commits like NotifyNone and pokes a
	// pglisten.Debouncer after each commit, which sends at most one NOTIFY
	// per pglisten.DefaultInterval in a transaction of its own: what
	// NOTIFY_MODE=debounced does.
	NotifyDebounced = "notify_debounced"
)

// NotifyModes are the modes in the order they are reported (and run, at
// each concurrency).
var NotifyModes = []string{NotifyNone, NotifyInTx, NotifyDebounced}

// NotifyCommitters are the concurrent committers of each mode's points.
var NotifyCommitters = []int{1, 2, 4, 8, 16}

// NotifyPoint is one mode at one concurrency.
type NotifyPoint struct {
	// Mode is NotifyNone, NotifyInTx or NotifyDebounced; Committers the
	// concurrent committing connections.
	Mode       string `json:"mode"`
	Committers int    `json:"committers"`
	// Commits counts committed transactions in Seconds; TPS is their
	// rate.
	Commits int64   `json:"commits"`
	Seconds float64 `json:"seconds"`
	TPS     float64 `json:"tps"`
	// P50Ms and P99Ms are the committing statement's latency (sent to
	// committed, one round trip), from an HdrHistogram.
	P50Ms float64 `json:"p50_ms"`
	P99Ms float64 `json:"p99_ms"`
	// Sent counts the NOTIFYs committed (one per commit in NotifyInTx,
	// the Debouncer's in NotifyDebounced); Received the notifications
	// one LISTENing connection got for them.
	Sent     int64 `json:"sent"`
	Received int64 `json:"received"`
	// Error is set when the point could not run.
	Error string `json:"error,omitempty"`
}

// NotifySeries is the NOTIFY measurement: every mode at every
// concurrency, on one scratch table, with one listener.
type NotifySeries struct {
	// Desc said how the series ran, in files of schema 1 (docs/loadtests.md
	// says it now).
	Desc string `json:"desc,omitempty"`
	// PointSeconds is each point's duration; IntervalMs the Debouncer's
	// interval.
	PointSeconds float64 `json:"point_s"`
	IntervalMs   float64 `json:"interval_ms"`
	// ServerVersion is the measured server's server_version.
	ServerVersion string        `json:"server_version"`
	Points        []NotifyPoint `json:"points"`
	// Error is set when the series could not run at all.
	Error string `json:"error,omitempty"`
}

// Find returns the point of mode at n committers, if measured.
func (s *NotifySeries) Find(mode string, n int) (NotifyPoint, bool) {
	if s == nil {
		return NotifyPoint{}, false
	}
	for _, p := range s.Points {
		if p.Mode == mode && p.Committers == n && p.Error == "" && p.TPS > 0 {
			return p, true
		}
	}
	return NotifyPoint{}, false
}

// statementTimeout bounds each committing statement.
const statementTimeout = 10 * time.Second

// notifyPoint is each point's duration: half a loop's, 1.5 s at the
// default 3 s.
func (o Options) notifyPoint() time.Duration { return o.Duration / 2 }

// notifyEstimate is the series' expected wall time.
func notifyEstimate(o Options) time.Duration {
	return time.Duration(len(NotifyModes)*len(NotifyCommitters))*(o.notifyPoint()+300*time.Millisecond) + 3*time.Second
}

// MeasureNotify runs the NOTIFY series alone (Measure runs it after the
// loops): every mode at every count of NotifyCommitters, each point
// o.Duration/2, on a scratch schema named after o.Name. The experiments'
// notify-serializes-commits reuses it.
func MeasureNotify(ctx context.Context, o Options) *NotifySeries { return measureNotify(ctx, o) }

// measureNotify runs the NOTIFY series: for each count of committers and
// each mode, o.notifyPoint() of one-row commits on a logged scratch
// table, while one connection LISTENs on the channel notified.
func measureNotify(ctx context.Context, o Options) *NotifySeries {
	s := &NotifySeries{PointSeconds: o.notifyPoint().Seconds(), IntervalMs: float64(pglisten.DefaultInterval) / float64(time.Millisecond)}
	wide := o
	wide.Conns = NotifyCommitters[len(NotifyCommitters)-1] + 1 // the committers and the Debouncer
	channel := "wpe_raw_" + o.Name + "_notify"
	err := withSchema(ctx, wide, []string{logTable}, func(pool *pgxpool.Pool) error {
		if err := pool.QueryRow(ctx, "SHOW server_version").Scan(&s.ServerVersion); err != nil {
			return err
		}
		l, err := Listen(ctx, o.PostgresURL, channel)
		if err != nil {
			return fmt.Errorf("listener: %w", err)
		}
		defer l.Close()
		// Modes alternate at each concurrency, so that drift (a growing
		// table, a neighbour's load) touches the three alike.
		for _, n := range NotifyCommitters {
			for _, mode := range NotifyModes {
				if err := ctx.Err(); err != nil {
					return err
				}
				p, err := notifyPoint(ctx, pool, l, channel, notifyCase{mode: mode, committers: n, d: o.notifyPoint()})
				if err != nil {
					p.Error = err.Error()
					o.logf("raw postgres notify %s ×%d: %s", mode, n, err)
				} else {
					o.logf("raw postgres notify %s ×%d: %.0f tps, p99 %.2f ms, %d sent, %d received", mode, n, p.TPS, p.P99Ms, p.Sent, p.Received)
				}
				s.Points = append(s.Points, p)
			}
		}
		return nil
	})
	if err != nil {
		s.Error = err.Error()
		o.logf("raw postgres notify: %s", err)
	}
	return s
}

// notifyCase is one point of the notify series: its mode, how many
// committers and for how long.
type notifyCase struct {
	mode       string
	committers int
	d          time.Duration
}

// notifyPoint runs nc's committers in its mode for its duration,
// notifying channel (l listens on it), and returns the point.
func notifyPoint(ctx context.Context, pool *pgxpool.Pool, l *Listener, channel string, nc notifyCase) (NotifyPoint, error) {
	mode, n, d := nc.mode, nc.committers, nc.d
	p := NotifyPoint{Mode: mode, Committers: n}
	conns := make([]*pgxpool.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	for range n {
		c, err := pool.Acquire(ctx)
		if err != nil {
			return p, err
		}
		conns = append(conns, c)
	}
	var deb *pglisten.Debouncer
	if mode == NotifyDebounced {
		deb = &pglisten.Debouncer{DB: pool, Channel: channel}
	}
	stmt := `INSERT INTO t (payload) VALUES ($1)`
	if mode == NotifyInTx {
		stmt = `WITH i AS (INSERT INTO t (payload) VALUES ($1)) SELECT pg_notify($2, '')`
	}
	received := l.count.Load()
	hists, commits, el, first := runCommitters(ctx, conns, commitStmt{mode: mode, stmt: stmt, channel: channel, deb: deb}, d)
	if deb != nil {
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		_ = deb.Close(cctx)
		ccancel()
		p.Sent = deb.Sent()
	} else if mode == NotifyInTx {
		p.Sent = commits
	}
	if first != nil {
		return p, first
	}
	all := hdrhistogram.New(1, int64(time.Minute/time.Microsecond), 3)
	for _, h := range hists {
		all.Merge(h)
	}
	p.Commits, p.Seconds = commits, math.Round(el.Seconds()*1000)/1000
	if el > 0 {
		p.TPS = math.Round(float64(p.Commits)/el.Seconds()*10) / 10
	}
	p.P50Ms = float64(all.ValueAtQuantile(50)) / 1000
	p.P99Ms = float64(all.ValueAtQuantile(99)) / 1000
	p.Received = l.settle(ctx, received, p.Sent) - received
	return p, nil
}

// commitStmt is what each commit of a notify point runs: stmt, in mode
// (NotifyInTx passes channel to it), then a poke of deb when set.
type commitStmt struct {
	mode, stmt, channel string
	deb                 *pglisten.Debouncer
}

// runCommitters has each of conns commit cs.stmt in a loop for d (poking
// cs.deb after each commit when set) and returns each one's commit
// latencies, the commits, the time taken and the errors met. Committers
// stop starting statements at the deadline and finish the one in flight,
// so no connection is cut and every commit counts.
func runCommitters(ctx context.Context, conns []*pgxpool.Conn, cs commitStmt, d time.Duration) ([]*hdrhistogram.Histogram, int64, time.Duration, error) {
	mode, stmt, channel, deb := cs.mode, cs.stmt, cs.channel, cs.deb
	n := len(conns)
	hists := make([]*hdrhistogram.Histogram, n)
	var stop atomic.Bool
	var commits atomic.Int64
	for i := range hists {
		hists[i] = hdrhistogram.New(1, int64(time.Minute/time.Microsecond), 3)
	}
	start := time.Now()
	end := start.Add(d)
	first := concurrently(n, func(i int) error {
		c, h := conns[i], hists[i]
		for !stop.Load() && time.Now().Before(end) {
			t0 := time.Now()
			sctx, cancel := context.WithTimeout(ctx, statementTimeout)
			var err error
			if mode == NotifyInTx {
				_, err = c.Exec(sctx, stmt, payload, channel)
			} else {
				_, err = c.Exec(sctx, stmt, payload)
			}
			cancel()
			if err != nil {
				stop.Store(true)
				return err
			}
			_ = h.RecordValue(time.Since(t0).Microseconds())
			commits.Add(1)
			if deb != nil {
				deb.Poke()
			}
		}
		return nil
	})
	return hists, commits.Load(), time.Since(start), first
}

// Listener is one connection LISTENing on a channel, counting the
// notifications on that channel it receives.
type Listener struct {
	conn   *pgx.Conn
	count  atomic.Int64
	cancel context.CancelFunc
	done   chan struct{}
}

// Listen connects to url and LISTENs on channel until Close.
func Listen(ctx context.Context, url, channel string) (*Listener, error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	cfg.ConnectTimeout = 5 * time.Second
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	lctx, lcancel := context.WithTimeout(ctx, 10*time.Second)
	_, err = conn.Exec(lctx, "LISTEN "+pgx.Identifier{channel}.Sanitize())
	lcancel()
	if err != nil {
		_ = conn.Close(context.Background())
		return nil, err
	}
	wctx, cancel := context.WithCancel(context.Background())
	l := &Listener{conn: conn, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		for {
			n, err := conn.WaitForNotification(wctx)
			if err != nil {
				return
			}
			// A connection behind a pooler may hear other clients'
			// channels.
			if n.Channel == channel {
				l.count.Add(1)
			}
		}
	}()
	return l, nil
}

// Count is how many notifications the listener has received.
func (l *Listener) Count() int64 { return l.count.Load() }

// settle waits until the listener has received want notifications since
// from, or until the count stops growing for 300 ms (at most 5 s), and
// returns its count.
func (l *Listener) settle(ctx context.Context, from, want int64) int64 {
	deadline := time.Now().Add(5 * time.Second)
	last, still := l.count.Load(), time.Now()
	for time.Now().Before(deadline) && ctx.Err() == nil {
		c := l.count.Load()
		if c-from >= want {
			return c
		}
		if c != last {
			last, still = c, time.Now()
		} else if time.Since(still) > 300*time.Millisecond {
			return c
		}
		time.Sleep(10 * time.Millisecond)
	}
	return l.count.Load()
}

// Close stops the listener and closes its connection.
func (l *Listener) Close() {
	l.cancel()
	<-l.done
	cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = l.conn.Close(cctx)
}
