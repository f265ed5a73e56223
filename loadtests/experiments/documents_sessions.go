package experiments

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/cleaner"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/ids"
)

// sessionExpiryText is documents-session-expiry's prose.
var sessionExpiryText = Text{
	Title: "Expiring sessions (TTL)",
	Happens: "MongoDB removes expired sessions through a TTL index, whose monitor deletes what has expired about once a minute; Postgres has no TTL index, so no-mongodb's reads filter on expires_at and a batched delete job removes the expired rows every RETENTION_INTERVAL (default 1 min, RETENTION_BATCH rows per statement): " +
		"on both sides an expired session is hidden at once and removed late.",
	UserMust: "Filter every read on the expiry (never count on the removal for correctness), delete expired rows in small batches through an index on the expiry so that foreground reads barely notice, and when whole cohorts expire together, partition by expiry time and drop past partitions whole instead of deleting rows.",
	Figure: func(f *Figures) string {
		pg := fmt.Sprintf("Postgres (delete job every %s, %d rows per statement): %s", secondsDur(f.Num(MetricPGIntervalSeconds)), f.Int(MetricPGBatch), sessionSideFigure(f, "pg"))
		mongo := "MongoDB: " + f.StrOr("mongo_status", "not measured")
		if f.Has(MetricMongoExpired) {
			monitor := "TTL monitor"
			if f.Has(MetricMongoTTLMonitorSeconds) {
				monitor = fmt.Sprintf("TTL monitor every %s", secondsDur(f.Num(MetricMongoTTLMonitorSeconds)))
			}
			mongo = fmt.Sprintf("MongoDB (%s): %s", monitor, sessionSideFigure(f, "mongo"))
		}
		return pg + ". " + mongo + "."
	},
	Notes: func(f *Figures) []string {
		notes := documentsNotes(f,
			fmt.Sprintf("%s sessions expiring at one moment %s after their load began (%s), plus %s live sessions (ttl 1 h), inserted straight into each side's store in batches of %d UUIDv7 ids (Postgres: INSERT ... SELECT over the ids, then VACUUM ANALYZE, as autovacuum would after a bulk load; MongoDB: insertMany)",
				feedThousands(int(f.Int(MetricExpired))), secondsDur(f.Num(MetricExpireInSeconds)), sessionLoadTimes(f), feedThousands(int(f.Int(MetricLive))), f.Int(MetricInsertBatch)),
			fmt.Sprintf("foreground: GET /sessions/{live id} open-loop at %s/s from the end of the load until the expired sessions are all removed or %s after their expiry; 'before removal' = reads sent before the last count that still found all of them, 'during' = from then until a count found none (or the bound)", num(f.Num(MetricRate)), secondsDur(f.Num(MetricBoundSeconds))),
			"removal is observed by counting the expired sessions every 250 ms (the count is part of the load on both sides), so its moments are known to about 250 ms",
			fmt.Sprintf("Postgres side: RETENTION_INTERVAL %s, RETENTION_BATCH %d, EXPIRED_RETENTION %s; the delete job's first pass runs at the service's start, then every interval, so the first removal falls anywhere up to one interval after the expiry (MongoDB's monitor likewise runs on its own clock)",
				secondsDur(f.Num(MetricPGIntervalSeconds)), f.Int(MetricPGBatch), msDur(f.Num(MetricPGGraceMS))),
			fmt.Sprintf("the partition variant is measured at the engine, not through the service: the same %s expired rows removed by the job's batched DELETE took %.1f s and wrote %s MB of WAL; held in one time partition, DETACH PARTITION CONCURRENTLY and DROP took %.2f s and wrote %s MB (WAL is cluster-wide); the service keeps the delete job, since a partition per expiry window suits bulk expiry with a bounded TTL range, which 1 s to 30 days is not",
				feedThousands(int(f.Int(MetricPGPartitionRows))), f.Num(MetricPGRowsDeleteSeconds), num(f.Num(MetricPGRowsDeleteWALMB)), f.Num(MetricPGPartitionDropSeconds), num(f.Num(MetricPGPartitionDropWALMB))))
		if f.Has(MetricPGIntervalSeconds) && f.Num(MetricPGIntervalSeconds) < cleaner.DefaultInterval.Seconds() {
			notes = append(notes, fmt.Sprintf("a Small run: RETENTION_INTERVAL shortened to %s so that the test is quick; the service's default, and make results', is %s, as MongoDB's monitor", secondsDur(f.Num(MetricPGIntervalSeconds)), cleaner.DefaultInterval))
		}
		return notes
	},
}

