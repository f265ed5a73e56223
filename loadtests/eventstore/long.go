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
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/scenario"
)

// LongCommand is the long-stream scenario's command and results-file
// suffix: `go run ./loadtests eventstore-long`.
const LongCommand = "eventstore-long"

// MaxAppend is the contract's largest append (events per request).
const MaxAppend = 1000

// LongOptions are eventstore-long's settings: the bench's engines and
// stores (Options) and the stream sizes.
type LongOptions struct {
	Options
	// Sizes are the stream lengths, in events (default 100,000; the
	// issue's 1,000,000 is -sizes 100000,1000000, outside `make results`'
	// time budget).
	Sizes []int `json:"sizes"`
	// SnapshotEvery is the snapshot interval in events: the fill appends
	// a snapshot to <stream>-snapshot after every SnapshotEvery events,
	// up to half an interval before the end, so that the fold from the
	// snapshot reads a tail of between a half and a whole interval.
	SnapshotEvery int `json:"snapshot_every"`
	// Loads is how many times each load runs per engine (the median is
	// reported).
	Loads int `json:"loads"`
	// Page is the limit of each read (at most the contract's 10,000).
	Page int `json:"page"`
	// FoldTimeout bounds one fold (all its pages).
	FoldTimeout time.Duration `json:"fold_timeout"`
}

// DefaultLongOptions are eventstore-long's defaults: one stream of
// 100,000 events per engine, a snapshot every 1,000, three reads of
// each fold, pages of 10,000.
func DefaultLongOptions() LongOptions {
	return LongOptions{Options: DefaultOptions(), Sizes: []int{100000}, SnapshotEvery: 1000, Loads: 3, Page: 10000, FoldTimeout: 2 * time.Minute}
}

// sizesFlag is -sizes: comma-separated positive integers.
type sizesFlag struct{ p *[]int }

func (f sizesFlag) String() string {
	if f.p == nil {
		return ""
	}
	var s []string
	for _, n := range *f.p {
		s = append(s, strconv.Itoa(n))
	}
	return strings.Join(s, ",")
}

func (f sizesFlag) Set(v string) error {
	var out []int
	for _, s := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 2 {
			return fmt.Errorf("sizes: %q is not a stream length of at least 2 events", s)
		}
		out = append(out, n)
	}
	*f.p = out
	return nil
}

// Register adds eventstore-long's flags to fs.
func (o *LongOptions) Register(fs *flag.FlagSet) {
	o.registerStores(fs)
	fs.Var(sizesFlag{&o.Sizes}, "sizes", "stream lengths in events, comma-separated (1000000 adds minutes: see docs/eventstore.md)")
	fs.IntVar(&o.SnapshotEvery, "snapshot-every", o.SnapshotEvery, "append a snapshot to <stream>-snapshot every this many events")
	fs.IntVar(&o.Loads, "loads", o.Loads, "loads of the aggregate per engine and way (the median is reported)")
	fs.IntVar(&o.Page, "page", o.Page, "events per read (limit; at most 10000)")
	fs.DurationVar(&o.FoldTimeout, "fold-timeout", o.FoldTimeout, "bound of one fold, all its pages")
}

// registerStores adds the flags that locate the engines and their stores.
func (o *Options) registerStores(fs *flag.FlagSet) {
	fs.StringVar(&o.Targets, "targets", o.Targets, "name=url of each engine")
	fs.StringVar(&o.Out, "out", o.Out, "directory of the JSON results")
	fs.StringVar(&o.DatabaseURL, "database-url", o.DatabaseURL, "Postgres of the Postgres side (its events table's size and statistics)")
	fs.StringVar(&o.Schema, "schema", o.Schema, "the Postgres side's schema (its events table's)")
	fs.StringVar(&o.KafkaBrokers, "kafka-brokers", o.KafkaBrokers, "Kafka brokers")
	fs.StringVar(&o.KafkaTopic, "kafka-topic", o.KafkaTopic, "the Kafka side's topic (KAFKA_TOPIC), for its size at the start")
	fs.StringVar(&o.KeyedTopic, "kafka-keyed-topic", o.KeyedTopic, "the keyed Kafka side's topic, for its size at the start")
	fs.IntVar(&o.KeyedPartitions, "kafka-keyed-partitions", o.KeyedPartitions, "the keyed Kafka side's KAFKA_PARTITIONS, for its row's label")
}

