package experiments

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/launch"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/localport"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// kafkaBrokerRestart is issue 14's item 7 for Kafka: the kafka service
// under a light open load of single POST /events on a private
// single-node KRaft broker, which is stopped (SIGTERM) and, as a second
// case at every size, killed (SIGKILL),
// and started again on the same data directory.
func kafkaBrokerRestart() Experiment {
	// Full: two restarts (the broker back about 8 s and 17 s after the
	// signal, 5 s of it held down) between 5 s of load before and 10 s
	// after, the settle, and the node's and the service's start: about
	// 70 s.
	return Experiment{Name: "kafka-broker-restart", Run: runKafkaBrokerRestart, Full: 80 * time.Second, Text: kafkaRestartText}
}

// kafkaRestartText is kafka-broker-restart's prose.
var kafkaRestartText = Text{
	Title: "Kafka broker restart under load",
	Happens: "While the broker is down longer than KAFKA_WRITE_TIMEOUT the kafka service answers writes 503, never later than that timeout, /readyz answers 503 naming Kafka, and the service recovers by itself once the broker is back; every event answered 201 is delivered. An outage shorter than the timeout is ridden out: the producer retries, and those writes answer 201 late. " +
		"But it learns that the broker is down only from a produce that failed, which takes the whole KAFKA_WRITE_TIMEOUT: until then (and, after a kill, while the restarted broker answers metadata but cannot take writes yet) each write commits its row and waits the timeout. " +
		"Those 503s say the row is committed in Postgres and, when the produce timed out, that delivery is unknown: the producer keeps the batch and most are delivered once the broker is back, the rest stay undelivered (the dual-write gap). Only records the producer gave up on before sending them (or after the broker refused them) are answered \"delivery\": \"never\".",
	UserMust: "Retry on 503 with backoff, and treat a 503 from the dual write as \"unknown\", not \"not written\": the event may be in the log undelivered, or delivered anyway (a retry then writes it twice). Keep KAFKA_WRITE_TIMEOUT short, since it is how long an outage's first writes hang. For neither gap nor duplicates, write through Postgres only (no-kafka) or add an outbox and a relay.",
	Figure:   func(f *Figures) string { return caseFigures(f, kafkaCases(Full), kafkaCaseFigure) },
	Notes:    kafkaRestartNotes,
}

// kafkaRestartNotes are kafka-broker-restart's notes.
func kafkaRestartNotes(f *Figures) []string {
	notes := []string{
		fmt.Sprintf("a private single-node KRaft Kafka %s (broker and controller in one JVM, -Xmx384m, own ports and data directory) from the stack's jars; the service's Postgres is the shared stack's, in a schema of its own", f.Str("kafka_version")),
		fmt.Sprintf("open load of single POST /events at %g/s: %s before the stop, the broker held down %s after its process exited, %s after it answers again; KAFKA_WRITE_TIMEOUT and BACKEND_TIMEOUT %s",
			f.Num(MetricRate), secondsDur(f.Num(MetricBeforeSeconds)), secondsDur(f.Num(MetricHoldSeconds)), secondsDur(f.Num(MetricAfterSeconds)), msDur(f.Num(MetricTimeoutMS))),
		"broker back = the node answers a metadata request naming a leader for every partition of the topic; recovery = the first 201 to a request sent after that",
		"acknowledged lost = events answered 201 without a row in the service's deliveries table 60 s after the load; dual-write gap answers = 503s whose body says the rows are in Postgres (in_postgres), checked against the deliveries table too, those answered \"delivery\": \"never\" apart",
	}
	for _, c := range kafkaCases(Full) {
		notes = append(notes, fmt.Sprintf("%s: answers other than 201: %s; /readyz during the outage: %s", c.name, f.Str(c.name+".answers"), orNone(f.StrOr(c.name+".readyz_reason", ""))))
	}
	if moves := f.Int(MetricControllerMoves); moves > 0 {
		notes = append(notes, fmt.Sprintf("the controller's port was taken while the node was down and moved %d time(s) (it is the node's own; the broker's port stayed)", moves))
	}
	if f.Num(MetricFullSize) != 0 {
		notes = append(notes, "after SIGKILL the restarted node waits for its previous registration's session to expire (broker.session.timeout.ms, 9 s) before it serves: a hard kill costs that much more downtime than a clean stop")
	}
	return notes
}

