package eventstore

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// CleanupCommand is the cleanup scenario's command and results-file
// suffix: `go run ./loadtests eventstore-cleanup`.
const CleanupCommand = "eventstore-cleanup"

// CleanupOptions are eventstore-cleanup's settings.
type CleanupOptions struct {
	Options
	// StreamEvents is the length of the stream deleted (the customer's).
	StreamEvents int `json:"stream_events"`
	// Batch is the rows one DELETE removes.
	Batch int `json:"batch"`
	// Others is how many other streams the Kafka topics hold beside the
	// customer's (each gets Others events per MaxAppend of the
	// customer's), to show what retention and compaction do to them.
	Others int `json:"others"`
	// Window is the baseline: concurrent appends and the live subscriber
	// are measured this long before the delete starts.
	Window time.Duration `json:"window"`
	// KafkaWait bounds the wait for Kafka to return the space; zero: the
	// broker's log.retention.check.interval.ms plus 30 s.
	KafkaWait time.Duration `json:"kafka_wait"`
	// KafkaLogDir is the broker's log directory on this machine; empty:
	// the broker's log.dirs, asked with DescribeConfigs.
	KafkaLogDir string `json:"kafka_log_dir,omitempty"`
	// SkipKafka and SkipPostgres leave a side out (its rows say not run).
	SkipKafka    bool `json:"skip_kafka,omitempty"`
	SkipPostgres bool `json:"skip_postgres,omitempty"`
}

// DefaultCleanupOptions delete a stream of 100,000 events in batches of
// 10,000, with a 3 s baseline.
func DefaultCleanupOptions() CleanupOptions {
	return CleanupOptions{Options: DefaultOptions(), StreamEvents: 100000, Batch: 10000, Others: 10, Window: 3 * time.Second}
}

// Register adds eventstore-cleanup's flags to fs.
func (o *CleanupOptions) Register(fs *flag.FlagSet) {
	o.registerStores(fs)
	fs.IntVar(&o.StreamEvents, "events", o.StreamEvents, "length of the stream deleted")
	fs.IntVar(&o.Batch, "batch", o.Batch, "rows per DELETE on Postgres")
	fs.IntVar(&o.Others, "others", o.Others, "other streams in the Kafka topics")
	fs.DurationVar(&o.Window, "window", o.Window, "baseline of the concurrent appends and the live subscriber, before the delete")
	fs.DurationVar(&o.KafkaWait, "kafka-wait", o.KafkaWait, "bound of the wait for Kafka to return the space (0: the broker's log.retention.check.interval.ms + 30s)")
	fs.StringVar(&o.KafkaLogDir, "kafka-log-dir", o.KafkaLogDir, "the broker's log directory on this machine (empty: its log.dirs)")
	fs.BoolVar(&o.SkipKafka, "skip-kafka", o.SkipKafka, "leave the Kafka policies out")
	fs.BoolVar(&o.SkipPostgres, "skip-postgres", o.SkipPostgres, "leave the Postgres delete out")
}

// Validate names the first setting that cannot run.
func (o CleanupOptions) Validate() error {
	switch {
	case o.StreamEvents < 2:
		return fmt.Errorf("events: %d, want at least 2", o.StreamEvents)
	case o.Batch < 1:
		return fmt.Errorf("batch: %d, want at least 1", o.Batch)
	case o.Others < 1:
		return fmt.Errorf("others: %d, want at least 1", o.Others)
	case o.Window <= 0:
		return errors.New("window: want a positive duration")
	case o.KafkaWait < 0:
		return errors.New("kafka-wait: want zero (the broker's interval) or a positive duration")
	}
	return nil
}

