package experiments

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/localport"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// This file holds the event-store pair's restart experiments (issue 26,
// item 6): kafka-eventstore under a restart and a kill of its Kafka
// broker, and no-kurrentdb under a restart of its Postgres with a live
// SSE subscriber. Both write one event to a stream of its own per
// request, so a stream's length says whether its append was lost (0) or
// duplicated (more than 1).

// esAppendSide appends one event to a new stream with expected_version
// "any" (Kafka answers every other condition 422); the id is the stream.
var esAppendSide = pgSide{name: pairs.KafkaEventStore, okCode: http.StatusCreated,
	write: func(ctx context.Context, base string, i int) (string, int, []byte, error) {
		stream := fmt.Sprintf("exp-%d-%d", time.Now().UnixNano(), i)
		code, b, err := driver.Do(ctx, http.MethodPost, base+"/streams/"+stream+"/events",
			[]byte(fmt.Sprintf(`{"expected_version":"any","events":[{"type":"exp.restart","data":{"n":%d}}]}`, i)))
		return stream, code, b, err
	},
	path: func(id string) string { return "/streams/" + id }}

// esCountStreams reads each stream on base (retrying a 5xx for a while)
// and counts those without an event (lost) and those with more than one
// (duplicated).
func esCountStreams(ctx context.Context, base string, streams []string) (lost, dup int64, err error) {
	err = eachAtMost8(streams, func(s string) error {
		for attempt := 0; ; attempt++ {
			code, b, err := driver.Do(ctx, http.MethodGet, base+"/streams/"+s, nil)
			if err == nil && code == http.StatusOK {
				var r struct {
					Events []json.RawMessage `json:"events"`
				}
				if err := json.Unmarshal(b, &r); err != nil {
					return fmt.Errorf("GET /streams/%s: %w", s, err)
				}
				switch {
				case len(r.Events) == 0:
					atomic.AddInt64(&lost, 1)
				case len(r.Events) > 1:
					atomic.AddInt64(&dup, 1)
				}
				return nil
			}
			if attempt >= 20 || ctx.Err() != nil {
				return fmt.Errorf("GET /streams/%s: %d %s %v", s, code, b, err)
			}
			time.Sleep(250 * time.Millisecond)
		}
	})
	return lost, dup, err
}

// esKinds counts the 503s of shots by their body's "kind" ("" when it
// has none) and returns the slowest answer of any status.
func esKinds(shots []shot) (kinds map[string]int, slowest time.Duration) {
	kinds = map[string]int{}
	for _, s := range shots {
		slowest = max(slowest, s.lat)
		if s.code != http.StatusServiceUnavailable || s.err == nil {
			continue
		}
		var body struct {
			Kind string `json:"kind"`
		}
		_, js, _ := strings.Cut(s.err.Error(), " ")
		_ = json.Unmarshal([]byte(js), &body)
		kinds[body.Kind]++
	}
	return kinds, slowest
}

// failed503 are the ids (streams) of the writes answered 503.
func failed503(shots []shot) []string {
	var ids []string
	for _, s := range shots {
		if s.code == http.StatusServiceUnavailable && s.id != "" {
			ids = append(ids, s.id)
		}
	}
	return ids
}

// recoverS is a recovery time in seconds, or -1 when there was none.
func recoverS(d time.Duration) float64 {
	if d < 0 {
		return -1
	}
	return secs(d)
}

// esKindMetrics are the 503-kind figures of kinds, under prefix.
func esKindMetrics(m map[driver.Metric]float64, prefix SidePrefix, kinds map[string]int) {
	m[prefix.Of(Metric503NotRecorded)] = float64(kinds["not_recorded"])
	m[prefix.Of(Metric503Unknown)] = float64(kinds["unknown"])
	m[prefix.Of(Metric503Shed)] = float64(kinds["shed"])
	m[prefix.Of(Metric503WithoutKind)] = float64(kinds[""])
}

// kafkaEventstoreRestart is issue 26's item 6 for kafka-eventstore: its
// private Kafka broker stopped (SIGTERM) and killed (SIGKILL) under an
// open load of single appends, and started again on the same data.
func kafkaEventstoreRestart() Experiment {
	// Full: two restarts (each about 10-20 s down) between 5 s of load
	// before and after, the settle and the reads: about 70 s.
	return Experiment{Name: "kafka-eventstore-broker-restart", Run: runKafkaEventstoreRestart, Full: 80 * time.Second, Text: esKafkaText}
}