// kafkaCaseFigure is case c's figure in words.
func kafkaCaseFigure(f *Figures, c kafkaCase) string {
	p := SidePrefix(c.name + ".")
	rec := "never recovered"
	if f.Num(p.Of(MetricRecovered)) != 0 {
		rec = fmt.Sprintf("first 201 %.2f s after the broker was back", f.Num(p.Of(MetricRecoverSeconds)))
	}
	readyz := "/readyz never answered 503"
	if f.Num(p.Of(MetricReadyzFailed)) != 0 {
		readyz = fmt.Sprintf("/readyz 503 %.1f s after the signal, 200 again %.1f s after the broker", f.Num(p.Of(MetricReadyz503AfterSeconds)), f.Num(p.Of(MetricReadyz200AfterSeconds)))
	}
	stopping, down, starting := f.Int(p.Of(MetricSlowFailedSentStopping)), f.Int(p.Of(MetricSlowFailedSentDown)), f.Int(p.Of(MetricSlowFailedSentStarting))
	return fmt.Sprintf("%s: broker back %.1f s after the signal; %d of %d writes failed, %d of them not 503, p99 %.0f ms and slowest %.0f ms (timeout %s; %d slower than %s, sent while the broker stopped/was down/started: %d/%d/%d); "+
		"503s by kind: %s; slowest answer of any status %.0f ms; "+
		"%s; %s; %d answers named the dual-write gap (%d of them \"delivery\": \"never\", %d of whose events were delivered): %d of their events were delivered after the 503, %d rows stay undelivered; %d of %d acknowledged lost",
		strings.ToUpper(c.name), f.Num(p.Of(MetricDownSeconds)), f.Int(p.Of(MetricFailed)), f.Int(p.Of(MetricSent)), f.Int(p.Of(MetricFailedNot503)), f.Num(p.Of(MetricP99FailedMS)), f.Num(p.Of(MetricMaxFailedMS)), msDur(f.Num(p.Of(MetricTimeoutMS))),
		stopping+down+starting, msDur(f.Num(p.Of(MetricSlowFailureMS))), stopping, down, starting,
		esKindsText(f, p), f.Num(p.Of(MetricSlowestAnswerMS)),
		readyz, rec, f.Int(p.Of(MetricDualWriteGapAnswers)), f.Int(p.Of(MetricGapNeverAnswers)), f.Int(p.Of(MetricGapNeverIDsDelivered)), f.Int(p.Of(MetricGapIDsDelivered)), f.Int(p.Of(MetricUndeliveredRows)),
		f.Int(p.Of(MetricAckedLost)), f.Int(p.Of(MetricAcked)))
}

// kafkaServiceTimeout is the kafka service's KAFKA_WRITE_TIMEOUT and
// BACKEND_TIMEOUT in this experiment: no answer may take longer.
const kafkaServiceTimeout = 5 * time.Second

// kafkaCase is one way the broker is stopped.
type kafkaCase struct {
	name string
	sig  syscall.Signal
}

// kafkaCases are the stops, at every size: a clean SIGTERM and a SIGKILL
// (kill -9: no controlled shutdown).
func kafkaCases(Size) []kafkaCase {
	return []kafkaCase{{"sigterm", syscall.SIGTERM}, {"sigkill", syscall.SIGKILL}}
}

// kafkaLoad is a size's load: the rate, how long it runs before the stop,
// how long the broker is held down after its process exited, and how
// long the load runs once the broker answers again.
func kafkaLoad(size Size) (rate float64, before, hold, after time.Duration) {
	if size == Full {
		return 100, 5 * time.Second, 5 * time.Second, 10 * time.Second
	}
	// After a SIGKILL the first writes the restarted broker takes came
	// 1-4.5 s after it led the topic again (franz-go producer): the
	// window after it is longer than that.
	return 50, 2 * time.Second, 0, 6 * time.Second
}

// kafkaSide is the kafka service as the load writes to it: single POST
// /events, acknowledged 201.
var kafkaSide = pgSide{name: "kafka", okCode: http.StatusCreated,
	write: pgSides[pairs.NoKafka].write, path: pgSides[pairs.NoKafka].path}

