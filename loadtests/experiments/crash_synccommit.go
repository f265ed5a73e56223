package experiments

import (
	"context"
	"fmt"
	"sort"
	"time"
)

// synchronousCommitOffCrash is issue 14's item 5: no-kafka's single
// appends under load, Postgres stopped immediately mid-load, then the
// events answered 201 counted against those still there, with
// SYNCHRONOUS_COMMIT off and on.
func synchronousCommitOffCrash() Experiment {
	return Experiment{Name: "synchronous-commit-off-crash", Run: runSyncCommitCrash}
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
	side := pgSides["no-kafka"]
	rounds := map[string]syncCrashRound{}
	for _, setting := range []string{"off", "on"} {
		base, err := rig.start(ctx, side.name, map[string]string{"SYNCHRONOUS_COMMIT": setting})
		if err != nil {
			return Result{}, err
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
			return Result{}, err
		}
		if err := rig.cluster.Start(ctx); err != nil {
			return Result{}, err
		}
		if err := crashWaitReady(ctx, base, 30*time.Second); err != nil {
			return Result{}, err
		}
		ids := acked(shots, side)
		var lost int64
		err = rig.cluster.QueryRow(ctx, `SELECT count(*) FROM unnest($1::uuid[]) AS a(id) WHERE NOT EXISTS (SELECT 1 FROM log.messages m WHERE m.id = a.id)`, []any{ids}, &lost)
		if err != nil {
			return Result{}, err
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
		rounds[setting] = r
		rig.logf("SYNCHRONOUS_COMMIT=%s: %d acknowledged, %d missing after the crash, p50 %s", setting, r.acked, r.lost, r.p50)
		if err := rig.stop(side.name); err != nil {
			return Result{}, err
		}
	}
	off, on := rounds["off"], rounds["on"]
	return Result{
		Name:    "synchronous-commit-off-crash",
		Title:   "synchronous_commit=off loses acknowledged writes on a crash",
		Happens: "With SYNCHRONOUS_COMMIT=off a 201 is answered before the commit's WAL is flushed: an immediate shutdown (a crash) loses the events of the last few hundred milliseconds although the client was told they were written.",
		Figure: fmt.Sprintf("no-kafka, %d writers of single appends, Postgres stopped immediately after %s: off lost %d of %d events answered 201 (p50 answer %.1f ms); on lost %d of %d (p50 %.1f ms).",
			workers, load, off.lost, off.acked, crashMS(off.p50), on.lost, on.acked, crashMS(on.p50)),
		UserMust:  "Keep synchronous_commit on wherever a 201 must mean durable; use off only for data the client can resend, and count on losing up to 3 × wal_writer_delay of acknowledged writes on a crash.",
		AckedLost: off.lost + on.lost,
		// The loss with off is the documented one; any with on is not.
		LossDocumented: on.lost == 0,
		Metrics: map[string]float64{
			"off_acked": float64(off.acked), "off_acked_lost": float64(off.lost), "off_p50_ms": crashMS(off.p50),
			"on_acked": float64(on.acked), "on_acked_lost": float64(on.lost), "on_p50_ms": crashMS(on.p50),
			"writers": float64(workers), "load_s": load.Seconds(),
		},
		Notes: crashNotes(rig.cluster,
			"the loss with off depends on wal_writer_delay (200 ms by default) and on the write rate; with on it must be 0 (AckedLost counts both; a loss with on is not documented)",
			"an immediate stop kills the server processes; WAL already written to the OS survives, so this is the loss of a Postgres crash, not of a power loss (which could lose more with off)"),
		DurationS: time.Since(began).Seconds(),
	}, nil
}