// sessionLoadTimes says, per measured side, how long the load took and
// when the sessions expired after it began (later than planned when the
// first batch predicted a slow load).
func sessionLoadTimes(f *Figures) string {
	var parts []string
	for _, side := range []struct{ key, name string }{{"pg", "Postgres"}, {"mongo", "MongoDB"}} {
		if f.Has(SidePrefix(side.key+"_").Of(MetricLoadSeconds)) && f.Has(SidePrefix(side.key+"_").Of(MetricExpireInSeconds)) {
			parts = append(parts, fmt.Sprintf("%s: loaded in %.1f s, expired %.1f s after the load began", side.name, f.Num(SidePrefix(side.key+"_").Of(MetricLoadSeconds)), f.Num(SidePrefix(side.key+"_").Of(MetricExpireInSeconds))))
		}
	}
	return "planned; " + strings.Join(parts, "; ")
}

// sessionSideFigure is one measured side's figure; it reads only the
// metrics the side recorded.
func sessionSideFigure(f *Figures, s string) string {
	p := SidePrefix(s + "_")
	var b strings.Builder
	fmt.Fprintf(&b, "%s sessions expired together", feedThousands(int(f.Int(p.Of(MetricExpired)))))
	switch {
	case f.Has(p.Of(MetricAllRemovedAfterSeconds)) && f.Has(p.Of(MetricFirstRemovedAfterSeconds)):
		took := fmt.Sprintf("removal %.1f s", f.Num(p.Of(MetricRemovalSeconds)))
		if f.Num(p.Of(MetricRemovalSeconds)) < expiredPoll.Seconds() {
			took = fmt.Sprintf("all removed between two counts, %s apart", expiredPoll)
		}
		fmt.Fprintf(&b, "; the first removed %.1f s after the expiry, all %.1f s after (%s)", f.Num(p.Of(MetricFirstRemovedAfterSeconds)), f.Num(p.Of(MetricAllRemovedAfterSeconds)), took)
	case f.Has(p.Of(MetricFirstRemovedAfterSeconds)):
		fmt.Fprintf(&b, "; the first removed %.1f s after the expiry, but %d still stored %s after it: not all removed within the bound", f.Num(p.Of(MetricFirstRemovedAfterSeconds)), f.Int(p.Of(MetricLeftAtEnd)), secondsDur(f.Num(MetricBoundSeconds)))
	default:
		fmt.Fprintf(&b, "; none removed within %s of the expiry (%d still stored)", secondsDur(f.Num(MetricBoundSeconds)), f.Int(p.Of(MetricLeftAtEnd)))
	}
	if f.Has(p.Of(MetricForegroundP99BaselineMS)) {
		fmt.Fprintf(&b, "; foreground GET p50/p99 %s/%s ms before the removal", num(f.Num(p.Of(MetricForegroundP50BaselineMS))), num(f.Num(p.Of(MetricForegroundP99BaselineMS))))
	}
	if f.Has(p.Of(MetricForegroundP99DuringMS)) {
		fmt.Fprintf(&b, ", %s/%s ms during it (%d reads)", num(f.Num(p.Of(MetricForegroundP50DuringMS))), num(f.Num(p.Of(MetricForegroundP99DuringMS))), f.Int(p.Of(MetricForegroundReadsDuring)))
	}
	fmt.Fprintf(&b, "; %d failed reads, %d live sessions lost", f.Int(p.Of(MetricForegroundErrors)), f.Int(p.Of(MetricLiveLost)))
	return b.String()
}