// privateKafkaLauncher starts a private KRaft node and a launcher of
// the services under env's root whose logs go to a temporary directory
// named by pattern (as os.MkdirTemp). cleanup removes the logs and stops
// the node; the caller stops the services it started first. On error
// nothing is left running.
func privateKafkaLauncher(ctx context.Context, env Env, pattern string, logf func(string, ...any)) (node *kafkaNode, l *launch.Launcher, cleanup func(), err error) {
	root, err := env.root()
	if err != nil {
		return nil, nil, nil, err
	}
	node, err = startPrivateKafka(ctx, root)
	if err != nil {
		return nil, nil, nil, err
	}
	logf("private KRaft node on %s (%s)", node.brokers(), node.dir)
	l, logDir, err := newLauncher(root, pattern)
	if err != nil {
		node.close()
		return nil, nil, nil, err
	}
	return node, l, func() {
		_ = os.RemoveAll(logDir)
		node.close()
	}, nil
}

func runKafkaBrokerRestart(ctx context.Context, env Env, size Size) (Result, error) {
	began := time.Now()
	res := Result{Name: "kafka-broker-restart", Metrics: map[driver.Metric]float64{}}
	logf := env.prefixed("kafka-broker-restart")
	node, l, cleanup, err := privateKafkaLauncher(ctx, env, "wpe-kafka-restart-logs-", logf)
	if err != nil {
		return res, err
	}
	defer cleanup()
	pgURL := env.PostgresURL
	if pgURL == "" {
		pgURL = defaultPostgresURL
	}
	suffix := uniqueName("exp_kafka")
	topic := strings.ReplaceAll(suffix, "_", "-")
	// Deferred in this order so that the service stops before its schema
	// is dropped.
	defer func() { _ = dropSchema(pgURL, suffix) }()
	defer func() { _ = l.StopAll(30 * time.Second) }()
	port, err := localport.Free()
	if err != nil {
		return res, err
	}
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	if _, err := l.Start(ctx, "kafka", port, map[string]string{
		"KAFKA_BROKERS": node.brokers(), "KAFKA_TOPIC": topic, "KAFKA_GROUP": topic,
		"DATABASE_URL": pgURL, "DATABASE_SCHEMA": suffix,
		"KAFKA_WRITE_TIMEOUT": kafkaServiceTimeout.String(), "BACKEND_TIMEOUT": kafkaServiceTimeout.String(),
		"LOG_LEVEL": "warn", "LOG_FORMAT": "text",
	}, 2*time.Minute); err != nil {
		return res, err
	}
	pg, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		return res, fmt.Errorf("postgres: %w", err)
	}
	defer pg.Close(context.WithoutCancel(ctx))

	run := kafkaRun{node: node, base: base, topic: topic, size: size, logf: logf}
	for _, c := range kafkaCases(size) {
		o, err := run.runCase(ctx, pg, suffix, c)
		if err != nil {
			return res, fmt.Errorf("%s: %w", c.name, err)
		}
		res.AckedLost += o.lost
		for k, v := range o.metrics() {
			res.Metrics[SidePrefix(c.name+".").Of(k)] = v
		}
		res.setting(c.name+".answers", o.codes)
		res.setting(c.name+".readyz_reason", o.readyReason)
	}
	rate, before, hold, after := kafkaLoad(size)
	for k, v := range map[driver.Metric]float64{MetricRate: rate, MetricBeforeSeconds: before.Seconds(), MetricHoldSeconds: hold.Seconds(), MetricAfterSeconds: after.Seconds(),
		MetricTimeoutMS: ms(kafkaServiceTimeout), MetricControllerMoves: float64(node.ctrlMoves), MetricFullSize: b2f(size == Full)} {
		res.Metrics[k] = v
	}
	res.setting("kafka_version", kafkaVersion(node.libs))
	res.DurationS = math.Round(time.Since(began).Seconds()*10) / 10
	return res, nil
}

// kafkaOutcome is what one case measured.
type kafkaOutcome struct {
	sent, acked, failed, failedNot503, gapAnswers int
	p99Failed, maxFailed                          time.Duration
	slowest                                       time.Duration  // slowest answer of any status
	kinds                                         map[string]int // 503s by their "kind" ("" when it has none)
	exitTook, downFor                             time.Duration  // signal → process gone; signal → broker back
	recover                                       time.Duration  // broker back → first 201 sent after it; -1 never
	readyDownAfter, readyUpAfter                  time.Duration  // signal → first /readyz 503; broker back → /readyz 200 again
	readyReason                                   string
	ackedWhileDown                                int
	lost, undelivered                             int64
	codes                                         string
	// gapDelivered counts events a 503 named as not in Kafka ("ids")
	// that were delivered all the same. An answer says "delivery":
	// "unknown" when the produce timed out (kafka-go keeps the batch and
	// may send it later: a client retry may write the event twice) and
	// "never" when kafka-go gave the batch up; gapNever and
	// gapNeverDelivered count the latter, whose delivered count must be 0.
	gapDelivered      int64
	gapNever          int
	gapNeverDelivered int64
	// slow counts failed answers slower than slowFailure, by when they
	// were sent: before the process was gone, while it was down, while
	// it was starting.
	slowStopping, slowDown, slowStarting int
}

