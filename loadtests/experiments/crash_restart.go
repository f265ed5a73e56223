package experiments

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// restartSides are the Postgres sides restarted under load, in the
// table's order.
var restartSides = []string{pairs.NoRabbitMQ, pairs.NoKafka, pairs.NoMongoDB, pairs.NoKurrentDB}

// restartBackendTimeout is the BACKEND_TIMEOUT the services run with in
// postgres-restart-under-load: a failed request must answer within it.
const restartBackendTimeout = 2 * time.Second

// postgresRestartUnderLoad is issue 14's item 6: every Postgres side
// under a light open load of single writes, one private Postgres
// stopped immediately and started 2 s later.
func postgresRestartUnderLoad() Experiment {
	return Experiment{Name: "postgres-restart-under-load", Run: runPostgresRestart, Text: restartText}
}

// restartText is postgres-restart-under-load's prose.
var restartText = Text{
	Title:    "Postgres restart under load",
	Happens:  "While Postgres is down every Postgres side answers 503 within its BACKEND_TIMEOUT, and it recovers by itself once Postgres accepts connections again; nothing it acknowledged is lost.",
	UserMust: "Retry on 503 (with backoff); keep BACKEND_TIMEOUT and DATABASE_CONNECT_TIMEOUT short so that clients fail fast; run a standby for outages longer than a restart.",
	Figure: func(f *Figures) string {
		var figs []string
		for _, name := range restartSides {
			p := restartPrefix(name)
			rec := "did not recover"
			if r := f.Num(p.Of(MetricRecoverSeconds)); r >= 0 {
				rec = fmt.Sprintf("recovered in %.2f s", r)
			}
			failures := "0 failed" // a slowest of no failures is no figure, never "0 ms"
			if failed := f.Int(p.Of(MetricFailed)); failed > 0 {
				failures = fmt.Sprintf("%d failed (%d not 503), slowest %.0f ms", failed, f.Int(p.Of(MetricFailedNot503)), f.Num(p.Of(MetricMaxFailedLatencyMS)))
			}
			figs = append(figs, fmt.Sprintf("%s: %s; %s; %d of %d acknowledged lost", name, failures, rec, f.Int(p.Of(MetricAckedLost)), f.Int(p.Of(MetricAcked))))
		}
		return fmt.Sprintf("Postgres down %.1f s (immediate stop under load), BACKEND_TIMEOUT %s: %s. Recovery is counted from Postgres accepting connections.",
			f.Num(MetricDownSeconds), msDur(f.Num(MetricBackendTimeoutMS)), strings.Join(figs, "; "))
	},
	Notes: func(f *Figures) []string {
		var notes []string
		for _, name := range restartSides {
			notes = append(notes, fmt.Sprintf("%s: answers other than %d: %s", name, pgSides[name].okCode, f.Str(string(restartPrefix(name))+"answers")))
		}
		notes = append(notes, fmt.Sprintf("open load of single writes, %.0f/s per service, all four services at once on one private cluster", f.Num(MetricRatePerSide)))
		return crashNotes(f, notes...)
	},
}

// restartPrefix starts the metrics of side name.
func restartPrefix(name string) SidePrefix {
	return SidePrefix(strings.ReplaceAll(name, "-", "_") + "_")
}

func runPostgresRestart(ctx context.Context, env Env, size Size) (Result, error) {
	began := time.Now()
	load := restartLoad{rate: 20, pre: 2 * time.Second, post: 5 * time.Second}
	if size == Full {
		load = restartLoad{rate: 100, pre: 4 * time.Second, post: 8 * time.Second}
	}
	rig, err := newCrashRig(ctx, env, nil)
	if err != nil {
		return Result{}, err
	}
	defer rig.Close()
	bases, err := restartStartSides(ctx, rig)
	if err != nil {
		return Result{}, err
	}
	rig.logf("4 services up on %s; load %.0f/s each", rig.cluster.URL(), load.rate)
	seen, err := restartUnderLoad(ctx, rig, bases, load)
	if err != nil {
		return Result{}, err
	}
	res := Result{
		Name: "postgres-restart-under-load",
		Metrics: map[driver.Metric]float64{MetricOutageSeconds: restartOutage.Seconds(), MetricRatePerSide: load.rate, MetricBackendTimeoutMS: crashMS(restartBackendTimeout),
			MetricDownSeconds: seen.down.Seconds()},
	}
	for _, name := range restartSides {
		lost, err := restartSideFigures(ctx, &res, name, bases[name], seen)
		if err != nil {
			return Result{}, err
		}
		res.AckedLost += lost
	}
	crashSettings(&res, rig.cluster)
	res.DurationS = time.Since(began).Seconds()
	return res, nil
}