// sessionPlan is one run's sizes.
type sessionPlan struct {
	// expired sessions expire together, expireIn after their load
	// began; live ones (ttl 1 h) are what the foreground reads.
	expired, live int
	expireIn      time.Duration
	// bound is how long after the expiry the run waits for the removal.
	bound time.Duration
	// rate is the foreground's reads per second.
	rate float64
	// interval is the Postgres side's RETENTION_INTERVAL (0: its
	// default, cleaner.DefaultInterval).
	interval time.Duration
}

// The load's insert batch (rows per statement, documents per
// insertMany) and the count's period.
const (
	sessionBatch = 10_000
	expiredPoll  = 250 * time.Millisecond
	// pgExpiredGrace is no-mongodb's EXPIRED_RETENTION default, which the
	// run keeps.
	pgExpiredGrace = time.Millisecond
)

// sessionPlanFor is size's plan.
func sessionPlanFor(size Size) sessionPlan {
	if size == Full {
		return sessionPlan{expired: 1_000_000, live: 10_000, expireIn: 20 * time.Second, bound: 180 * time.Second, rate: 200}
	}
	return sessionPlan{expired: 20_000, live: 1_000, expireIn: 3 * time.Second, bound: 30 * time.Second, rate: 100, interval: 2 * time.Second}
}

// documentsSessionExpiry measures, per side, how late N sessions that
// expire together are removed (counted every 250 ms) and what the
// removal costs an open-loop foreground of GET /sessions/{live id}: its
// p50/p99 before and during the removal, its errors, and live sessions
// that read 404 (AckedLost). A MongoDB side whose server refuses the TTL
// index (FerretDB) removes nothing: it is "not measured", with the
// service's note.
func documentsSessionExpiry(ctx context.Context, env Env, size Size) (Result, error) {
	began := time.Now()
	plan := sessionPlanFor(size)
	logf := env.prefixed(DocumentsSessionExpiry)
	rig, err := newDocRig(ctx, env, "sessions", 4)
	if err != nil {
		return Result{}, err
	}
	defer rig.Close()
	res := Result{Name: DocumentsSessionExpiry, Metrics: map[driver.Metric]float64{}}
	run := sessionsRun{rig: rig, plan: plan, res: &res, logf: logf}
	if err := run.measurePG(ctx); err != nil {
		return Result{}, fmt.Errorf("postgres side: %w", err)
	}
	if err := measurePartitionDrop(ctx, rig.pg.Pool, plan.expired, cleaner.DefaultBatch, &res); err != nil {
		return Result{}, fmt.Errorf("postgres side, the partition variant: %w", err)
	}
	if err := run.measureMongo(ctx); err != nil {
		return Result{}, fmt.Errorf("mongodb side: %w", err)
	}
	res.AckedLost = int64(res.Metrics[MetricPGLiveLost] + res.Metrics[MetricMongoLiveLost])
	for k, v := range map[driver.Metric]float64{MetricExpired: float64(plan.expired), MetricLive: float64(plan.live), MetricExpireInSeconds: plan.expireIn.Seconds(),
		MetricBoundSeconds: plan.bound.Seconds(), MetricRate: plan.rate, MetricInsertBatch: sessionBatch} {
		res.metric(k, v)
	}
	documentsSettings(ctx, &res, rig)
	res.DurationS = math.Round(time.Since(began).Seconds()*10) / 10
	return res, nil
}

// sessionsRun is one run of documents-session-expiry: the services'
// rig, the plan, the result it records in and the log.
type sessionsRun struct {
	// rig starts and stops each side's service and holds its database.
	rig *docRig
	// plan is the sessions loaded, when they expire and the read load.
	plan sessionPlan
	// res is the result the figures are recorded in.
	res *Result
	// logf logs the run's progress.
	logf func(string, ...any)
}