// Validate names the first setting that cannot run.
func (o LongOptions) Validate() error {
	switch {
	case len(o.Sizes) == 0:
		return errors.New("sizes: at least one stream length")
	case o.SnapshotEvery < 2:
		return fmt.Errorf("snapshot-every: %d, want at least 2", o.SnapshotEvery)
	case slices.ContainsFunc(o.Sizes, func(n int) bool { return n <= o.SnapshotEvery }):
		return fmt.Errorf("sizes: every stream must be longer than snapshot-every (%d), or it has no snapshot", o.SnapshotEvery)
	case o.Loads < 1:
		return fmt.Errorf("loads: %d, want at least 1", o.Loads)
	case o.Page < 1 || o.Page > 10000:
		return fmt.Errorf("page: %d, want 1 to 10000", o.Page)
	case o.FoldTimeout <= 0:
		return errors.New("fold-timeout: want a positive duration")
	}
	return nil
}

// SizeName names a point of stream length n: "100000 events".
func SizeName(n int) string { return strconv.Itoa(n) + " events" }

// probeEngines lists o.Targets' engines and probes each; those that do
// not answer are reported to log and measured as "not measured here".
func probeEngines(ctx context.Context, o Options, log io.Writer) []*Engine {
	engines := defaultEngines(o.Targets, o.KeyedPartitions)
	for _, e := range engines {
		probe(ctx, e)
		if !e.Up {
			fmt.Fprintf(log, "%s (%s): not measured here: %s\n", e.Name, e.URL, e.Why)
		}
	}
	return engines
}

// startRun probes o's engines (probeEngines) and opens command's run:
// its settings the engines and the command's options, its start the
// engines' stores (recordStart).
func startRun(ctx context.Context, command string, o Options, options any, log io.Writer) (*driver.Run, []*Engine) {
	engines := probeEngines(ctx, o, log)
	run := driver.NewRun(command, nil, time.Now())
	run.Settings["engines"] = engines
	run.Settings["options"] = options
	recordStart(ctx, run, o, engines)
	return run, engines
}

// finishRun stamps run's end, marks it aborted by abort when abort is
// not nil, and writes it to out; it returns the file's path and abort
// joined with the write's error.
func finishRun(run *driver.Run, out string, abort error) (string, error) {
	run.FinishedAt = time.Now().UTC()
	if abort != nil {
		run.Aborted = abort.Error()
	}
	path, err := driver.WriteRun(out, run)
	return path, errors.Join(abort, err)
}

// tankEvent is the j-th event of a long stream: a registration first,
// then OxygenAdded of 1 liter, every fifth an OxygenConsumed of 2.
func tankEvent(j int) event {
	switch {
	case j == 0:
		return event{Type: "TankRegistered", Data: map[string]any{"capacity_liters": 1e9}}
	case j%5 == 0:
		return event{Type: "OxygenConsumed", Data: map[string]any{"liters": 2, "n": j}}
	}
	return event{Type: "OxygenAdded", Data: map[string]any{"liters": 1, "n": j}}
}

// tank is the aggregate the bench folds: a count and a balance.
type tank struct {
	Events  int64   `json:"events"`
	Version int64   `json:"version"`
	Balance float64 `json:"balance_liters"`
}

// apply folds one event.
func (t *tank) apply(typ string, liters float64) {
	t.Events++
	switch typ {
	case "OxygenAdded":
		t.Balance += liters
	case "OxygenConsumed":
		t.Balance -= liters
	}
}

// expectedTank is the fold of a long stream's first n events.
func expectedTank(n int) tank {
	var t tank
	for j := range n {
		e := tankEvent(j)
		l, _ := e.Data.(map[string]any)["liters"].(int)
		t.apply(e.Type, float64(l))
		t.Version = int64(j)
	}
	return t
}

// Long runs the long-stream scenario against o's engines and writes its
// results file, whose path it returns: per size, the fill (with
// snapshots), the full fold through paged reads, the service's own fold,
// and the fold from the latest snapshot.
func Long(ctx context.Context, o LongOptions, log io.Writer) (string, error) {
	if err := o.Validate(); err != nil {
		return "", err
	}
	run, engines := startRun(ctx, LongCommand, o.Options, o, log)
	pids, pidErrs := map[string]string{}, map[string]error{}
	for _, e := range engines {
		if e.Up {
			pids[e.Name], pidErrs[e.Name] = servicePID(e.URL)
		}
	}
	notes := map[string]bool{}
	note := func(side string, why []string) {
		for _, w := range why {
			if s := side + ": " + w; !notes[s] {
				notes[s] = true
				run.Note("%s", s)
			}
		}
	}
	lr := longRun{run: run, o: o, engines: engines, tag: runID(), pids: pids, pidErrs: pidErrs, note: note, log: log}
	var err error
	for _, n := range o.Sizes {
		if err = lr.size(ctx, n); err != nil {
			break
		}
	}
	return finishRun(run, o.Out, err)
}