// Cleanup runs the cleanup scenario and writes its results file, whose
// path it returns: the Postgres side's batched delete of one stream, and
// Kafka's retention and compaction on topics of their own holding the
// same stream, the Kafka policies running while Postgres deletes (they
// mostly wait for the broker).
func Cleanup(ctx context.Context, o CleanupOptions, log io.Writer) (string, error) {
	if err := o.Validate(); err != nil {
		return "", err
	}
	run, engines := startRun(ctx, CleanupCommand, o.Options, o, log)
	id := runID()
	var kafkaPoints []driver.Point
	var wg sync.WaitGroup
	if !o.SkipKafka {
		wg.Go(func() { kafkaPoints = kafkaCleanup(ctx, o, id, log) })
	}
	var pg *Engine
	for _, e := range engines {
		if e.Backend == "postgres" {
			pg = e
		}
	}
	if !o.SkipPostgres {
		p := driver.Point{Scenario: CleanupPGPoint, Name: SizeName(o.StreamEvents), Sides: []string{pairs.NoKurrentDB}}
		_ = driver.RunPoint(ctx, &p, 1, func(ctx context.Context, _ string, _ int) (*driver.SideResult, error) {
			if pg == nil {
				return nil, errors.New("not measured here: no Postgres side among -targets")
			}
			if !pg.Up {
				return nil, notMeasured(pg)
			}
			m := map[driver.Metric]float64{}
			err := pgCleanup(ctx, o, pg, "customer-"+id, cleanupOut{m: m, log: log})
			return &driver.SideResult{Metrics: m}, err
		})
		run.Points = append(run.Points, p)
	}
	wg.Wait()
	run.Points = append(run.Points, kafkaPoints...)
	return finishRun(run, o.Out, ctx.Err())
}

// Phases of the concurrent appends and the live subscriber.
const (
	phaseBaseline = "baseline"
	phaseDelete   = "delete"
	phaseVacuum   = "vacuum"
)

// CleanupPhases are the phases of the Postgres cleanup, in order: the
// parts of its live-load metrics' keys (CleanupMetric).
var CleanupPhases = []string{phaseBaseline, phaseDelete, phaseVacuum}

// liveLoad appends one event at a time to a stream of its own, every
// 10 ms, and receives them on a subscriber opened before: per phase, each
// append's latency and each event's delivery latency (receive time minus
// the time the append was sent).
type liveLoad struct {
	mu    sync.Mutex
	phase string
	// sentAt, sentIn and answered are indexed by the append's number i
	// (its event's data.i): when it was sent, in which phase, and
	// whether it was answered 201.
	sentAt   []time.Time
	sentIn   []string
	answered []bool
	// gotAt is when the subscriber first delivered event i. An append
	// cut off by the stop may still have been committed and delivered:
	// it is in gotAt but not answered, and counts on neither side.
	gotAt   map[int]time.Time
	appends map[string][]float64
	// failed counts the appends that were not answered 201 while the
	// load ran.
	failed int
}

// sent counts the appends answered 201; call with mu held.
func (l *liveLoad) sent() int {
	n := 0
	for _, ok := range l.answered {
		if ok {
			n++
		}
	}
	return n
}

// received counts the answered appends the subscriber delivered; call
// with mu held.
func (l *liveLoad) received() int {
	n := 0
	for i := range l.gotAt {
		if l.answered[i] {
			n++
		}
	}
	return n
}

func (l *liveLoad) setPhase(p string) {
	l.mu.Lock()
	l.phase = p
	l.mu.Unlock()
}