// esKafkaText is kafka-eventstore-broker-restart's prose.
var esKafkaText = Text{
	Title:    "Kafka broker restart under kafka-eventstore appends",
	Happens:  "While the broker is down kafka-eventstore answers appends 503 within BACKEND_TIMEOUT and recovers by itself once the broker is back; every append answered 201 is readable afterwards, once.",
	UserMust: "Retry a 503 with backoff; a 503 of kind \"unknown\" may have been appended (Kafka's producer can still deliver it), so make events idempotent by id or check the stream before resending. Keep BACKEND_TIMEOUT short: it is how long an outage's appends hang.",
	Figure: func(f *Figures) string {
		var figs []string
		for _, c := range kafkaCases(Full) {
			p := SidePrefix(c.name + ".")
			rec := "never recovered"
			if r := f.Num(p.Of(MetricRecoverSeconds)); r >= 0 {
				rec = fmt.Sprintf("first 201 %.2f s after the broker was back", r)
			}
			figs = append(figs, fmt.Sprintf("%s: broker back %.1f s after the signal; %d of %d appends acknowledged, %d failed (%d not 503; 503s by kind: %s); %d of the 503s appended all the same; slowest answer %.0f ms; %s; %d acknowledged lost, %d duplicated",
				strings.ToUpper(c.name), f.Num(p.Of(MetricDownSeconds)), f.Int(p.Of(MetricAcked)), f.Int(p.Of(MetricSent)), f.Int(p.Of(MetricFailed)), f.Int(p.Of(MetricFailedNot503)), esKindsText(f, p),
				f.Int(p.Of(Metric503AppendedAnyway)), f.Num(p.Of(MetricSlowestAnswerMS)), rec, f.Int(p.Of(MetricAckedLost)), f.Int(p.Of(MetricDuplicated))))
		}
		return strings.Join(figs, "; ")
	},
	Notes: func(f *Figures) []string {
		notes := []string{
			fmt.Sprintf("a private single-node KRaft Kafka %s (own ports and data directory) from the stack's jars; kafka-eventstore on a port and topic of its own", f.Str("kafka_version")),
			fmt.Sprintf("open load of single appends, each to a new stream (expected_version \"any\"), at %g/s: %s before the stop, the broker held down %s after its process exited, %s after it answers again; BACKEND_TIMEOUT %s",
				f.Num(MetricRate), secondsDur(f.Num(MetricBeforeSeconds)), secondsDur(f.Num(MetricHoldSeconds)), secondsDur(f.Num(MetricAfterSeconds)), msDur(f.Num(MetricBackendTimeoutMS))),
			"acknowledged lost = streams answered 201 that read back without an event; duplicated = streams that read back with more than one; appended all the same = streams answered 503 that read back with their event",
		}
		for _, c := range kafkaCases(Full) {
			notes = append(notes, fmt.Sprintf("%s: answers other than 201: %s", c.name, f.Str(c.name+".answers")))
		}
		return notes
	},
}

// esKindsText is the 503s by kind of the metrics under prefix p.
func esKindsText(f *Figures, p SidePrefix) string {
	return fmt.Sprintf("%d not_recorded, %d unknown, %d shed, %d without a kind",
		f.Int(p.Of(Metric503NotRecorded)), f.Int(p.Of(Metric503Unknown)), f.Int(p.Of(Metric503Shed)), f.Int(p.Of(Metric503WithoutKind)))
}