// measurePG measures the Postgres side with its delete job's defaults
// (at Small, a shorter RETENTION_INTERVAL), then stops it.
func (sr sessionsRun) measurePG(ctx context.Context) error {
	rig, plan, res := sr.rig, sr.plan, sr.res
	extra := map[string]string{}
	interval := cleaner.DefaultInterval
	if plan.interval > 0 {
		interval = plan.interval
		extra["RETENTION_INTERVAL"] = plan.interval.String()
	}
	base, err := rig.start(ctx, sidePG, extra)
	if err != nil {
		return err
	}
	res.metric(MetricPGIntervalSeconds, interval.Seconds())
	res.metric(MetricPGBatch, cleaner.DefaultBatch)
	res.metric(MetricPGGraceMS, float64(pgExpiredGrace.Milliseconds()))
	if err := sr.measure(ctx, pgSessions{rig.pg.Pool}, base, "pg"); err != nil {
		return err
	}
	return rig.stop(sidePG)
}

// measureMongo measures the MongoDB side, unless its server refused
// the TTL index: then it records the service's note as mongo_status.
func (sr sessionsRun) measureMongo(ctx context.Context) error {
	rig, res, logf := sr.rig, sr.res, sr.logf
	base, err := rig.start(ctx, sideMongo, nil)
	if err != nil {
		return err
	}
	note, err := ttlRefusal(ctx, base)
	if err != nil {
		return err
	}
	if note != "" {
		logf("mongodb: not measured: %s", note)
		res.setting("mongo_status", "not measured: "+note)
		return rig.stop(sideMongo)
	}
	if s, ok := ttlMonitorSleep(ctx, rig.mongo); ok {
		res.metric(MetricMongoTTLMonitorSeconds, s)
	}
	if err := sr.measure(ctx, mongoSessions{rig.db().Collection("sessions")}, base, "mongo"); err != nil {
		return err
	}
	return rig.stop(sideMongo)
}

// ttlRefusal is the note of base's GET /backend that says the server
// refused the TTL index, or "".
func ttlRefusal(ctx context.Context, base string) (string, error) {
	code, body, err := driver.Do(ctx, http.MethodGet, base+"/backend", nil)
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("GET /backend: %d %s", code, strings.TrimSpace(string(body)))
	}
	if err != nil {
		return "", err
	}
	var info struct {
		Notes []string `json:"notes"`
	}
	if err := json.Unmarshal(body, &info); err != nil {
		return "", fmt.Errorf("GET /backend: %w", err)
	}
	for _, n := range info.Notes {
		if strings.Contains(n, "TTL index") && strings.Contains(n, "refused") {
			return n, nil
		}
	}
	return "", nil
}

// ttlMonitorSleep is the MongoDB server's ttlMonitorSleepSecs, when it
// answers getParameter.
func ttlMonitorSleep(ctx context.Context, c *mongo.Client) (float64, bool) {
	var out bson.M
	err := c.Database("admin").RunCommand(ctx, bson.D{{Key: "getParameter", Value: 1}, {Key: "ttlMonitorSleepSecs", Value: 1}}).Decode(&out)
	if err != nil {
		return 0, false
	}
	switch v := out["ttlMonitorSleepSecs"].(type) {
	case int32:
		return float64(v), true
	case int64:
		return float64(v), true
	case float64:
		return v, true
	}
	return 0, false
}

// sessionStore is a side's store of sessions, written and counted
// directly (not through the service).
type sessionStore interface {
	// insert stores one session per id, expiring at exp.
	insert(ctx context.Context, sessionIDs []string, exp time.Time) error
	// settle readies the store for counting after the load.
	settle(ctx context.Context) error
	// expiredBy counts the sessions stored with expires_at <= t.
	expiredBy(ctx context.Context, t time.Time) (int64, error)
}