// slowFailure is the latency above which a failed answer counts as slow:
// a refusal before writing takes a few milliseconds, one probe at most
// 500 ms.
const slowFailure = time.Second

func (o kafkaOutcome) metrics() map[driver.Metric]float64 {
	return map[driver.Metric]float64{
		MetricSent: float64(o.sent), MetricAcked: float64(o.acked), MetricFailed: float64(o.failed), MetricFailedNot503: float64(o.failedNot503),
		MetricP99FailedMS: ms(o.p99Failed), MetricMaxFailedMS: ms(o.maxFailed), MetricExitSeconds: secs(o.exitTook), MetricDownSeconds: secs(o.downFor),
		// Never recovered, /readyz never failed: a flag, and -1 (recoverS),
		// never secs(-1ns), which is -0 and not below 0.
		MetricRecovered: b2f(o.recover >= 0), MetricRecoverSeconds: recoverS(o.recover),
		MetricReadyzFailed: b2f(o.readyDownAfter >= 0), MetricReadyz503AfterSeconds: recoverS(o.readyDownAfter), MetricReadyz200AfterSeconds: secs(o.readyUpAfter),
		MetricSlowFailureMS:  ms(slowFailure),
		MetricAckedWhileDown: float64(o.ackedWhileDown), MetricAckedLost: float64(o.lost),
		MetricUndeliveredRows: float64(o.undelivered), MetricDualWriteGapAnswers: float64(o.gapAnswers),
		MetricTimeoutMS: ms(kafkaServiceTimeout), MetricGapIDsDelivered: float64(o.gapDelivered),
		MetricGapNeverAnswers: float64(o.gapNever), MetricGapNeverIDsDelivered: float64(o.gapNeverDelivered),
		MetricSlowFailedSentStopping: float64(o.slowStopping), MetricSlowFailedSentDown: float64(o.slowDown),
		MetricSlowFailedSentStarting: float64(o.slowStarting), MetricSlowestAnswerMS: ms(o.slowest),
		Metric503NotRecorded: float64(o.kinds["not_recorded"]), Metric503Unknown: float64(o.kinds["unknown"]),
		Metric503Shed: float64(o.kinds["shed"]), Metric503WithoutKind: float64(o.kinds[""]),
	}
}

// readySample is one /readyz answer.
type readySample struct {
	at   time.Time
	code int
	body string
}

// watchReady polls base/readyz every 100 ms until ctx ends and returns
// the answers.
func watchReady(ctx context.Context, base string) []readySample {
	var out []readySample
	for ctx.Err() == nil {
		t := time.Now()
		code, b, err := driver.Do(ctx, http.MethodGet, base+"/readyz", nil)
		if err != nil {
			b = []byte(err.Error())
		}
		out = append(out, readySample{at: t, code: code, body: strings.TrimSpace(string(b))})
		sleep(ctx, 100*time.Millisecond)
	}
	return out
}

// kafkaRun is what every case of a private broker's restart shares
// (kafka-broker-restart's, kafka-eventstore-broker-restart's): the node,
// the service on it (its URL, base) and the service's topic, the size
// and the log.
type kafkaRun struct {
	// node is the private broker stopped and started in every case.
	node *kafkaNode
	// base is the service's URL, topic the topic it writes to.
	base, topic string
	// size sets the load and the outage (kafkaLoad).
	size Size
	// logf logs the run's progress.
	logf func(string, ...any)
}