func runKafkaEventstoreRestart(ctx context.Context, env Env, size Size) (Result, error) {
	began := time.Now()
	res := Result{Name: "kafka-eventstore-broker-restart", Metrics: map[driver.Metric]float64{}}
	logf := env.prefixed("kafka-eventstore-broker-restart")
	node, l, cleanup, err := privateKafkaLauncher(ctx, env, "wpe-kafka-es-restart-logs-", logf)
	if err != nil {
		return res, err
	}
	defer cleanup()
	defer func() { _ = l.StopAll(30 * time.Second) }()
	topic := strings.ReplaceAll(uniqueName("exp_kafka_es"), "_", "-")
	port, err := localport.Free()
	if err != nil {
		return res, err
	}
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	if _, err := l.Start(ctx, pairs.KafkaEventStore, port, map[string]string{
		"KAFKA_BROKERS": node.brokers(), "KAFKA_TOPIC": topic,
		"BACKEND_TIMEOUT": kafkaServiceTimeout.String(), "LOG_LEVEL": "warn", "LOG_FORMAT": "text",
	}, 2*time.Minute); err != nil {
		return res, err
	}
	run := kafkaRun{node: node, base: base, topic: topic, size: size, logf: logf}
	for _, c := range kafkaCases(size) {
		o, err := run.runEventstoreCase(ctx, c)
		if err != nil {
			return res, fmt.Errorf("%s: %w", c.name, err)
		}
		res.AckedLost += o.lost
		o.record(&res, SidePrefix(c.name+"."))
	}
	rate, before, hold, after := kafkaLoad(size)
	res.Metrics[MetricRate] = rate
	res.Metrics[MetricBeforeSeconds] = before.Seconds()
	res.Metrics[MetricHoldSeconds] = hold.Seconds()
	res.Metrics[MetricAfterSeconds] = after.Seconds()
	res.Metrics[MetricBackendTimeoutMS] = ms(kafkaServiceTimeout)
	res.setting("kafka_version", kafkaVersion(node.libs))
	res.DurationS = secs(time.Since(began))
	return res, nil
}

// esOutcome is what one case of an event-store restart measured.
type esOutcome struct {
	sent, acked, failed, not503 int
	kinds                       map[string]int
	slowest, downFor, recover   time.Duration
	lost, dup                   int64
	appended503                 int64 // streams answered 503 that hold the event all the same
	codes                       string
}

// record writes o's figures into r under prefix p.
func (o esOutcome) record(r *Result, p SidePrefix) {
	m := r.Metrics
	m[p.Of(MetricSent)] = float64(o.sent)
	m[p.Of(MetricAcked)] = float64(o.acked)
	m[p.Of(MetricFailed)] = float64(o.failed)
	m[p.Of(MetricFailedNot503)] = float64(o.not503)
	m[p.Of(MetricAckedLost)] = float64(o.lost)
	m[p.Of(MetricDuplicated)] = float64(o.dup)
	m[p.Of(Metric503AppendedAnyway)] = float64(o.appended503)
	m[p.Of(MetricSlowestAnswerMS)] = ms(o.slowest)
	m[p.Of(MetricDownSeconds)] = secs(o.downFor)
	m[p.Of(MetricRecoverSeconds)] = recoverS(o.recover)
	esKindMetrics(m, p, o.kinds)
	r.setting(string(p)+"answers", o.codes)
}

// runEventstoreCase runs one case of kafka-eventstore-broker-restart:
// load, stop the broker with c.sig, hold, start, load, then read every
// acknowledged stream.
func (kr kafkaRun) runEventstoreCase(ctx context.Context, c kafkaCase) (esOutcome, error) {
	node, base, topic, logf := kr.node, kr.base, kr.topic, kr.logf
	o := esOutcome{recover: -1}
	if err := crashWaitReady(ctx, base, time.Minute); err != nil {
		return o, err
	}
	rate, before, hold, after := kafkaLoad(kr.size)
	stopLoad := startLoad(ctx, base, esAppendSide, rate)
	defer stopLoad()
	sleep(ctx, before)
	stopAt := time.Now()
	if _, err := node.stop(c.sig, time.Minute); err != nil {
		return o, err
	}
	sleep(ctx, hold)
	if err := node.restart(ctx); err != nil {
		return o, err
	}
	for !node.topicLed(ctx, topic) && ctx.Err() == nil && time.Since(stopAt) < 3*time.Minute {
		time.Sleep(50 * time.Millisecond)
	}
	upAt := time.Now()
	o.downFor = upAt.Sub(stopAt)
	logf("%s: broker back %.1f s after the signal", c.name, o.downFor.Seconds())
	sleep(ctx, after)
	shots := stopLoad()
	if err := ctx.Err(); err != nil {
		return o, err
	}
	o.sent = len(shots)
	fails := countFailures(shots, esAppendSide, upAt)
	o.failed, o.not503, o.recover = fails.failed, fails.not503, fails.recover
	o.kinds, o.slowest = esKinds(shots)
	o.codes = codeCounts(shots, esAppendSide)
	ids := acked(shots, esAppendSide)
	o.acked = len(ids)
	if o.acked == 0 {
		return o, fmt.Errorf("no append was acknowledged (answers: %s)", o.codes)
	}
	var err error
	o.lost, o.dup, err = esCountStreams(ctx, base, ids)
	if err != nil {
		return o, fmt.Errorf("read acknowledged streams: %w", err)
	}
	failedIDs := failed503(shots)
	notAppended, _, err := esCountStreams(ctx, base, failedIDs)
	if err != nil {
		return o, fmt.Errorf("read refused streams: %w", err)
	}
	o.appended503 = int64(len(failedIDs)) - notAppended
	logf("%s: %d of %d acknowledged, %d lost, %d duplicated; answers other than 201: %s", c.name, o.acked, o.sent, o.lost, o.dup, o.codes)
	return o, nil
}