// measure loads the plan's sessions into st, reads the live ones
// through base while the expired ones are removed, and records the
// side's metrics under prefix.
func (sr sessionsRun) measure(ctx context.Context, st sessionStore, base, prefix string) error {
	plan, res, logf := sr.plan, sr.res, sr.logf
	loadStart := time.Now()
	live, exp, err := loadSessions(ctx, st, plan, loadStart)
	if err != nil {
		return err
	}
	loaded := time.Since(loadStart)
	if left := time.Until(exp); left < time.Second {
		return fmt.Errorf("loading %d sessions took %s, leaving %s before they expire (%s after the load began): too little time to read before the removal", plan.expired+plan.live, loaded.Round(time.Millisecond), left.Round(time.Millisecond), plan.expireIn)
	}
	logf("%s: %d sessions loaded in %s; they expire in %s", prefix, plan.expired, loaded.Round(time.Millisecond), time.Until(exp).Round(time.Millisecond))
	lctx, stopReads := context.WithCancel(ctx)
	var shots []shot
	var wg sync.WaitGroup
	wg.Go(func() { shots = readSessions(lctx, base, live, plan.rate) })
	samples, err := watchExpired(ctx, st, exp, plan.bound)
	stopReads()
	wg.Wait()
	if err != nil {
		return err
	}
	m := sessionMetrics(shots, samples, exp, int64(plan.expired))
	m[MetricLoadSeconds], m[MetricExpireInSeconds] = secs(loaded), secs(exp.Sub(loadStart))
	if m[MetricLiveLost], m[MetricFinalReadErrors], err = sweepLive(ctx, base, live, shots); err != nil {
		return err
	}
	for k, v := range m {
		res.metric(SidePrefix(prefix+"_").Of(k), v)
	}
	logf("%s: first removed after %.2f s, all after %.2f s, %d left; p99 %.1f ms before, %.1f ms during; %d live lost",
		prefix, m[MetricFirstRemovedAfterSeconds], m[MetricAllRemovedAfterSeconds], int64(m[MetricLeftAtEnd]), m[MetricForegroundP99BaselineMS], m[MetricForegroundP99DuringMS], int64(m[MetricLiveLost]))
	return nil
}

// loadSessions inserts plan.live sessions living an hour, then
// plan.expired expiring together, and returns the live ones' ids and
// the expiry: plan.expireIn after began, or later when the live
// sessions' insert (the same rows) predicts a slower load, so that the
// foreground reads some time before the removal can start.
func loadSessions(ctx context.Context, st sessionStore, plan sessionPlan, began time.Time) ([]string, time.Time, error) {
	live := newIDs(plan.live)
	t0 := time.Now()
	if err := st.insert(ctx, live, t0.Add(time.Hour)); err != nil {
		return nil, time.Time{}, fmt.Errorf("insert live sessions: %w", err)
	}
	predicted := time.Since(t0) * time.Duration(2*plan.expired/plan.live)
	exp := began.Add(plan.expireIn)
	if late := time.Now().Add(predicted + 2*time.Second); late.After(exp) {
		exp = late
	}
	exp = exp.Truncate(time.Millisecond)
	for done := 0; done < plan.expired; done += sessionBatch {
		if err := st.insert(ctx, newIDs(min(sessionBatch, plan.expired-done)), exp); err != nil {
			return nil, exp, fmt.Errorf("insert expiring sessions: %w", err)
		}
	}
	return live, exp, st.settle(ctx)
}

// newIDs returns n session ids (UUIDv7, as the services make them).
func newIDs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = ids.New()
	}
	return out
}

// pgSessions is the Postgres side's sessions table (the pool's
// search_path is the service's schema).
type pgSessions struct{ pool *pgxpool.Pool }

// pgInsertSessions writes one session per id: a user, a small data
// object as a login would keep, created now.
const pgInsertSessions = `INSERT INTO sessions (id, user_id, data, created_at, expires_at)
	SELECT t.id::uuid, gen_random_uuid(),
	       jsonb_build_object('n', t.n, 'agent', 'loadtest', 'roles', jsonb_build_array('user'), 'cart', jsonb_build_object('items', t.n % 7)),
	       now(), $2
	FROM unnest($1::text[]) WITH ORDINALITY AS t(id, n)`

