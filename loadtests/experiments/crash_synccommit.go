package experiments

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// synchronousCommitOffCrash is issue 14's item 5: no-kafka's single
// appends under load, Postgres stopped immediately mid-load, then the
// events answered 201 counted against those still there, with
// SYNCHRONOUS_COMMIT off and on.
func synchronousCommitOffCrash() Experiment {
	return Experiment{Name: "synchronous-commit-off-crash", Run: runSyncCommitCrash, Text: syncCommitText}
}

// syncCommitText is synchronous-commit-off-crash's prose.
var syncCommitText = Text{
	Title:    "synchronous_commit=off loses acknowledged writes on a crash",
	Happens:  "With SYNCHRONOUS_COMMIT=off a 201 is answered before the commit's WAL is flushed: an immediate shutdown (a crash) loses the events of the last few hundred milliseconds although the client was told they were written.",
	UserMust: "Keep synchronous_commit on wherever a 201 must mean durable; use off only for data the client can resend, and count on losing up to 3 × wal_writer_delay of acknowledged writes on a crash.",
	Figure: func(f *Figures) string {
		return fmt.Sprintf("no-kafka, %d writers of single appends, Postgres stopped immediately after %s: off lost %d of %d events answered 201 (p50 answer %.1f ms); on lost %d of %d (p50 %.1f ms).",
			f.Int(MetricWriters), secondsDur(f.Num(MetricLoadSeconds)), f.Int(syncCommitPrefix("off").Of(MetricAckedLost)), f.Int(syncCommitPrefix("off").Of(MetricAcked)), f.Num(syncCommitPrefix("off").Of(MetricP50MS)),
			f.Int(syncCommitPrefix("on").Of(MetricAckedLost)), f.Int(syncCommitPrefix("on").Of(MetricAcked)), f.Num(syncCommitPrefix("on").Of(MetricP50MS)))
	},
	Notes: func(f *Figures) []string {
		return crashNotes(f,
			"the loss with off depends on wal_writer_delay (200 ms by default) and on the write rate; with on it must be 0 (AckedLost counts both; a loss with on is not documented)",
			"an immediate stop kills the server processes; WAL already written to the OS survives, so this is the loss of a Postgres crash, not of a power loss (which could lose more with off)")
	},
}

// syncCrashRound is one setting's crash.
type syncCrashRound struct {
	acked, lost int64
	p50         time.Duration
}

func runSyncCommitCrash(ctx context.Context, env Env, size Size) (Result, error) {
	began := time.Now()
	workers, load := 8, 2*time.Second
	if size == Full {
		workers, load = 16, 5*time.Second
	}
	rig, err := newCrashRig(ctx, env, nil)
	if err != nil {
		return Result{}, err
	}
	defer rig.Close()
	res := Result{Name: "synchronous-commit-off-crash", Metrics: map[driver.Metric]float64{MetricWriters: float64(workers), MetricLoadSeconds: load.Seconds()}}
	for _, setting := range []string{"off", "on"} {
		r, err := syncCrashRun(ctx, rig, setting, workers, load)
		if err != nil {
			return Result{}, err
		}
		res.Metrics[syncCommitPrefix(setting).Of(MetricAcked)] = float64(r.acked)
		res.Metrics[syncCommitPrefix(setting).Of(MetricAckedLost)] = float64(r.lost)
		res.Metrics[syncCommitPrefix(setting).Of(MetricP50MS)] = crashMS(r.p50)
		res.AckedLost += r.lost
		// The loss with off is the documented one; any with on is not.
		if setting == "on" {
			res.LossDocumented = r.lost == 0
		}
	}
	crashSettings(&res, rig.cluster)
	res.DurationS = time.Since(began).Seconds()
	return res, nil
}

// syncCrashRun is one setting's round: no-kafka with SYNCHRONOUS_COMMIT
// setting under workers closed loops of single appends, Postgres stopped
// immediately after load, then the events answered 201 counted against
// those still there.
func syncCrashRun(ctx context.Context, rig *crashRig, setting string, workers int, load time.Duration) (syncCrashRound, error) {
	side := pgSides[pairs.NoKafka]
	base, err := rig.start(ctx, side.name, map[string]string{"SYNCHRONOUS_COMMIT": setting})
	if err != nil {
		return syncCrashRound{}, err
	}
	lctx, stopLoad := context.WithCancel(ctx)
	done := make(chan []shot, 1)
	go func() { done <- closedLoad(lctx, base, side, workers) }()
	time.Sleep(load)
	err = rig.cluster.Stop(ctx, "immediate")
	// Keep writing a moment into the outage: the requests in flight
	// at the crash are answered (with an error) before the count.
	time.Sleep(300 * time.Millisecond)
	stopLoad()
	shots := <-done
	if err != nil {
		return syncCrashRound{}, err
	}
	if err := rig.cluster.Start(ctx); err != nil {
		return syncCrashRound{}, err
	}
	if err := crashWaitReady(ctx, base, 30*time.Second); err != nil {
		return syncCrashRound{}, err
	}
	ids := acked(shots, side)
	var lost int64
	if err := rig.cluster.QueryRow(ctx, `SELECT count(*) FROM unnest($1::uuid[]) AS a(id) WHERE NOT EXISTS (SELECT 1 FROM log.messages m WHERE m.id = a.id)`, []any{ids}, &lost); err != nil {
		return syncCrashRound{}, err
	}
	var lats []time.Duration
	for _, s := range shots {
		if s.err == nil && s.code == side.okCode {
			lats = append(lats, s.lat)
		}
	}
	sort.Slice(lats, func(a, b int) bool { return lats[a] < lats[b] })
	r := syncCrashRound{acked: int64(len(ids)), lost: lost}
	if len(lats) > 0 {
		r.p50 = lats[len(lats)/2]
	}
	rig.logf("SYNCHRONOUS_COMMIT=%s: %d acknowledged, %d missing after the crash, p50 %s", setting, r.acked, r.lost, r.p50)
	return r, rig.stop(side.name)
}

// syncCommitPrefix starts the figures of the run with synchronous_commit
// = setting ("off_acked").
func syncCommitPrefix(setting string) SidePrefix { return SidePrefix(setting + "_") }