// longRun is one run of the long-stream scenario: where it records, its
// options and engines, and what every size's points share.
type longRun struct {
	run     *driver.Run
	o       LongOptions
	engines []*Engine
	// tag names the run's streams.
	tag string
	// pids and pidErrs are each engine's service process (by name), or
	// why it was not found: its memory is measured from it.
	pids    map[string]string
	pidErrs map[string]error
	// note records, once, what a side could not measure.
	note func(side string, why []string)
	// log gets the fills' lines.
	log io.Writer
}

// size runs one stream size's points.
func (lr longRun) size(ctx context.Context, n int) error {
	run, o, engines := lr.run, lr.o, lr.engines
	stream := fmt.Sprintf("tank-long-%s-%d", lr.tag, n)
	filled, err := lr.fill(ctx, stream, n)
	if err != nil {
		return err
	}
	for _, f := range longFolds(o, stream, expectedTank(n)) {
		p := driver.Point{Scenario: f.scenario, Name: SizeName(n), Sides: names(engines)}
		err := driver.RunPoint(ctx, &p, o.Loads, func(ctx context.Context, svc string, round int) (*driver.SideResult, error) {
			e := engineNamed(engines, svc)
			if !e.Up {
				return nil, notMeasured(e)
			}
			if ferr := filled[svc]; ferr != nil {
				return nil, fmt.Errorf("the stream was not written: %v", ferr)
			}
			return lr.foldSide(ctx, e, f.fn, round)
		})
		run.Points = append(run.Points, p)
		if err != nil {
			return err
		}
	}
	return nil
}

// fill writes the stream of n events (a snapshot every
// o.SnapshotEvery) on every engine up, as the fill point of run, and
// returns each engine's error (nil when written).
func (lr longRun) fill(ctx context.Context, stream string, n int) (map[string]error, error) {
	run, o, engines, log := lr.run, lr.o, lr.engines, lr.log
	filled := map[string]error{}
	fill := driver.Point{Scenario: LongFillPoint, Name: SizeName(n), Sides: names(engines)}
	err := driver.RunPoint(ctx, &fill, 1, func(ctx context.Context, svc string, _ int) (*driver.SideResult, error) {
		e := engineNamed(engines, svc)
		if !e.Up {
			filled[svc] = notMeasured(e)
			return nil, filled[svc]
		}
		m := map[driver.Metric]float64{}
		err := (engineStream{e: e, stream: stream}).fill(ctx, n, o.SnapshotEvery, m)
		filled[svc] = err
		if err == nil {
			fmt.Fprintf(log, "eventstore-long %-24s filled %d events in %.1f s (%d snapshots, %.2f s of them)\n", svc, n, m[MetricFillSeconds], int(m[MetricSnapshots]), m[MetricSnapshotAppendSeconds])
		}
		return &driver.SideResult{Metrics: m}, err
	})
	run.Points = append(run.Points, fill)
	return filled, err
}

// longFoldFunc folds the stream on e, recording its figures in m.
type longFoldFunc func(ctx context.Context, e *Engine, m map[driver.Metric]float64) error

// longFold is one way of folding the long stream, as its point's
// scenario.
type longFold struct {
	scenario driver.ScenarioName
	fn       longFoldFunc
}

// longFolds are the three ways of folding stream, each checked against
// want: paged reads, the service's own fold, and from the last snapshot.
func longFolds(o LongOptions, stream string, want tank) []longFold {
	return []longFold{
		{LongFoldPoint, func(ctx context.Context, e *Engine, m map[driver.Metric]float64) error {
			t, err := (engineStream{e: e, stream: stream}).foldPaged(ctx, o.Page, tank{Version: -1}, m)
			if err == nil {
				err = checkFold(t, want)
			}
			return err
		}},
		{LongStatePoint, func(ctx context.Context, e *Engine, m map[driver.Metric]float64) error {
			t, err := foldState(ctx, e, stream, m)
			if err == nil {
				err = checkFold(t, want)
			}
			return err
		}},
		{LongSnapshotPoint, func(ctx context.Context, e *Engine, m map[driver.Metric]float64) error {
			t, err := foldSnapshot(ctx, e, stream, o.Page, m)
			if err == nil {
				err = checkFold(t, want)
			}
			return err
		}},
	}
}