// insert implements sessionStore.
func (p pgSessions) insert(ctx context.Context, sessionIDs []string, exp time.Time) error {
	_, err := p.pool.Exec(ctx, pgInsertSessions, sessionIDs, exp)
	return err
}

// settle vacuums the table, as autovacuum would after a bulk load, so
// that the count is an index-only scan.
func (p pgSessions) settle(ctx context.Context) error {
	_, err := p.pool.Exec(ctx, `VACUUM (ANALYZE) sessions`)
	return err
}

// expiredBy implements sessionStore.
func (p pgSessions) expiredBy(ctx context.Context, t time.Time) (int64, error) {
	var n int64
	err := p.pool.QueryRow(ctx, `SELECT count(*) FROM sessions WHERE expires_at <= $1`, t).Scan(&n)
	return n, err
}

// mongoSessions is the MongoDB side's sessions collection.
type mongoSessions struct{ c *mongo.Collection }

// insert implements sessionStore: the service's stored shape.
func (m mongoSessions) insert(ctx context.Context, sessionIDs []string, exp time.Time) error {
	now := time.Now().UTC().Truncate(time.Millisecond)
	docs := make([]any, len(sessionIDs))
	for i, id := range sessionIDs {
		docs[i] = bson.D{{Key: "_id", Value: id}, {Key: "user_id", Value: ids.New()},
			{Key: "data", Value: bson.D{{Key: "n", Value: i + 1}, {Key: "agent", Value: "loadtest"}, {Key: "roles", Value: bson.A{"user"}}, {Key: "cart", Value: bson.D{{Key: "items", Value: (i + 1) % 7}}}}},
			{Key: "created_at", Value: now}, {Key: "expires_at", Value: exp}}
	}
	_, err := m.c.InsertMany(ctx, docs, options.InsertMany().SetOrdered(false))
	return err
}

// settle implements sessionStore (nothing to do).
func (mongoSessions) settle(context.Context) error { return nil }

// expiredBy implements sessionStore.
func (m mongoSessions) expiredBy(ctx context.Context, t time.Time) (int64, error) {
	return m.c.CountDocuments(ctx, bson.D{{Key: "expires_at", Value: bson.D{{Key: "$lte", Value: t}}}})
}

// countSample is one count of the expired sessions.
type countSample struct {
	at time.Time
	n  int64
}

// watchExpired counts the sessions expiring by exp every expiredPoll
// until a count after exp finds none or bound has passed since exp.
func watchExpired(ctx context.Context, st sessionStore, exp time.Time, bound time.Duration) ([]countSample, error) {
	var out []countSample
	for {
		qctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		n, err := st.expiredBy(qctx, exp)
		cancel()
		if err != nil {
			return out, fmt.Errorf("count expired sessions: %w", err)
		}
		now := time.Now()
		out = append(out, countSample{at: now, n: n})
		if now.After(exp) && (n == 0 || now.Sub(exp) >= bound) {
			return out, nil
		}
		sleep(ctx, expiredPoll)
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
	}
}

// readSessions GETs the live sessions in turn at rate per second, open
// loop (openLoop), until ctx ends; it returns every shot, in the order
// sent.
func readSessions(ctx context.Context, base string, live []string, rate float64) []shot {
	return openLoop(ctx, rate, func(reqCtx context.Context, i int) shot {
		id := live[i%len(live)]
		t0 := time.Now()
		code, _, err := driver.Do(reqCtx, http.MethodGet, base+"/sessions/"+id, nil)
		return shot{sent: t0, lat: time.Since(t0), code: code, id: id, err: err}
	})
}

// removal is what the counts saw: the last count that still found all
// the expired sessions, the first that found fewer, the first that found
// none, and the last count's time and number.
type removal struct {
	lastFull, first, zero time.Time
	started, done         bool
	end                   time.Time
	left                  int64
}