// runCase runs one case of kafka-broker-restart (the service keeps its
// rows in schema, read through pg): load, stop, hold, start, load,
// settle, count.
func (kr kafkaRun) runCase(ctx context.Context, pg *pgx.Conn, schema string, c kafkaCase) (kafkaOutcome, error) {
	base, logf := kr.base, kr.logf
	o := kafkaOutcome{recover: -1}
	if err := crashWaitReady(ctx, base, time.Minute); err != nil {
		return o, err
	}
	deliveries := pgx.Identifier{schema, "deliveries"}.Sanitize()
	messages := pgx.Identifier{schema, "messages"}.Sanitize()
	undeliveredSQL := `SELECT count(*) FROM ` + messages + ` m WHERE NOT EXISTS (SELECT 1 FROM ` + deliveries + ` d WHERE d.id = m.id)`
	var undeliveredBefore int64
	if err := pg.QueryRow(ctx, undeliveredSQL).Scan(&undeliveredBefore); err != nil {
		return o, fmt.Errorf("count undelivered: %w", err)
	}
	shots, samples, t, err := kr.outage(ctx, c)
	if err != nil {
		return o, err
	}
	o.exitTook, o.downFor = t.exitTook, t.up.Sub(t.stop)
	ids, gapIDs, neverIDs := o.tally(shots, t)
	o.codes = codeCounts(shots, kafkaSide)
	o.readyz(samples, t)
	if o.acked == 0 {
		return o, fmt.Errorf("no write was acknowledged (answers: %s)", o.codes)
	}
	if err := o.settle(ctx, pg, deliveries, ids); err != nil {
		return o, err
	}
	if err := pg.QueryRow(ctx, undeliveredSQL).Scan(&o.undelivered); err != nil {
		return o, fmt.Errorf("count undelivered: %w", err)
	}
	o.undelivered -= undeliveredBefore
	if err := pg.QueryRow(ctx, `SELECT count(*) FROM `+deliveries+` WHERE id = ANY($1::uuid[])`, gapIDs).Scan(&o.gapDelivered); err != nil {
		return o, fmt.Errorf("count deliveries: %w", err)
	}
	if err := pg.QueryRow(ctx, `SELECT count(*) FROM `+deliveries+` WHERE id = ANY($1::uuid[])`, neverIDs).Scan(&o.gapNeverDelivered); err != nil {
		return o, fmt.Errorf("count deliveries: %w", err)
	}
	logf("%s: %d of %d acknowledged lost, %d rows undelivered; answers other than 201: %s; /readyz said: %s", c.name, o.lost, o.acked, o.undelivered, o.codes, orNone(o.readyReason))
	return o, ctx.Err()
}

// outageTimes are the moments of one broker outage: the signal, the
// process gone, the restart begun, the broker back (leading the topic).
type outageTimes struct {
	stop, gone, start, up time.Time
	// exitTook is how long the process took to exit after the signal.
	exitTook time.Duration
}

// outage runs an open load of single writes and a /readyz watch on the
// service while the broker is stopped with c.sig, held down and started
// again; it returns the shots, the /readyz answers and the outage's
// moments.
func (kr kafkaRun) outage(ctx context.Context, c kafkaCase) ([]shot, []readySample, outageTimes, error) {
	node, base, topic, logf := kr.node, kr.base, kr.topic, kr.logf
	var t outageTimes
	rate, before, hold, after := kafkaLoad(kr.size)
	lctx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	var shots []shot
	var samples []readySample
	var wg sync.WaitGroup
	wg.Go(func() { shots = openLoad(lctx, base, kafkaSide, rate) })
	wg.Go(func() { samples = watchReady(lctx, base) })
	fail := func(err error) ([]shot, []readySample, outageTimes, error) {
		stopLoad()
		wg.Wait()
		return nil, nil, t, err
	}
	sleep(ctx, before)
	logf("%s: stopping the broker", c.name)
	t.stop = time.Now()
	took, err := node.stop(c.sig, time.Minute)
	if err != nil {
		return fail(err)
	}
	t.gone, t.exitTook = time.Now(), took
	sleep(ctx, hold)
	t.start = time.Now()
	if err := node.restart(ctx); err != nil {
		return fail(err)
	}
	for !node.topicLed(ctx, topic) && ctx.Err() == nil && time.Since(t.stop) < 3*time.Minute {
		time.Sleep(50 * time.Millisecond)
	}
	t.up = time.Now()
	logf("%s: process gone after %.1f s, broker back %.1f s after the signal", c.name, took.Seconds(), t.up.Sub(t.stop).Seconds())
	sleep(ctx, after)
	stopLoad()
	wg.Wait()
	return shots, samples, t, ctx.Err()
}

