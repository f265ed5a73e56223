package experiments

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/cluster"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
)

// The cluster profile's Postgres failover experiments (issue 25, item 4):
// both Postgres sides, no-rabbitmq (the queue) and no-kafka (the log),
// run at once on the profile's multi-host URL under an open load while a
// standby is promoted; the old primary then rejoins as a standby.
const (
	// PGSwitchover promotes the synchronous standby by a clean switchover
	// (the primary stopped with pg_ctl stop -m fast).
	PGSwitchover = "pg-switchover"
	// PGFailoverSync kills the primary (kill -9) and promotes the
	// synchronous standby.
	PGFailoverSync = "pg-failover-sync"
	// PGFailoverAsync kills the primary and promotes the asynchronous
	// standby: what the asynchronous standby had not received is lost.
	PGFailoverAsync = "pg-failover-async"
)

// pgPromotion is how an experiment promotes: which standby (the
// asynchronous one, else the synchronous one) and whether the primary is
// killed (else stopped cleanly); or, with auto set, nobody: the fault
// (autoKill, autoCut, autoIsolate) hits the primary of the
// pg_auto_failover formation and its monitor promotes.
type pgPromotion struct {
	name        string
	async, kill bool
	auto        string
}

// load is p's load at size: the rate of single writes per side, how
// long it runs before the fault and after the promotion (an automatic
// failover's: after the fault, pgAutoAfter).
func (p pgPromotion) load(size Size) (rate float64, before, after time.Duration) {
	rate, before, after = pgFailoverLoad(size)
	if p.auto != "" {
		after = pgAutoAfter(size)
	}
	return rate, before, after
}

// pgFailoverExperiments are the Postgres failover experiments (in
// Cluster, not All).
func pgFailoverExperiments() []Experiment {
	// Full: the two services start (about 5 s), 10 s of load before the
	// promotion (on 17+ until the promoted standby holds a persistent copy
	// of the log's failover slot: 0-30 s here, 3 min at most), the
	// promotion (4-8 s; 11-12 s for the asynchronous standby, cut off 5 s
	// first), 15 s of load after, the rejoin (3-10 s) and the settle:
	// about a minute for the sync ones; the async one waits the whole 2
	// minutes for what it lost.
	return append([]Experiment{
		{Name: PGSwitchover, Full: 90 * time.Second, Text: pgSwitchoverText, Run: pgFailoverRun(pgPromotion{name: PGSwitchover})},
		{Name: PGFailoverSync, Full: 90 * time.Second, Text: pgFailoverSyncText, Run: pgFailoverRun(pgPromotion{name: PGFailoverSync, kill: true})},
		{Name: PGFailoverAsync, Full: 210 * time.Second, Text: pgFailoverAsyncText, Run: pgFailoverRun(pgPromotion{name: PGFailoverAsync, async: true, kill: true})},
	}, pgAutoExperiments()...)
}

func pgFailoverRun(p pgPromotion) func(ctx context.Context, env Env, size Size) (Result, error) {
	return func(ctx context.Context, env Env, size Size) (Result, error) { return runPGFailover(ctx, env, size, p) }
}

// pgFailoverLoad is a size's load: the rate of single writes per side,
// how long it runs before the promotion and after it.
func pgFailoverLoad(size Size) (rate float64, before, after time.Duration) {
	if size == Full {
		return 50, 10 * time.Second, 15 * time.Second
	}
	return 20, 5 * time.Second, 5 * time.Second
}

// pgProfile is the cluster profile's Postgres as these experiments use
// it: its multi-host URL and scripts/cluster.sh, which promotes and
// rejoins. Its nodes are shared: an experiment leaves the cluster whole.
type pgProfile struct {
	url, script string
	logf        func(string, ...any)
}

// openPGProfile checks that the profile's Postgres is there and usable
// (CLUSTER_DATABASE_URL set, root for the script), or says "not run" and
// why.
func openPGProfile(env Env, logf func(string, ...any)) (*pgProfile, error) {
	if env.ClusterDatabaseURL == "" {
		return nil, notRun(`CLUSTER_DATABASE_URL is not set: this experiment needs the cluster profile's Postgres (as root: bash scripts/cluster.sh up postgres, then eval "$(bash scripts/cluster.sh env running)")`)
	}
	if os.Geteuid() != 0 {
		return nil, notRun("promoting a standby (scripts/cluster.sh promote) needs root")
	}
	root, err := env.root()
	if err != nil {
		return nil, notRun("no repository root for scripts/cluster.sh: %v", err)
	}
	p := &pgProfile{url: env.ClusterDatabaseURL, script: filepath.Join(root, "scripts", "cluster.sh"), logf: logf}
	if _, err := os.Stat(p.script); err != nil {
		return nil, notRun("%v", err)
	}
	return p, nil
}