// noKurrentdbRestart is issue 26's item 6 for no-kurrentdb: its private
// Postgres stopped immediately and started 2 s later under an open load
// of appends, with a live SSE subscriber that must receive every
// acknowledged event, once.
func noKurrentdbRestart() Experiment {
	return Experiment{Name: "no-kurrentdb-postgres-restart", Run: runNoKurrentdbRestart, Full: 40 * time.Second, Text: noKurrentdbText}
}

// noKurrentdbText is no-kurrentdb-postgres-restart's prose.
var noKurrentdbText = Text{
	Title:    "no-kurrentdb: Postgres restart with a live subscriber",
	Happens:  "While Postgres is down no-kurrentdb answers appends 503 within BACKEND_TIMEOUT and recovers by itself once Postgres is back; a live SSE subscriber (reconnecting with Last-Event-ID when cut) receives every acknowledged event, once.",
	UserMust: "Retry a 503 with backoff (an append with an expected_version is safe to resend: a second try gets 409 if the first landed); let subscribers reconnect with Last-Event-ID, as EventSource does.",
	Figure: func(f *Figures) string {
		rec := "did not recover"
		if r := f.Num(MetricRecoverSeconds); r >= 0 {
			rec = fmt.Sprintf("first 201 %.2f s after Postgres was back", r)
		}
		return fmt.Sprintf("Postgres down %.1f s (immediate stop), BACKEND_TIMEOUT %s: %d of %d appends acknowledged, %d failed (%d not 503; 503s by kind: %s), %d of the 503s appended all the same; slowest answer %.0f ms; %s; %d acknowledged lost, %d duplicated in their stream; the live subscriber reconnected %d time(s), missed %d acknowledged events and got %d twice",
			f.Num(MetricOutageSeconds), msDur(f.Num(MetricBackendTimeoutMS)), f.Int(MetricAcked), f.Int(MetricSent), f.Int(MetricFailed), f.Int(MetricFailedNot503), esKindsText(f, ""),
			f.Int(Metric503AppendedAnyway), f.Num(MetricSlowestAnswerMS), rec, f.Int(MetricAckedLost), f.Int(MetricDuplicatedInStream),
			f.Int(MetricSubscriberReconnects), f.Int(MetricAckedNotDelivered), f.Int(MetricRedelivered))
	},
	Notes: func(f *Figures) []string {
		return crashNotes(f,
			fmt.Sprintf("open load of single appends, each to a new stream (expected_version \"no_stream\"), at %g/s: %s before the stop, Postgres held down %s, %s after it is back; one SSE subscriber from the beginning, reconnecting with Last-Event-ID",
				f.Num(MetricRate), secondsDur(f.Num(MetricBeforeSeconds)), secondsDur(f.Num(MetricHoldSeconds)), secondsDur(f.Num(MetricAfterSeconds))),
			fmt.Sprintf("answers other than 201: %s", f.Str("answers")),
			"acknowledged lost = streams answered 201 that read back without an event (or that the subscriber never received within 30 s); duplicated = streams with more than one event; got twice = events the subscriber received more than once; appended all the same = streams answered 503 that read back with their event")
	},
}