// findRemoval reads the counts of n expired sessions.
func findRemoval(samples []countSample, n int64) removal {
	var r removal
	for _, s := range samples {
		r.end, r.left = s.at, s.n
		if !r.started && s.n >= n {
			r.lastFull = s.at
			continue
		}
		if !r.started {
			r.started, r.first = true, s.at
		}
		if s.n == 0 {
			r.done, r.zero = true, s.at
			break
		}
	}
	return r
}

// sessionMetrics are a side's figures: when the n sessions expiring at
// exp were removed, and the foreground's latencies before and during the
// removal.
func sessionMetrics(shots []shot, samples []countSample, exp time.Time, n int64) map[driver.Metric]float64 {
	r := findRemoval(samples, n)
	m := map[driver.Metric]float64{MetricExpired: float64(n), MetricLeftAtEnd: float64(r.left), MetricForegroundReads: float64(len(shots)), MetricForegroundErrors: 0}
	if r.started {
		m[MetricFirstRemovedAfterSeconds] = secs(r.first.Sub(exp))
	}
	end := r.end
	if r.done {
		m[MetricAllRemovedAfterSeconds], m[MetricRemovalSeconds] = secs(r.zero.Sub(exp)), secs(r.zero.Sub(r.first))
		end = r.zero
	}
	var before, during []time.Duration
	for _, s := range shots {
		if s.err != nil || s.code != http.StatusOK {
			m[MetricForegroundErrors]++
		}
		switch {
		case !r.started || s.sent.Before(r.lastFull):
			before = append(before, s.lat)
		case !s.sent.After(end):
			during = append(during, s.lat)
		}
	}
	latencyFigures(m, sessionBaseline, before)
	latencyFigures(m, sessionDuring, during)
	return m
}

// sessionWindow names the figures of the foreground reads of one window
// (before the expiry, during the removal): their count, p50, p99 and
// max.
type sessionWindow struct{ reads, p50, p99, max driver.Metric }

// The windows of the foreground reads.
var (
	sessionBaseline = sessionWindow{MetricForegroundReadsBaseline, MetricForegroundP50BaselineMS, MetricForegroundP99BaselineMS, MetricForegroundMaxBaselineMS}
	sessionDuring   = sessionWindow{MetricForegroundReadsDuring, MetricForegroundP50DuringMS, MetricForegroundP99DuringMS, MetricForegroundMaxDuringMS}
)

// latencyFigures records the p50, p99 and max of lats (when there are
// any) and their count under window's keys.
func latencyFigures(m map[driver.Metric]float64, window sessionWindow, lats []time.Duration) {
	m[window.reads] = float64(len(lats))
	if len(lats) == 0 {
		return
	}
	slices.Sort(lats)
	at := func(q float64) time.Duration { return lats[max(0, int(math.Ceil(q*float64(len(lats))))-1)] }
	m[window.p50], m[window.p99], m[window.max] = ms(at(0.5)), ms(at(0.99)), ms(lats[len(lats)-1])
}

// sweepLive reads every live session once more and returns how many live
// sessions answered 404 in the foreground or now (lost), and how many
// final reads failed otherwise.
func sweepLive(ctx context.Context, base string, live []string, shots []shot) (lost, failed float64, err error) {
	var mu sync.Mutex
	gone := map[string]bool{}
	for _, s := range shots {
		if s.code == http.StatusNotFound {
			gone[s.id] = true
		}
	}
	err = forEach(ctx, len(live), 8, func(ctx context.Context, i int) error {
		code, _, err := driver.Do(ctx, http.MethodGet, base+"/sessions/"+live[i], nil)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err != nil:
			return err
		case code == http.StatusNotFound:
			gone[live[i]] = true
		case code != http.StatusOK:
			failed++
		}
		return nil
	})
	if err != nil {
		return 0, 0, fmt.Errorf("read the live sessions: %w", err)
	}
	return float64(len(gone)), failed, nil
}