// runLiveLoad starts the appender and the subscriber; stop ends the
// appender, waits up to 10 s for the subscriber to receive what was
// sent, and ends it.
func runLiveLoad(ctx context.Context, e *Engine, stream string) (*liveLoad, func(), error) {
	l := &liveLoad{phase: phaseBaseline, appends: map[string][]float64{}, gotAt: map[int]time.Time{}}
	status, marker, err := appendEvents(ctx, e.URL, stream, "any", event{Type: "TankRegistered", Data: map[string]any{"capacity_liters": 1}})
	if err != nil || status != http.StatusCreated {
		return nil, nil, fmt.Errorf("live stream's marker append: %d %v %s", status, err, marker.Error)
	}
	sctx, cancelSub := context.WithCancel(ctx)
	ch, err := subscribe(sctx, e.URL, marker.Position)
	if err != nil {
		cancelSub()
		return nil, nil, err
	}
	for m := range ch {
		if m.Event == "caught-up" {
			break
		}
	}
	got := make(chan struct{})
	go l.receive(ch, stream, got)
	actx, stopAppends := context.WithCancel(ctx)
	appended := make(chan struct{})
	go l.appendLoop(actx, e, stream, appended)
	stop := func() {
		stopAppends()
		<-appended
		// Wait, up to 10 s, for the subscriber to receive every append
		// that was answered.
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
			l.mu.Lock()
			done := l.received() >= l.sent()
			l.mu.Unlock()
			if done {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		cancelSub()
		<-got
	}
	return l, stop, nil
}

// receive counts the live stream's events of ch as delivered, with their
// latency from the append, and closes got when ch ends.
func (l *liveLoad) receive(ch <-chan sseMsg, stream string, got chan<- struct{}) {
	defer close(got)
	for m := range ch {
		if m.Event != "event" {
			continue
		}
		var ev struct {
			Stream string `json:"stream"`
			Data   struct {
				I *int `json:"i"`
			} `json:"data"`
		}
		if json.Unmarshal([]byte(m.Data), &ev) != nil || ev.Stream != stream || ev.Data.I == nil {
			continue
		}
		l.mu.Lock()
		if i := *ev.Data.I; i >= 0 && i < len(l.sentAt) {
			if _, dup := l.gotAt[i]; !dup {
				l.gotAt[i] = m.At
			}
		}
		l.mu.Unlock()
	}
}

// appendLoop appends to the live stream every 10 ms until ctx ends,
// recording each answered append's latency in its phase, and closes
// appended when it stops.
func (l *liveLoad) appendLoop(actx context.Context, e *Engine, stream string, appended chan<- struct{}) {
	defer close(appended)
	for i := 0; actx.Err() == nil; i++ {
		l.mu.Lock()
		l.sentAt = append(l.sentAt, time.Now())
		l.sentIn = append(l.sentIn, l.phase)
		l.answered = append(l.answered, false)
		phase := l.phase
		l.mu.Unlock()
		t0 := time.Now()
		status, _, err := appendEvents(actx, e.URL, stream, "any", event{Type: "OxygenAdded", Data: map[string]any{"liters": 1, "i": i}})
		l.mu.Lock()
		if err != nil || status != http.StatusCreated {
			if actx.Err() == nil {
				l.failed++
			}
		} else {
			l.answered[i] = true
			l.appends[phase] = append(l.appends[phase], durMS(time.Since(t0)))
		}
		l.mu.Unlock()
		select {
		case <-actx.Done():
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// durMS is d in milliseconds.
func durMS(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// record writes the live load's figures into m: per phase, appends'
// p50/p99/max and deliveries' p50/max (ms), and the totals sent and
// received.
func (l *liveLoad) record(m map[driver.Metric]float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	deliver := map[string][]float64{}
	for i, at := range l.gotAt {
		if l.answered[i] {
			deliver[l.sentIn[i]] = append(deliver[l.sentIn[i]], durMS(at.Sub(l.sentAt[i])))
		}
	}
	for _, ph := range CleanupPhases {
		if a := l.appends[ph]; len(a) > 0 {
			slices.Sort(a)
			m[CleanupMetric(AppendOf, ph, CleanupCount)] = float64(len(a))
			m[CleanupMetric(AppendOf, ph, driver.SuffixP50)] = round2(sortedQuantile(a, 0.5))
			m[CleanupMetric(AppendOf, ph, driver.SuffixP99)] = round2(sortedQuantile(a, 0.99))
			m[CleanupMetric(AppendOf, ph, driver.SuffixMax)] = round2(a[len(a)-1])
		}
		if d := deliver[ph]; len(d) > 0 {
			slices.Sort(d)
			m[CleanupMetric(DeliverOf, ph, driver.SuffixP50)] = round2(sortedQuantile(d, 0.5))
			m[CleanupMetric(DeliverOf, ph, driver.SuffixMax)] = round2(d[len(d)-1])
		}
	}
	m[MetricLiveSent], m[MetricLiveReceived], m[MetricLiveFailed] = float64(l.sent()), float64(l.received()), float64(l.failed)
}

// sortedQuantile is the q-quantile (nearest rank) of sorted xs.
func sortedQuantile(xs []float64, q float64) float64 {
	return xs[min(len(xs)-1, int(q*float64(len(xs))))]
}

// pgCleanup writes stream (o.StreamEvents events) through the service, then,
// with the live load running, deletes its rows in batches of o.Batch by
// primary-key range and vacuums the table, measuring time, WAL and the
// table's size at each step, into out.
func pgCleanup(ctx context.Context, o CleanupOptions, e *Engine, stream string, out cleanupOut) error {
	m, log := out.m, out.log
	if o.DatabaseURL == "" {
		return errors.New("no Postgres URL (-database-url): the delete runs in SQL")
	}
	fm := map[driver.Metric]float64{}
	if err := (engineStream{e: e, stream: stream}).fill(ctx, o.StreamEvents, o.StreamEvents+1, fm); err != nil {
		return err
	}
	m[MetricFillSeconds] = fm[MetricFillSeconds]
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	conn, err := pgx.Connect(cctx, o.DatabaseURL)
	cancel()
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	t := cleanupTable{conn: conn, table: pgx.Identifier{o.Schema, "events"}.Sanitize()}
	var rows int64
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM `+t.table+` WHERE stream_id = $1`, stream).Scan(&rows); err != nil {
		return err
	}
	if rows != int64(o.StreamEvents) {
		return fmt.Errorf("%s holds %d rows after the fill of %d events", stream, rows, o.StreamEvents)
	}
	live, stop, err := runLiveLoad(ctx, e, stream+"-live")
	if err != nil {
		return err
	}
	stopped := false
	defer func() {
		if !stopped {
			stop()
		}
	}()
	if err := sleepOrDone(ctx, o.Window); err != nil {
		return err
	}
	deleted, err := t.deleteAndVacuum(ctx, o, stream, live, m)
	if err != nil {
		return err
	}
	stop()
	stopped = true
	live.record(m)
	fmt.Fprintf(log, "eventstore-cleanup postgres: deleted %d rows in %.0f batches in %.2f s (%.1f MB of WAL); table %.1f → %.1f MB after VACUUM\n",
		deleted, m[MetricBatches], m[MetricDeleteSeconds], m[MetricDeleteWALMB], m[MetricSizeBeforeMB], m[MetricSizeAfterVacuumMB])
	return pgCleanupVerdict(ctx, o, e.URL+"/streams/"+stream, deleted, m)
}

// cleanupTable is the Postgres side's events table, on one connection.
type cleanupTable struct {
	conn  *pgx.Conn
	table string
}

// size is the table's total size in bytes.
func (t cleanupTable) size(ctx context.Context) (int64, error) {
	var n int64
	err := t.conn.QueryRow(ctx, `SELECT pg_total_relation_size($1::regclass)`, t.table).Scan(&n)
	return n, err
}

// lsn is the server's current WAL position.
func (t cleanupTable) lsn(ctx context.Context) (string, error) {
	var s string
	err := t.conn.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&s)
	return s, err
}

// walSince is the WAL written since from, in bytes.
func (t cleanupTable) walSince(ctx context.Context, from string) (float64, error) {
	var n float64
	err := t.conn.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::float8`, from).Scan(&n)
	return n, err
}

// deleteAndVacuum deletes stream in batches of o.Batch versions, then
// vacuums the table, the live load told each phase, and records in m the
// seconds, WAL and sizes of both and the rows and batches deleted; it
// returns the rows deleted.
func (t cleanupTable) deleteAndVacuum(ctx context.Context, o CleanupOptions, stream string, live *liveLoad, m map[driver.Metric]float64) (int64, error) {
	before, err := t.size(ctx)
	if err != nil {
		return 0, err
	}
	batches := 0
	var deleted int64
	wal, afterDelete, err := t.measure(ctx, live, cleanupPhase{name: phaseDelete, seconds: MetricDeleteSeconds, work: func() error {
		for lo := int64(0); lo < int64(o.StreamEvents); lo += int64(o.Batch) {
			tag, err := t.conn.Exec(ctx, `DELETE FROM `+t.table+` WHERE stream_id = $1 AND version >= $2 AND version < $3`, stream, lo, lo+int64(o.Batch))
			if err != nil {
				return fmt.Errorf("delete batch %d: %w", batches+1, err)
			}
			deleted += tag.RowsAffected()
			batches++
		}
		return nil
	}}, m)
	if err != nil {
		return 0, err
	}
	vwal, afterVacuum, err := t.measure(ctx, live, cleanupPhase{name: phaseVacuum, seconds: MetricVacuumSeconds, work: func() error {
		if _, err := t.conn.Exec(ctx, `VACUUM `+t.table); err != nil {
			return fmt.Errorf("vacuum: %w", err)
		}
		return nil
	}}, m)
	if err != nil {
		return 0, err
	}
	m[MetricEventsDeleted], m[MetricBatches] = float64(deleted), float64(batches)
	m[MetricDeleteWALMB], m[MetricVacuumWALMB] = bytesMB(int64(wal)), bytesMB(int64(vwal))
	m[MetricSizeBeforeMB], m[MetricSizeAfterDeleteMB], m[MetricSizeAfterVacuumMB] = bytesMB(before), bytesMB(afterDelete), bytesMB(afterVacuum)
	m[MetricReturnedMB] = bytesMB(before - afterVacuum)
	return deleted, nil
}

// cleanupPhase is one timed step of deleteAndVacuum: the live load's
// phase name, the metric of its seconds, and its work.
type cleanupPhase struct {
	name    string
	seconds driver.Metric
	work    func() error
}

// measure tells live that phase p began, runs its work and records its
// seconds in m; it returns the WAL written since the phase began, in
// bytes, and the table's size after it.
func (t cleanupTable) measure(ctx context.Context, live *liveLoad, p cleanupPhase, m map[driver.Metric]float64) (wal float64, size int64, err error) {
	live.setPhase(p.name)
	from, err := t.lsn(ctx)
	if err != nil {
		return 0, 0, err
	}
	t0 := time.Now()
	if err := p.work(); err != nil {
		return 0, 0, err
	}
	m[p.seconds] = round2(time.Since(t0).Seconds())
	if wal, err = t.walSince(ctx, from); err != nil {
		return 0, 0, err
	}
	if size, err = t.size(ctx); err != nil {
		return 0, 0, err
	}
	return wal, size, nil
}

// cleanupOut is where a cleanup records: its figures (m) and its log's
// lines.
type cleanupOut struct {
	m   map[driver.Metric]float64
	log io.Writer
}

// pgCleanupVerdict checks the delete: every row removed (deleted), the
// service reading nothing of the stream at streamURL, and the live load
// undisturbed (m).
func pgCleanupVerdict(ctx context.Context, o CleanupOptions, streamURL string, deleted int64, m map[driver.Metric]float64) error {
	var r readResult
	if status, err := getJSON(ctx, streamURL+"?limit=1", &r); err != nil || status != http.StatusOK {
		return fmt.Errorf("read of the deleted stream: %d %v", status, err)
	}
	var why []string
	if deleted != int64(o.StreamEvents) {
		why = append(why, fmt.Sprintf("the delete removed %d rows of %d", deleted, o.StreamEvents))
	}
	if len(r.Events) != 0 || r.LastVersion != nil {
		why = append(why, fmt.Sprintf("the service still reads %d events of the deleted stream", len(r.Events)))
	}
	if m[MetricLiveReceived] != m[MetricLiveSent] {
		why = append(why, fmt.Sprintf("the live subscriber received %.0f of %.0f appends", m[MetricLiveReceived], m[MetricLiveSent]))
	}
	if m[MetricLiveFailed] > driver.FailShare*(m[MetricLiveSent]+m[MetricLiveFailed]) {
		why = append(why, fmt.Sprintf("%.0f concurrent appends failed", m[MetricLiveFailed]))
	}
	if len(why) > 0 {
		return errors.New(strings.Join(why, "; "))
	}
	return nil
}

func sleepOrDone(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