func runNoKurrentdbRestart(ctx context.Context, env Env, size Size) (Result, error) {
	began := time.Now()
	load := restartLoad{rate: 20, pre: 2 * time.Second, post: 4 * time.Second}
	if size == Full {
		load = restartLoad{rate: 100, pre: 4 * time.Second, post: 8 * time.Second}
	}
	res := Result{Name: "no-kurrentdb-postgres-restart", Metrics: map[driver.Metric]float64{
		MetricRate: load.rate, MetricBeforeSeconds: load.pre.Seconds(), MetricHoldSeconds: restartOutage.Seconds(), MetricAfterSeconds: load.post.Seconds(), MetricBackendTimeoutMS: ms(restartBackendTimeout)}}
	rig, err := newCrashRig(ctx, env, nil)
	if err != nil {
		return res, err
	}
	defer rig.Close()
	base, err := rig.start(ctx, pairs.NoKurrentDB, map[string]string{"BACKEND_TIMEOUT": restartBackendTimeout.String()})
	if err != nil {
		return res, err
	}
	sctx, stopSub := context.WithCancel(ctx)
	defer stopSub()
	sub := newSSECounter()
	var subWG sync.WaitGroup
	subWG.Go(func() { sub.run(sctx, base) })
	if err := sub.waitCaughtUp(ctx, 30*time.Second); err != nil {
		return res, err
	}
	seen, err := nkRestartUnderLoad(ctx, rig, base, load, res.Metrics)
	if err != nil {
		return res, err
	}
	// Settle: the subscriber has every acknowledged stream, or 30 s
	// passed.
	deadline := time.Now().Add(30 * time.Second)
	for sub.missing(seen.ids) > 0 && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(200 * time.Millisecond)
	}
	stopSub()
	subWG.Wait()
	if err := nkMeasure(ctx, &res, base, seen, sub); err != nil {
		return res, err
	}
	crashSettings(&res, rig.cluster)
	res.DurationS = secs(time.Since(began))
	return res, nil
}

// nkShots is what the load of appends across the restart saw: its
// shots, the streams acknowledged among them (ids) and when Postgres was
// back.
type nkShots struct {
	// shots are the appends and their answers, in the order sent.
	shots []shot
	// ids are the streams of the appends answered 201.
	ids []string
	// upAt is when Postgres was back.
	upAt time.Time
}

// nkRestartUnderLoad runs load (appends) on base, stops Postgres
// immediately after load.pre, starts it restartOutage later and loads
// load.post more; it returns what the load saw (at least one append
// acknowledged), and records the outage's length in m.
func nkRestartUnderLoad(ctx context.Context, rig *crashRig, base string, load restartLoad, m map[driver.Metric]float64) (nkShots, error) {
	rate, pre, post := load.rate, load.pre, load.post
	side := pgSides[pairs.NoKurrentDB]
	stopLoad := startLoad(ctx, base, side, rate)
	defer stopLoad()
	sleep(ctx, pre)
	stopAt := time.Now()
	if err := rig.cluster.Stop(ctx, "immediate"); err != nil {
		return nkShots{}, err
	}
	sleep(ctx, restartOutage)
	if err := rig.cluster.Start(ctx); err != nil {
		return nkShots{}, err
	}
	upAt := time.Now()
	m[MetricOutageSeconds] = secs(upAt.Sub(stopAt))
	sleep(ctx, post)
	shots := stopLoad()
	if err := ctx.Err(); err != nil {
		return nkShots{}, err
	}
	ids := acked(shots, side)
	if len(ids) == 0 {
		return nkShots{}, fmt.Errorf("no append was acknowledged (answers: %s)", codeCounts(shots, side))
	}
	return nkShots{shots: shots, ids: ids, upAt: upAt}, nil
}