// run runs scripts/cluster.sh with args (6 minutes at most: a rejoin
// copies the primary) and returns how long it took.
func (p *pgProfile) run(ctx context.Context, args ...string) (time.Duration, error) {
	t0 := time.Now()
	_, err := runClusterScript(ctx, p.script, 6*time.Minute, args...)
	d := time.Since(t0)
	p.logf("cluster.sh %s (%.1f s)", strings.Join(args, " "), d.Seconds())
	return d, err
}

// roles waits (2 minutes at most) until the cluster is whole and says
// who is what.
func (p *pgProfile) roles(ctx context.Context) (cluster.Roles, error) {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		r, err := cluster.DiscoverRoles(ctx, p.url)
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			if err != nil {
				err = fmt.Errorf("the cluster is not whole (a primary, a sync and an async standby streaming): %w", err)
			}
			return r, err
		}
		sleep(ctx, time.Second)
	}
}

// whole waits (3 minutes at most) until `cluster.sh status postgres`
// exits 0: every node up and the roles as recorded.
func (p *pgProfile) whole(ctx context.Context) error {
	deadline := time.Now().Add(3 * time.Minute)
	for {
		_, err := runClusterScript(ctx, p.script, time.Minute, "status", "postgres")
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		sleep(ctx, 2*time.Second)
	}
}

// version is the primary's server_version and server_version_num.
func (p *pgProfile) version(ctx context.Context) (string, int, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, p.url)
	if err != nil {
		return "", 0, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var v string
	var num int
	err = conn.QueryRow(ctx, "SELECT current_setting('server_version'), current_setting('server_version_num')::int").Scan(&v, &num)
	return v, num, err
}

// pgTimes are the moments of one promotion: the script started (the
// fault: the primary stopped or killed at once), and returned.
type pgTimes struct {
	fault, promoted time.Time
}

// runPGFailover runs both sides on the cluster, promotes under their
// load, rejoins the old primary (whatever failed on the way) and counts.
func runPGFailover(ctx context.Context, env Env, size Size, p pgPromotion) (Result, error) {
	began := time.Now()
	res := Result{Name: p.name, Metrics: map[driver.Metric]float64{}}
	logf := env.prefixed(p.name)
	prof, err := openPGProfile(env, logf)
	if err != nil {
		return res, err
	}
	if err := checkFormation(env, p); err != nil {
		return res, err
	}
	r, target, err := pgRoles(ctx, prof, p)
	if err != nil {
		return res, err
	}
	version, num, err := prof.version(ctx)
	if err != nil {
		return res, err
	}
	res.setting("server_version", version)
	res.setting("old_primary", r.Primary)
	if p.auto == "" {
		res.setting("promoted", target)
		logf("PostgreSQL %s: primary %s, sync %s, async %s; promoting %s", version, r.Primary, r.Sync, r.Async, target)
	} else {
		res.setting("fault", p.auto)
		logf("PostgreSQL %s under pg_auto_failover: primary %s; fault: %s", version, r.Primary, p.auto)
	}
	run, err := startPGRun(ctx, env, prof, num, logf)
	if err != nil {
		return res, err
	}
	defer run.close()
	t, err := run.promoteUnderLoad(ctx, r, target, p, size)
	if p.auto == "" {
		run.rejoin(context.WithoutCancel(ctx), r.Primary)
	} else {
		res.setting("promoted", run.autoRestore(context.WithoutCancel(ctx), p, r.Primary))
	}
	if err != nil {
		return res, err
	}
	if err := run.count(ctx, t); err != nil {
		return res, err
	}
	run.record(&res, p, size)
	res.DurationS = math.Round(time.Since(began).Seconds()*10) / 10
	return res, nil
}

// pgRoles are the roles before p's fault and the standby p promotes:
// the synchronous or asynchronous one of the scripted formation, none
// for an automatic failover (the monitor chooses; only Primary is set).
func pgRoles(ctx context.Context, prof *pgProfile, p pgPromotion) (cluster.Roles, string, error) {
	if p.auto != "" {
		old, err := prof.autoWait(ctx)
		return cluster.Roles{Primary: old}, "", err
	}
	r, err := prof.roles(ctx)
	if err != nil {
		return r, "", err
	}
	if p.async {
		return r, r.Async, nil
	}
	return r, r.Sync, nil
}

// rejoin brings the old primary back as a standby and waits until the
// cluster is whole again (cluster.sh status postgres), recording whether
// it is and how long that took; a failure is logged (the figures stand).
func (r *pgRun) rejoin(ctx context.Context, old string) {
	t0 := time.Now()
	_, err := r.prof.run(ctx, "rejoin", old)
	if err == nil {
		err = r.prof.whole(ctx)
	}
	r.rejoinTaken, r.rejoined = time.Since(t0), err == nil
	if err != nil {
		r.prof.logf("the cluster is not whole after the rejoin of %s: %v", old, err)
	}
}