// foldSide measures one fold (fn) on e: its read time and memory,
// bounded by o.FoldTimeout, and on the first round Postgres' records
// touched (the statistics take up to statsFlush to arrive); lr.note
// records what could not be measured.
func (lr longRun) foldSide(ctx context.Context, e *Engine, fn longFoldFunc, round int) (*driver.SideResult, error) {
	o, pid, pidErr := lr.o, lr.pids[e.Name], lr.pidErrs[e.Name]
	note := func(lines []string) { lr.note(e.Name, lines) }
	m := map[driver.Metric]float64{}
	var touch *touched
	var terr error
	if round == 0 {
		touch, terr = startTouched(ctx, o.Options, e)
	}
	fctx, cancel := context.WithTimeout(ctx, o.FoldTimeout)
	mem := startMem(pid, pidErr)
	t0 := time.Now()
	err := fn(fctx, e, m)
	m[MetricReadMS] = round2(float64(time.Since(t0).Microseconds()) / 1000)
	note(mem.finish(m))
	timedOut := fctx.Err() != nil && ctx.Err() == nil
	cancel()
	if timedOut && err != nil {
		err = fmt.Errorf("did not finish within %s (-fold-timeout) after %d requests: %w", o.FoldTimeout, int(m[MetricRequests]), err)
	}
	if err != nil {
		return &driver.SideResult{Metrics: m}, err
	}
	if terr == nil {
		terr = touch.finish(ctx, m)
	}
	if terr != nil {
		note([]string{"records touched not measured: " + terr.Error()})
	}
	return &driver.SideResult{Metrics: m}, nil
}

// checkFold fails a fold that does not match the stream written.
func checkFold(got, want tank) error {
	if got.Events != want.Events || got.Balance != want.Balance || got.Version != want.Version {
		return fmt.Errorf("the fold gave %d events, version %d, balance %g; the stream was written with %d events, version %d, balance %g",
			got.Events, got.Version, got.Balance, want.Events, want.Version, want.Balance)
	}
	return nil
}

// snapshotStream is where a stream's snapshots live: a stream of its
// own, written through the same contract.
func snapshotStream(stream string) string { return stream + "-snapshot" }

// SnapshotType is the snapshot events' type.
const SnapshotType = "TankSnapshot"

// engineStream is one stream on one engine.
type engineStream struct {
	e      *Engine
	stream string
}

// fill appends n events to the stream in batches of up to MaxAppend,
// cut at every snapshot boundary, and appends a snapshot (the fold so
// far) to snapshotStream(stream) after every `every` events up to
// n-every/2. m gets the fill's figures.
func (es engineStream) fill(ctx context.Context, n, every int, m map[driver.Metric]float64) error {
	e, stream := es.e, es.stream
	var t tank
	t.Version = -1
	var evS, snS float64
	var evN, snN int
	t0 := time.Now()
	for j := 0; j < n; {
		size := min(MaxAppend, n-j, (j/every+1)*every-j)
		batch := make([]event, 0, size)
		for k := j; k < j+size; k++ {
			ev := tankEvent(k)
			batch = append(batch, ev)
			l, _ := ev.Data.(map[string]any)["liters"].(int)
			t.apply(ev.Type, float64(l))
			t.Version = int64(k)
		}
		a0 := time.Now()
		if status, r, err := appendEvents(ctx, e.URL, stream, "any", batch...); err != nil || status != http.StatusCreated {
			return fmt.Errorf("append of events %d–%d: %d %v %s", j, j+size-1, status, err, r.Error)
		}
		evS += time.Since(a0).Seconds()
		evN++
		j += size
		if j%every == 0 && j <= n-every/2 {
			a0 = time.Now()
			snap := event{Type: SnapshotType, Data: t}
			if status, r, err := appendEvents(ctx, e.URL, snapshotStream(stream), "any", snap); err != nil || status != http.StatusCreated {
				return fmt.Errorf("snapshot append at version %d: %d %v %s", t.Version, status, err, r.Error)
			}
			snS += time.Since(a0).Seconds()
			snN++
		}
	}
	m[MetricEvents] = float64(n)
	m[MetricFillSeconds] = round2(time.Since(t0).Seconds())
	m[MetricEventAppends], m[MetricEventAppendSeconds] = float64(evN), round2(evS)
	m[MetricSnapshots], m[MetricSnapshotAppendSeconds] = float64(snN), round2(snS)
	if evN > 0 && snN > 0 {
		m[MetricEventAppendMS] = round2(evS / float64(evN) * 1000)
		m[MetricSnapshotAppendMS] = round2(snS / float64(snN) * 1000)
		// What snapshots add to writing the stream, as a share of the
		// events' own append time.
		m[MetricSnapshotOverheadPct] = round2(snS / evS * 100)
	}
	return nil
}