// nkMeasure reads back every acknowledged stream (seen.ids) and every
// stream answered 503, and records in res what the answers, the streams
// and the subscriber say.
func nkMeasure(ctx context.Context, res *Result, base string, seen nkShots, sub *sseCounter) error {
	shots, ids, upAt := seen.shots, seen.ids, seen.upAt
	side := pgSides[pairs.NoKurrentDB]
	undelivered := sub.missing(ids)
	lost, dup, err := esCountStreams(ctx, base, ids)
	if err != nil {
		return fmt.Errorf("read acknowledged streams: %w", err)
	}
	failedIDs := failed503(shots)
	notAppended, _, err := esCountStreams(ctx, base, failedIDs)
	if err != nil {
		return fmt.Errorf("read refused streams: %w", err)
	}
	fails := countFailures(shots, side, upAt)
	kinds, slowest := esKinds(shots)
	m := res.Metrics
	m[MetricSent] = float64(len(shots))
	m[MetricAcked] = float64(len(ids))
	m[MetricFailed] = float64(fails.failed)
	m[MetricFailedNot503] = float64(fails.not503)
	m[MetricSlowestAnswerMS] = ms(slowest)
	m[MetricRecoverSeconds] = recoverS(fails.recover)
	m[MetricAckedLost] = float64(lost)
	m[MetricDuplicatedInStream] = float64(dup)
	m[MetricAckedNotDelivered] = float64(undelivered)
	m[MetricRedelivered] = float64(sub.redelivered())
	m[Metric503AppendedAnyway] = float64(int64(len(failedIDs)) - notAppended)
	m[MetricSubscriberReconnects] = float64(sub.reconnects.Load())
	esKindMetrics(m, "", kinds)
	res.setting("answers", codeCounts(shots, side))
	res.AckedLost = lost + undelivered
	return nil
}

// sseCounter is a live /subscribe client: it counts the events it
// receives per stream and resumes after a disconnect from the last id.
type sseCounter struct {
	mu         sync.Mutex
	seen       map[string]int
	lastID     string
	caughtUp   chan struct{}
	once       sync.Once
	reconnects atomic.Int64
}

func newSSECounter() *sseCounter {
	return &sseCounter{seen: map[string]int{}, caughtUp: make(chan struct{})}
}

// run subscribes to base until ctx ends, reconnecting every 200 ms
// after a failure.
func (c *sseCounter) run(ctx context.Context, base string) {
	for first := true; ctx.Err() == nil; first = false {
		if !first {
			c.reconnects.Add(1)
			sleep(ctx, 200*time.Millisecond)
		}
		_ = c.once1(ctx, base)
	}
}

// once1 is one subscription: it reads events until the stream ends.
func (c *sseCounter) once1(ctx context.Context, base string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/subscribe", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	c.mu.Lock()
	if c.lastID != "" {
		req.Header.Set("Last-Event-ID", c.lastID)
	}
	c.mu.Unlock()
	// No client timeout: the subscription is long-lived; ctx ends it, and
	// the server's heartbeats and write deadlines bound a dead one.
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("subscribe: %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var event, id, data string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			c.dispatch(event, id, data)
			event, id, data = "", "", ""
		case strings.HasPrefix(line, "event:"):
			event = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "id:"):
			id = strings.TrimSpace(strings.TrimPrefix(line, "id:"))
		case strings.HasPrefix(line, "data:"):
			data += strings.TrimSpace(strings.TrimPrefix(line, "data:"))
		}
	}
	return sc.Err()
}

func (c *sseCounter) dispatch(event, id, data string) {
	switch event {
	case "caught-up":
		c.once.Do(func() { close(c.caughtUp) })
	case "event":
		var e struct {
			Stream string `json:"stream"`
		}
		if json.Unmarshal([]byte(data), &e) != nil {
			return
		}
		c.mu.Lock()
		c.seen[e.Stream]++
		if id != "" {
			c.lastID = id
		}
		c.mu.Unlock()
	}
}

// waitCaughtUp waits for the first caught-up event.
func (c *sseCounter) waitCaughtUp(ctx context.Context, timeout time.Duration) error {
	select {
	case <-c.caughtUp:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(timeout):
		return fmt.Errorf("the subscriber was not caught up after %s", timeout)
	}
}

// missing counts the streams of ids the subscriber has not received.
func (c *sseCounter) missing(ids []string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var n int64
	for _, id := range ids {
		if c.seen[id] == 0 {
			n++
		}
	}
	return n
}

// redelivered counts the events received more than once (each stream
// holds one event).
func (c *sseCounter) redelivered() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var n int64
	for _, k := range c.seen {
		if k > 1 {
			n += int64(k - 1)
		}
	}
	return n
}