// tally counts the shots into o and returns the ids acknowledged, those
// the dual-write gap answers named, and those of its "delivery": "never"
// answers.
func (o *kafkaOutcome) tally(shots []shot, t outageTimes) (ids, gapIDs, neverIDs []string) {
	var failedLat []time.Duration
	o.kinds = map[string]int{}
	for _, s := range shots {
		o.sent++
		o.slowest = max(o.slowest, s.lat)
		if s.err == nil && s.code == kafkaSide.okCode {
			o.acked++
			ids = append(ids, s.id)
			if s.end().After(t.stop) && s.end().Before(t.up) {
				o.ackedWhileDown++
			}
			if o.recover < 0 && !s.sent.Before(t.up) {
				o.recover = s.end().Sub(t.up)
			}
			continue
		}
		o.failed++
		failedLat = append(failedLat, s.lat)
		o.countSlow(s, t)
		if s.code != http.StatusServiceUnavailable {
			o.failedNot503++
		}
		gap, never := o.readAnswer(s)
		gapIDs, neverIDs = append(gapIDs, gap...), append(neverIDs, never...)
	}
	if len(failedLat) > 0 {
		sort.Slice(failedLat, func(i, j int) bool { return failedLat[i] < failedLat[j] })
		o.p99Failed = failedLat[min(len(failedLat)-1, int(math.Ceil(0.99*float64(len(failedLat))))-1)]
		o.maxFailed = failedLat[len(failedLat)-1]
	}
	return ids, gapIDs, neverIDs
}

// countSlow counts failed shot s when it was slower than slowFailure, by
// when it was sent.
func (o *kafkaOutcome) countSlow(s shot, t outageTimes) {
	if s.lat <= slowFailure {
		return
	}
	switch {
	case s.sent.Before(t.gone):
		o.slowStopping++
	case s.sent.Before(t.start):
		o.slowDown++
	case s.sent.Before(t.up):
		o.slowStarting++
	}
}

// readAnswer counts failed shot s's 503 by kind and, when its body says
// the rows are in Postgres (the dual-write gap), returns the ids it
// names, and again when it says "delivery": "never".
func (o *kafkaOutcome) readAnswer(s shot) (gapIDs, neverIDs []string) {
	if s.err == nil {
		return nil, nil
	}
	var body struct {
		IDs        []string `json:"ids"`
		InPostgres bool     `json:"in_postgres"`
		Delivery   string   `json:"delivery"`
		Kind       string   `json:"kind"`
	}
	_, js, _ := strings.Cut(s.err.Error(), " ")
	parsed := json.Unmarshal([]byte(js), &body) == nil
	if s.code == http.StatusServiceUnavailable {
		o.kinds[body.Kind]++
	}
	if !parsed || !body.InPostgres {
		return nil, nil
	}
	o.gapAnswers++
	if body.Delivery == "never" {
		o.gapNever++
		return body.IDs, body.IDs
	}
	return body.IDs, nil
}

// readyz reads the /readyz answers: the first failure after the signal
// (and its reason), then the first 200 once the broker was back;
// readyDownAfter stays -1 when /readyz never failed.
func (o *kafkaOutcome) readyz(samples []readySample, t outageTimes) {
	o.readyDownAfter = -1
	var downSeen bool
	for _, r := range samples {
		if r.at.Before(t.stop) {
			continue
		}
		if !downSeen {
			if r.code != http.StatusOK {
				downSeen = true
				o.readyDownAfter = r.at.Sub(t.stop)
				o.readyReason = clipErr(r.body)
			}
			continue
		}
		if r.code == http.StatusOK && !r.at.Before(t.up) {
			o.readyUpAfter = r.at.Sub(t.up)
			break
		}
	}
}

// settle waits (a minute at most) until every acknowledged event (ids) is
// delivered (a row in deliveries) and counts those that are not.
func (o *kafkaOutcome) settle(ctx context.Context, pg *pgx.Conn, deliveries string, ids []string) error {
	deadline := time.Now().Add(time.Minute)
	for {
		var delivered int64
		if err := pg.QueryRow(ctx, `SELECT count(*) FROM `+deliveries+` WHERE id = ANY($1::uuid[])`, ids).Scan(&delivered); err != nil {
			return fmt.Errorf("count deliveries: %w", err)
		}
		o.lost = int64(len(ids)) - delivered
		if o.lost == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// orNone is s, or "none" when it is empty.
func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