// foldPage is one read's answer as the fold needs it.
type foldPage struct {
	Events []struct {
		Version *int64 `json:"version"`
		Type    string `json:"type"`
		Data    struct {
			Liters float64 `json:"liters"`
		} `json:"data"`
	} `json:"events"`
	LastVersion    *int64 `json:"last_version"`
	RecordsScanned *int64 `json:"records_scanned"`
}

// readPage reads one page (limit events) of the stream from version
// from.
func (es engineStream) readPage(ctx context.Context, from int64, limit int, m map[driver.Metric]float64) (*foldPage, error) {
	e, stream := es.e, es.stream
	u := fmt.Sprintf("%s/streams/%s?from=%d&limit=%d", e.URL, stream, from, limit)
	status, b, err := driver.Do(ctx, http.MethodGet, u, nil)
	m[MetricRequests]++
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("read of %s from version %d answered %d: %s", stream, from, status, strings.TrimSpace(string(b)))
	}
	var p foldPage
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("read of %s: %w", stream, err)
	}
	m[MetricBytesRead] += float64(len(b))
	if p.RecordsScanned != nil {
		m[MetricRecordsScanned] += float64(*p.RecordsScanned)
	}
	return &p, nil
}

// foldPaged folds the stream onto t from the version after t's, page by
// page (limit events each), until a page comes back short; m gets
// requests, events_folded, bytes_read and (Kafka) records_scanned.
func (es engineStream) foldPaged(ctx context.Context, limit int, t tank, m map[driver.Metric]float64) (tank, error) {
	stream := es.stream
	from := t.Version + 1
	for {
		p, err := es.readPage(ctx, from, limit, m)
		if err != nil {
			return t, err
		}
		for _, ev := range p.Events {
			if ev.Version == nil {
				return t, fmt.Errorf("read of %s: an event without a version", stream)
			}
			t.apply(ev.Type, ev.Data.Liters)
			t.Version = *ev.Version
			m[MetricEventsFolded]++
		}
		if len(p.Events) < limit {
			return t, nil
		}
		from = t.Version + 1
	}
}

