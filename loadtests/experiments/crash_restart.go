package experiments

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"
)

// restartSides are the Postgres sides restarted under load, in the
// table's order.
var restartSides = []string{"no-rabbitmq", "no-kafka", "no-mongodb", "no-kurrentdb"}

// restartBackendTimeout is the BACKEND_TIMEOUT the services run with in
// postgres-restart-under-load: a failed request must answer within it.
const restartBackendTimeout = 2 * time.Second

// postgresRestartUnderLoad is issue 14's item 6: every Postgres side
// under a light open load of single writes, one private Postgres
// stopped immediately and started 2 s later.
func postgresRestartUnderLoad() Experiment {
	return Experiment{Name: "postgres-restart-under-load", Run: runPostgresRestart}
}

func runPostgresRestart(ctx context.Context, env Env, size Size) (Result, error) {
	began := time.Now()
	rate, pre, post := 20.0, 2*time.Second, 5*time.Second
	if size == Full {
		rate, pre, post = 100, 4*time.Second, 8*time.Second
	}
	const outage = 2 * time.Second
	rig, err := newCrashRig(ctx, env, nil)
	if err != nil {
		return Result{}, err
	}
	defer rig.Close()
	if err := rig.l.Build(ctx, restartSides...); err != nil {
		return Result{}, err
	}
	bases := map[string]string{}
	for _, name := range restartSides {
		b, err := rig.start(ctx, name, map[string]string{"BACKEND_TIMEOUT": restartBackendTimeout.String()})
		if err != nil {
			return Result{}, err
		}
		bases[name] = b
	}
	rig.logf("4 services up on %s; load %.0f/s each", rig.cluster.URL(), rate)

	lctx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	shots := map[string][]shot{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, name := range restartSides {
		wg.Add(1)
		go func(name string) {
			defer wg.Done()
			s := openLoad(lctx, bases[name], pgSides[name], rate)
			mu.Lock()
			shots[name] = s
			mu.Unlock()
		}(name)
	}
	time.Sleep(pre)
	stopAt := time.Now()
	if err := rig.cluster.Stop(ctx, "immediate"); err != nil {
		stopLoad()
		wg.Wait()
		return Result{}, err
	}
	time.Sleep(outage)
	if err := rig.cluster.Start(ctx); err != nil {
		stopLoad()
		wg.Wait()
		return Result{}, err
	}
	upAt := time.Now()
	rig.logf("postgres stopped (immediate) and started again after %s", outage)
	time.Sleep(post)
	stopLoad()
	wg.Wait()

	res := Result{
		Name:     "postgres-restart-under-load",
		Title:    "Postgres restart under load",
		Happens:  "While Postgres is down every Postgres side answers 503 within its BACKEND_TIMEOUT, and it recovers by itself once Postgres accepts connections again; nothing it acknowledged is lost.",
		UserMust: "Retry on 503 (with backoff); keep BACKEND_TIMEOUT and DATABASE_CONNECT_TIMEOUT short so that clients fail fast; run a standby for outages longer than a restart.",
		Metrics:  map[string]float64{"outage_s": outage.Seconds(), "rate_per_side": rate, "backend_timeout_ms": crashMS(restartBackendTimeout)},
	}
	var figs, notes []string
	var totalLost int64
	for _, name := range restartSides {
		side := pgSides[name]
		ss := shots[name]
		var failed, not503 int
		var maxFail time.Duration
		var recover time.Duration = -1
		for _, s := range ss {
			ok := s.err == nil && s.code == side.okCode
			if !ok {
				failed++
				if s.code != 503 {
					not503++
				}
				if s.lat > maxFail {
					maxFail = s.lat
				}
				continue
			}
			if recover < 0 && !s.sent.Before(upAt) {
				recover = s.end().Sub(upAt)
			}
		}
		ids := acked(ss, side)
		lost, err := crashCountMissing(ctx, bases[name], side, ids)
		if err != nil {
			return Result{}, fmt.Errorf("%s: count acknowledged writes: %w", name, err)
		}
		totalLost += lost
		p := strings.ReplaceAll(name, "-", "_") + "_"
		res.Metrics[p+"sent"] = float64(len(ss))
		res.Metrics[p+"acked"] = float64(len(ids))
		res.Metrics[p+"failed"] = float64(failed)
		res.Metrics[p+"failed_not_503"] = float64(not503)
		res.Metrics[p+"max_failed_latency_ms"] = crashMS(maxFail)
		res.Metrics[p+"recover_s"] = recover.Seconds()
		res.Metrics[p+"acked_lost"] = float64(lost)
		rec := "did not recover"
		if recover >= 0 {
			rec = fmt.Sprintf("recovered in %.2f s", recover.Seconds())
		}
		failures := "0 failed" // a slowest of no failures is no figure, never "0 ms"
		if failed > 0 {
			failures = fmt.Sprintf("%d failed (%d not 503), slowest %.0f ms", failed, not503, crashMS(maxFail))
		}
		figs = append(figs, fmt.Sprintf("%s: %s; %s; %d of %d acknowledged lost", name, failures, rec, lost, len(ids)))
		notes = append(notes, fmt.Sprintf("%s: answers other than %d: %s", name, side.okCode, codeCounts(ss, side)))
		rig.logf("%s", figs[len(figs)-1])
	}
	res.Figure = fmt.Sprintf("Postgres down %.1f s (immediate stop under load), BACKEND_TIMEOUT %s: %s. Recovery is counted from Postgres accepting connections.",
		upAt.Sub(stopAt).Seconds(), restartBackendTimeout, strings.Join(figs, "; "))
	res.AckedLost = totalLost
	res.Notes = crashNotes(rig.cluster, append(notes, fmt.Sprintf("open load of single writes, %.0f/s per service, all four services at once on one private cluster", rate))...)
	res.DurationS = time.Since(began).Seconds()
	return res, nil
}