// restartOutage is how long Postgres stays down.
const restartOutage = 2 * time.Second

// restartStartSides builds and starts every side of restartSides against
// rig's cluster and returns their base URLs by name.
func restartStartSides(ctx context.Context, rig *crashRig) (map[string]string, error) {
	if err := rig.l.Build(ctx, restartSides...); err != nil {
		return nil, err
	}
	bases := map[string]string{}
	for _, name := range restartSides {
		b, err := rig.start(ctx, name, map[string]string{"BACKEND_TIMEOUT": restartBackendTimeout.String()})
		if err != nil {
			return nil, err
		}
		bases[name] = b
	}
	return bases, nil
}

// restartLoad is an open load across a Postgres restart: rate requests
// per second (on each side), for pre before the stop and post after
// Postgres is back.
type restartLoad struct {
	// rate is the requests per second on each side.
	rate float64
	// pre is how long the load runs before Postgres stops, post how long
	// after it is back.
	pre, post time.Duration
}

// restartShots is what a load across a Postgres restart saw: each
// side's shots by name, how long Postgres was down and when it was back.
type restartShots struct {
	// shots are each side's requests and answers, by side name.
	shots map[string][]shot
	// down is from the stop until Postgres was back, upAt when it was.
	down time.Duration
	upAt time.Time
}

// restartUnderLoad runs load on every side (bases by name), stops
// Postgres immediately after load.pre, starts it restartOutage later and
// loads load.post more; it returns what the load saw.
func restartUnderLoad(ctx context.Context, rig *crashRig, bases map[string]string, load restartLoad) (restartShots, error) {
	rate, pre, post := load.rate, load.pre, load.post
	lctx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	shots := map[string][]shot{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, name := range restartSides {
		wg.Go(func() {
			s := openLoad(lctx, bases[name], pgSides[name], rate)
			mu.Lock()
			shots[name] = s
			mu.Unlock()
		})
	}
	fail := func(err error) (restartShots, error) {
		stopLoad()
		wg.Wait()
		return restartShots{}, err
	}
	time.Sleep(pre)
	stopAt := time.Now()
	if err := rig.cluster.Stop(ctx, "immediate"); err != nil {
		return fail(err)
	}
	time.Sleep(restartOutage)
	if err := rig.cluster.Start(ctx); err != nil {
		return fail(err)
	}
	upAt := time.Now()
	rig.logf("postgres stopped (immediate) and started again after %s", restartOutage)
	time.Sleep(post)
	stopLoad()
	wg.Wait()
	return restartShots{shots: shots, down: upAt.Sub(stopAt), upAt: upAt}, nil
}

// restartSideFigures records side name's figures (its service at base)
// from its shots of seen in res and returns its acknowledged writes
// lost.
func restartSideFigures(ctx context.Context, res *Result, name, base string, seen restartShots) (int64, error) {
	ss := seen.shots[name]
	side := pgSides[name]
	fails := countFailures(ss, side, seen.upAt)
	ids := acked(ss, side)
	lost, err := crashCountMissing(ctx, base, side, ids)
	if err != nil {
		return 0, fmt.Errorf("%s: count acknowledged writes: %w", name, err)
	}
	p := restartPrefix(name)
	res.Metrics[p.Of(MetricSent)] = float64(len(ss))
	res.Metrics[p.Of(MetricAcked)] = float64(len(ids))
	res.Metrics[p.Of(MetricFailed)] = float64(fails.failed)
	res.Metrics[p.Of(MetricFailedNot503)] = float64(fails.not503)
	res.Metrics[p.Of(MetricMaxFailedLatencyMS)] = crashMS(fails.slowest)
	// -1, not -0: never recovered must read as below 0.
	res.Metrics[p.Of(MetricRecoverSeconds)] = -1
	if fails.recover >= 0 {
		res.Metrics[p.Of(MetricRecoverSeconds)] = fails.recover.Seconds()
	}
	res.Metrics[p.Of(MetricAckedLost)] = float64(lost)
	res.setting(string(p)+"answers", codeCounts(ss, side))
	return lost, nil
}