// foldState asks the service to fold stream (GET /streams/{stream}/state).
func foldState(ctx context.Context, e *Engine, stream string, m map[driver.Metric]float64) (tank, error) {
	status, b, err := driver.Do(ctx, http.MethodGet, e.URL+"/streams/"+stream+"/state", nil)
	m[MetricRequests]++
	if err != nil {
		return tank{}, err
	}
	if status != http.StatusOK {
		return tank{}, fmt.Errorf("state of %s answered %d: %s", stream, status, strings.TrimSpace(string(b)))
	}
	var st struct {
		Version        *int64  `json:"version"`
		Events         int64   `json:"events"`
		Balance        float64 `json:"balance_liters"`
		RecordsScanned *int64  `json:"records_scanned"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return tank{}, err
	}
	t := tank{Events: st.Events, Balance: st.Balance, Version: -1}
	if st.Version != nil {
		t.Version = *st.Version
	}
	m[MetricEventsFolded] = float64(st.Events)
	if st.RecordsScanned != nil {
		m[MetricRecordsScanned] = float64(*st.RecordsScanned)
	}
	return t, nil
}

// foldSnapshot loads stream from its latest snapshot: the last version
// of snapshotStream(stream) (one read), that event (a second), then the
// events after the snapshot's version, paged.
func foldSnapshot(ctx context.Context, e *Engine, stream string, limit int, m map[driver.Metric]float64) (tank, error) {
	ss := snapshotStream(stream)
	head, err := (engineStream{e: e, stream: ss}).readPage(ctx, 0, 1, m)
	if err != nil {
		return tank{}, err
	}
	if head.LastVersion == nil {
		return tank{}, fmt.Errorf("%s holds no snapshot", ss)
	}
	u := fmt.Sprintf("%s/streams/%s?from=%d&limit=1", e.URL, ss, *head.LastVersion)
	status, b, err := driver.Do(ctx, http.MethodGet, u, nil)
	m[MetricRequests]++
	if err != nil {
		return tank{}, err
	}
	var snap struct {
		Events []struct {
			Type string `json:"type"`
			Data tank   `json:"data"`
		} `json:"events"`
		RecordsScanned *int64 `json:"records_scanned"`
	}
	if status != http.StatusOK || json.Unmarshal(b, &snap) != nil || len(snap.Events) != 1 || snap.Events[0].Type != SnapshotType {
		return tank{}, fmt.Errorf("read of the snapshot %s@%d: %d %s", ss, *head.LastVersion, status, httpBody(b))
	}
	if snap.RecordsScanned != nil {
		m[MetricRecordsScanned] += float64(*snap.RecordsScanned)
	}
	t := snap.Events[0].Data
	m[MetricSnapshotVersion] = float64(t.Version)
	folded := m[MetricEventsFolded]
	t, err = (engineStream{e: e, stream: stream}).foldPaged(ctx, limit, t, m)
	m[MetricTailEvents] = m[MetricEventsFolded] - folded
	return t, err
}

func httpBody(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// touched measures the records a Postgres fold touched: the events
// table's tuples fetched by index scans and read by sequential scans
// (pg_stat_user_tables), before and after. Kafka reports its own
// (records_scanned); KurrentDB has none.
type touched struct {
	dbURL, schema string
	before        int64
}

// pgTouchedSQL sums the table's tuples read by every scan kind.
const pgTouchedSQL = `SELECT coalesce(idx_tup_fetch, 0) + coalesce(seq_tup_read, 0) FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = 'events'`

// statsFlush is how long the bench waits for the service's backends to
// report their statistics: an idle backend that flushed them less than a
// second before (PGSTAT_MIN_INTERVAL) flushes again only after
// PGSTAT_IDLE_INTERVAL, 10 s (PostgreSQL 15, pgstat.c; a 1.5 s wait
// counted one load's tuples in the next load's figure).
const statsFlush = 11 * time.Second

func startTouched(ctx context.Context, o Options, e *Engine) (*touched, error) {
	if e.Backend != "postgres" {
		return nil, nil
	}
	if o.DatabaseURL == "" {
		return nil, errors.New("no Postgres URL (-database-url)")
	}
	t := &touched{dbURL: o.DatabaseURL, schema: o.Schema}
	time.Sleep(statsFlush) // earlier work's statistics, counted before
	var err error
	t.before, err = t.read(ctx)
	return t, err
}

func (t *touched) read(ctx context.Context) (int64, error) {
	if t.dbURL == "" {
		return 0, errors.New("no Postgres URL (-database-url)")
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(cctx, t.dbURL)
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.Background())
	var n int64
	if err := conn.QueryRow(cctx, pgTouchedSQL, t.schema).Scan(&n); err != nil {
		return 0, fmt.Errorf("pg_stat_user_tables of %s.events: %w", t.schema, err)
	}
	return n, nil
}

// finish records records_touched; nil t (not Postgres) records nothing.
func (t *touched) finish(ctx context.Context, m map[driver.Metric]float64) error {
	if t == nil {
		return nil
	}
	time.Sleep(statsFlush)
	after, err := t.read(ctx)
	if err != nil {
		return err
	}
	m[MetricRecordsTouched] = float64(after - t.before)
	return nil
}

// LongEstimate is how long eventstore-long and eventstore-cleanup take
// at their defaults against engines engines, one after the other, as
// `make results` runs them. Writing through the service costs about
// 0.1 ms per event on Postgres (a third of that on Kafka), each load a
// few seconds; the cleanup's Kafka policies wait for the broker's
// retention check (log.retention.check.interval.ms, 5 minutes by
// default), on average half of it, while the Postgres delete runs.
func LongEstimate(engines int) scenario.Estimate {
	lo, co := DefaultLongOptions(), DefaultCleanupOptions()
	var events int
	for _, n := range lo.Sizes {
		events += n
	}
	write := time.Duration(events*engines) * 60 * time.Microsecond
	loads := time.Duration(3*lo.Loads*engines*len(lo.Sizes)) * 2 * time.Second
	pg := time.Duration(co.StreamEvents)*150*time.Microsecond + co.Window + 10*time.Second
	typical := write + loads + max(pg, 150*time.Second)
	return scenario.Estimate{Typical: typical, Bound: write*2 + loads*2 + max(pg*2, 330*time.Second)}
}
