package eventstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	mrand "math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// Options are the bench's flags; the defaults (Append.Defaults) are the
// issue's sizes.
type Options struct {
	Targets  string
	Workers  int
	Streams  int
	Duration time.Duration
	Rounds   int
	Runs     int
	Events   int
	Reads    int
	Out      string
	MD       string
	// DatabaseURL and Schema locate the Postgres side's events table,
	// whose size each scenario records at its start (StoreState); the
	// URL is never written to the results.
	DatabaseURL string `json:"-"`
	Schema      string `json:"schema,omitempty"`
	// KafkaBrokers and KafkaTopic locate the Kafka side's partition, whose
	// size each scenario records at its start. KafkaTopic empty: the
	// topic is not known, and the size is what a read of an unwritten
	// stream scans. FreshTopic says the topic was created empty for this
	// bench run (the results command does so when it starts
	// kafka-eventstore itself).
	KafkaBrokers string `json:"kafka_brokers,omitempty"`
	KafkaTopic   string `json:"kafka_topic,omitempty"`
	FreshTopic   bool   `json:"fresh_topic,omitempty"`
	// KeyedTopic and KeyedPartitions are the keyed Kafka side's
	// (KeyedName) topic and partition count (its KAFKA_TOPIC and
	// KAFKA_PARTITIONS). The topic locates its store size and the cursor
	// its catch-up starts from; empty, its catch-up fails saying so.
	KeyedTopic      string `json:"kafka_keyed_topic,omitempty"`
	KeyedPartitions int    `json:"kafka_keyed_partitions,omitempty"`
	// Grace bounds the wait, after each append loop's window, for the
	// operations still running (driver.LoopSpec.Grace).
	Grace time.Duration `json:"grace,omitempty"`
	// EngineDatabaseURLs are the servers of the Postgres sides other than
	// no-kurrentdb's (DatabaseURL), by engine name: a no-kurrentdb run
	// against another PostgreSQL version (CompareName) beside it.
	EngineDatabaseURLs map[string]string `json:"-"`
	// FreshEngines are the engines whose store was created empty for
	// this bench run (a -compare-bindirs server): their store state
	// says so (StoreFresh).
	FreshEngines []string `json:"fresh_engines,omitempty"`
	// Compare is what became of the other PostgreSQL versions the run
	// was to measure beside the stack's when none of them joined the
	// targets (make results: PostgreSQL 18 absent, or its server or
	// service did not start); nil when none was asked or they all ran.
	Compare *CompareOutcome `json:"compare,omitempty"`
	// Before, when set, is called with the results run before the
	// scenario starts: the load commands record the event store's
	// starting state (driver.StartState) there.
	Before func(context.Context, *driver.Run) `json:"-"`
}

func defaultEngines(targets string, keyedPartitions int) []*Engine {
	var out []*Engine
	backends := map[string]string{pairs.NoKurrentDB: "postgres", pairs.KurrentDB: "kurrentdb", pairs.KafkaEventStore: "kafka", KeyedName: "kafka"}
	for _, t := range strings.Split(targets, ",") {
		name, u, ok := strings.Cut(strings.TrimSpace(t), "=")
		if !ok {
			continue
		}
		e := &Engine{Name: name, Backend: backends[name], URL: strings.TrimRight(u, "/")}
		if IsCompareName(name) {
			e.Backend = "postgres"
		}
		switch name {
		case pairs.KafkaEventStore:
			e.Label, e.Partitions = ReferenceLabel, 1
		case KeyedName:
			e.Partitions = max(keyedPartitions, 2)
			e.Label = KeyedLabel(e.Partitions)
		}
		out = append(out, e)
	}
	return out
}

// KeyedName is the bench's name of the keyed Kafka side: kafka-eventstore
// run with KAFKA_PARTITIONS > 1 (docs/eventstore.md, *A keyed Kafka
// store*), at KeyedPort unless -targets says otherwise.
const KeyedName = "kafka-eventstore-keyed"

// KeyedPort is the keyed side's port in DefaultTargets: the reference
// side's 8091 plus one, free in the pair table.
const KeyedPort = 8092

// DefaultKeyedPartitions is the keyed side's partition count the bench
// assumes (-kafka-keyed-partitions).
const DefaultKeyedPartitions = 8

// ReferenceLabel labels the reference's Kafka row (kafka-eventstore with
// its default single partition).
const ReferenceLabel = "Kafka, one partition (reference)"

// KeyedLabel labels the keyed Kafka row.
func KeyedLabel(partitions int) string { return fmt.Sprintf("Kafka, keyed, %d partitions", partitions) }

// Scenarios are the bench's scenarios, in the order `make results` runs
// them (point-read writes and reads streams of its own).
var Scenarios = []string{"append", "point-read", "catch-up"}

// DefaultOptions are the sizes, against the trio on localhost.
func DefaultOptions() Options { return Append.Defaults }

// Register adds the bench's flags to fs, defaulting to o's values.
func (o *Options) Register(fs *flag.FlagSet) {
	fs.StringVar(&o.Targets, "targets", o.Targets, "name=url of each engine")
	fs.IntVar(&o.Workers, "workers", o.Workers, "append: concurrent workers per engine")
	fs.IntVar(&o.Streams, "streams", o.Streams, "append: streams the workers share")
	fs.DurationVar(&o.Duration, "duration", o.Duration, "append: duration of one loop per engine, series and round")
	fs.IntVar(&o.Rounds, "rounds", o.Rounds, "append: rounds (engine order rotated)")
	fs.IntVar(&o.Runs, "runs", o.Runs, "catch-up: runs per engine")
	fs.IntVar(&o.Events, "events", o.Events, "catch-up: pre-filled events per run")
	fs.IntVar(&o.Reads, "reads", o.Reads, "point-read: reads per engine (the median is reported)")
	fs.StringVar(&o.Out, "out", o.Out, "directory of the JSON results")
	fs.StringVar(&o.MD, "md", o.MD, "also write the RESULTS.md section, rendered from every JSON result present, to this file")
	fs.StringVar(&o.DatabaseURL, "database-url", o.DatabaseURL, "Postgres of the Postgres side, to record its events table's size at the start")
	fs.StringVar(&o.Schema, "schema", o.Schema, "the Postgres side's schema (its events table's)")
	fs.StringVar(&o.KafkaBrokers, "kafka-brokers", o.KafkaBrokers, "Kafka brokers of the Kafka side, to record its topic's size at the start")
	fs.StringVar(&o.KafkaTopic, "kafka-topic", o.KafkaTopic, "the Kafka side's topic (KAFKA_TOPIC); empty: its size is what a read of an unwritten stream scans")
	fs.StringVar(&o.KeyedTopic, "kafka-keyed-topic", o.KeyedTopic, "the keyed Kafka side's topic ("+KeyedName+"'s KAFKA_TOPIC): its size, and its catch-up's starting cursor")
	fs.IntVar(&o.KeyedPartitions, "kafka-keyed-partitions", o.KeyedPartitions, "the keyed Kafka side's KAFKA_PARTITIONS, for its row's label")
	fs.DurationVar(&o.Grace, "grace", o.Grace, "append: how long to wait, after a loop's window, for the operations still running (they count as late; those still running then, as in flight)")
}

// ErrUnknownScenario is returned by Bench for a scenario not in
// Scenarios.
var ErrUnknownScenario = errors.New("unknown eventstore scenario (append, point-read, catch-up)")

// Command is the results file's command of scenario:
// "eventstore-append"; the file is <o.Out>/<UTC time>-<command>.json.
func Command(scenario string) string { return "eventstore-" + scenario }

// Bench probes the engines of o.Targets, runs scenario against those that
// answer (the others are "not measured here") through the driver's
// rounds, and writes its results file, a driver.Run like every pair's,
// whose path it returns. progress reports each loop (nil for none); log
// receives the probes' outcome.
func Bench(ctx context.Context, scenario string, o Options, progress *driver.Progress, log io.Writer) (string, error) {
	if !slices.Contains(Scenarios, scenario) {
		return "", fmt.Errorf("%w: %q", ErrUnknownScenario, scenario)
	}
	engines := probeEngines(ctx, o, log)
	run := driver.NewRun(Command(scenario), nil, time.Now())
	run.Settings["engines"] = engines
	run.Settings["options"] = o
	postgresVersions(ctx, run, o, engines)
	if o.Before != nil {
		o.Before(ctx, run)
	}
	recordStart(ctx, run, o, engines)
	var err error
	switch scenario {
	case "append":
		err = Append.Run(ctx, run, o, engines, progress)
	case "point-read":
		err = runPointRead(ctx, run, o, engines)
	case "catch-up":
		err = runCatchUp(ctx, run, o, engines, log)
	}
	run.FinishedAt = time.Now().UTC()
	if err != nil {
		return "", err
	}
	return driver.WriteRun(o.Out, run)
}

func runID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// streamPrefix names the streams of a series: the read-then-append
// growing series keeps the bench's historical "tank-<tag>-g".
func streamPrefix(tag string, m Mode, series string, round int) string {
	p := "tank-" + tag
	if m.Name != ReadThenAppend.Name {
		p += "-" + m.Name
	}
	if series == "reset" {
		return fmt.Sprintf("%s-r%d", p, round+1)
	}
	return p + "-g"
}

// notMeasured is a side the bench could not reach.
func notMeasured(e *Engine) error { return fmt.Errorf("not measured here: %s", e.Why) }

// Run runs the append scenario with o against engines, recording one
// point per mode and series in run. In each round every point runs in
// turn, the engines in rotated order; each engine's loop is o.Workers
// workers appending to o.Streams streams for o.Duration.
func (s AppendScenario) Run(ctx context.Context, run *driver.Run, o Options, engines []*Engine, progress *driver.Progress) error {
	tag := runID()
	run.Settings["run_tag"] = tag
	byName := map[string]*Engine{}
	var sides []string
	for _, e := range engines {
		byName[e.Name] = e
		sides = append(sides, e.Name)
	}
	type series struct {
		mode Mode
		name string
	}
	var ps []*driver.Point
	var ss []series
	for _, m := range s.Modes {
		for _, name := range s.Series {
			ps = append(ps, &driver.Point{Scenario: AppendScenarioName(m.Name), Name: name, DurationS: o.Duration.Seconds(), Sides: sides})
			ss = append(ss, series{m, name})
		}
	}
	err := driver.RunPoints(ctx, ps, o.Rounds, func(ctx context.Context, i int, svc string, round int) (*driver.SideResult, error) {
		e := byName[svc]
		if !e.Up {
			return nil, notMeasured(e)
		}
		return appendLoop(ctx, o, e, seriesStreams{mode: ss[i].mode, prefix: streamPrefix(tag, ss[i].mode, ss[i].name, round)}, progress), nil
	})
	for _, p := range ps {
		run.Points = append(run.Points, *p)
	}
	return err
}

// seriesStreams are the streams of one series and round: the mode its
// appends follow, and the prefix of their names.
type seriesStreams struct {
	mode   Mode
	prefix string
}

// appendLoop is one engine's loop of one series and round (on ss).
func appendLoop(ctx context.Context, o Options, e *Engine, ss seriesStreams, progress *driver.Progress) *driver.SideResult {
	m, prefix := ss.mode, ss.prefix
	var registered sync.Map
	seed := uint64(time.Now().UnixNano())
	c := driver.Loop(ctx, driver.LoopSpec{
		Name: fmt.Sprintf("%-16s %s %s", e.Name, m.Name, prefix), Workers: o.Workers, Duration: o.Duration, Grace: o.Grace, Progress: progress,
		Op: func(ctx context.Context, w int, n uint64) (int, error) {
			rng := mrand.New(mrand.NewPCG(uint64(w), seed+n))
			stream := fmt.Sprintf("%s-%d", prefix, rng.IntN(o.Streams))
			var expected any = "any"
			first := false
			if m.ReadFirst {
				var st struct {
					Version *int64 `json:"version"`
				}
				if status, err := getJSON(ctx, e.URL+"/streams/"+stream+"/state", &st); err != nil || status != http.StatusOK {
					return status, err
				}
				first = st.Version == nil
				if e.Conditional {
					expected = "no_stream"
					if st.Version != nil {
						expected = *st.Version
					}
				}
			} else {
				_, loaded := registered.LoadOrStore(stream, true)
				first = !loaded
			}
			ev := event{Type: "OxygenConsumed", Data: map[string]any{"liters": 1}}
			if first {
				ev = event{Type: "TankRegistered", Data: map[string]any{"capacity_liters": 1000}}
			}
			status, _, err := appendEvents(ctx, e.URL, stream, expected, ev)
			return status, err
		},
	})
	res := &driver.SideResult{Metrics: map[driver.Metric]float64{}, Phases: []driver.Phase{{Name: "append", Client: c}}}
	driver.FlattenClient(res.Metrics, driver.ClientPrefix, c)
	conflicts := c.Codes["409"]
	m2 := res.Metrics
	// ops counts every append completed, in the window or late;
	// in_flight those abandoned at the grace bound (counted nowhere else).
	m2[MetricAppendOps] = float64(c.OK)
	m2[MetricAppendLate] = float64(c.Late)
	m2[MetricAppendInFlight] = float64(c.InFlight)
	m2[MetricAppendConflicts] = float64(conflicts)
	m2[MetricAppendErrors] = float64(c.Errors - conflicts)
	m2[MetricAppendSeconds] = round2(c.DurationS)
	if c.DurationS > 0 {
		m2[MetricAppendOpsPerSec] = round2(float64(c.OK) / c.DurationS)
	}
	if attempts := c.OK + conflicts; attempts > 0 {
		m2[MetricAppendConflictsPerOp] = math.Round(float64(conflicts)/float64(attempts)*1000) / 1000
	}
	// Stream length at the end: sample a few streams' last versions.
	var total, n float64
	for i := 0; i < min(o.Streams, 8); i++ {
		var r readResult
		if status, err := getJSON(ctx, fmt.Sprintf("%s/streams/%s-%d?limit=1", e.URL, prefix, i), &r); err == nil && status == http.StatusOK {
			if r.LastVersion != nil {
				total += float64(*r.LastVersion + 1)
			}
			n++
		}
	}
	if n > 0 {
		m2[MetricEventsPerStreamAtEnd] = round2(total / n)
	}
	return res
}

func round2(f float64) float64 { return math.Round(f*100) / 100 }

// pointReadEvents is how many events each stream of the point read's
// pre-fill holds.
const pointReadEvents = 20

// pointReadSource says where the point-read scenario's stream comes
// from, with streams streams pre-filled (runPointRead).
func pointReadSource(streams int) string {
	return fmt.Sprintf("stream 0 of a pre-fill of this run, the same on every engine: %d streams × %d events, appended one event at a time round-robin", streams, pointReadEvents)
}

// runPointRead pre-fills the same streams on every engine measured, in
// this run (o.Streams streams of pointReadEvents events, appended one
// event at a time round-robin, so that each stream's events lie among
// the others'), checks that stream 0 holds the same events everywhere,
// and reads it o.Reads times per engine, the engines rotated each round.
// A stream that differs between engines fails the point with the reason:
// a read of 20 events is not compared with a read of none.
func runPointRead(ctx context.Context, run *driver.Run, o Options, engines []*Engine) error {
	id := runID()
	stream := fmt.Sprintf("tank-pr-%s-0", id)
	failed := map[string]error{}
	for _, e := range engines {
		if !e.Up {
			continue
		}
	fill:
		for j := range pointReadEvents {
			for i := range o.Streams {
				s := fmt.Sprintf("tank-pr-%s-%d", id, i)
				ev := event{Type: "OxygenAdded", Data: map[string]any{"liters": 1, "n": j}}
				if status, r, err := appendEvents(ctx, e.URL, s, "any", ev); err != nil || status != http.StatusCreated {
					failed[e.Name] = fmt.Errorf("pre-fill of %s: %d %v %s", s, status, err, r.Error)
					break fill
				}
			}
		}
	}
	counts, err := sameStream(ctx, engines, stream, pointReadEvents, failed)
	run.Settings["stream"], run.Settings["stream_events"] = stream, counts
	if err != nil {
		run.Note("point-read: %v", err)
	}
	p := driver.Point{Scenario: PointReadPoint, Name: stream, Sides: names(engines)}
	rerr := driver.RunPoint(ctx, &p, max(o.Reads, 1), func(ctx context.Context, svc string, _ int) (*driver.SideResult, error) {
		e := engineNamed(engines, svc)
		if !e.Up {
			return nil, notMeasured(e)
		}
		if err != nil {
			return nil, err
		}
		var r readResult
		t0 := time.Now()
		status, err := getJSON(ctx, e.URL+"/streams/"+stream+"?limit=10000", &r)
		if err != nil || status != http.StatusOK {
			return nil, fmt.Errorf("%s: read %s: %d %v", e.Name, stream, status, err)
		}
		m := map[driver.Metric]float64{MetricReadMS: round2(float64(time.Since(t0).Microseconds()) / 1000), MetricMatched: float64(len(r.Events))}
		if r.RecordsScanned != nil {
			m[MetricRecordsScanned] = float64(*r.RecordsScanned)
		}
		return &driver.SideResult{Metrics: m}, nil
	})
	run.Points = append(run.Points, p)
	return rerr
}

// ErrStreamsDiffer fails a point read whose stream does not hold the same
// events on every engine measured.
var ErrStreamsDiffer = errors.New("failed: the stream read differs between engines")

// sameStream reads stream from every engine that is up and was pre-filled
// (failed names those whose pre-fill failed) and returns each one's event
// count; the error, wrapping ErrStreamsDiffer, names every engine whose
// count is not want.
func sameStream(ctx context.Context, engines []*Engine, stream string, want int, failed map[string]error) (map[string]int, error) {
	counts := map[string]int{}
	var bad []string
	for _, e := range engines {
		if !e.Up {
			continue
		}
		if err := failed[e.Name]; err != nil {
			bad = append(bad, fmt.Sprintf("%s: %v", e.Name, err))
			continue
		}
		var r readResult
		status, err := getJSON(ctx, e.URL+"/streams/"+stream+"?limit=10000", &r)
		if err != nil || status != http.StatusOK {
			bad = append(bad, fmt.Sprintf("%s: read %d %v", e.Name, status, err))
			continue
		}
		counts[e.Name] = len(r.Events)
		if len(r.Events) != want {
			bad = append(bad, fmt.Sprintf("%s holds %d events", e.Name, len(r.Events)))
		}
	}
	if len(bad) > 0 {
		return counts, fmt.Errorf("%w: %s was written with %d events on every engine, but %s", ErrStreamsDiffer, stream, want, strings.Join(bad, "; "))
	}
	return counts, nil
}

func names(engines []*Engine) []string {
	var out []string
	for _, e := range engines {
		out = append(out, e.Name)
	}
	return out
}

func engineNamed(engines []*Engine, name string) *Engine {
	for _, e := range engines {
		if e.Name == name {
			return e
		}
	}
	return &Engine{Name: name, Why: "not a target"}
}

// livePerRun is how many live events each catch-up run sends.
const livePerRun = 20

// catchUpDescription says what a catch-up run measures (runCatchUp,
// catchUpRun).
const catchUpDescription = "Per run: a marker append gives the start position; events are pre-filled in batches of 50; a subscriber opened at the marker must receive them all and caught-up (catch-up time); then an independent subscriber, already caught up, receives live appends sent 20 ms apart (live latency = receive time - send time, same clock)"

// runCatchUp runs o.Runs catch-up runs per engine, as rounds of one
// point, the engines rotated each round.
func runCatchUp(ctx context.Context, run *driver.Run, o Options, engines []*Engine, log io.Writer) error {
	run.Settings["live_events_per_run"] = livePerRun
	p := driver.Point{Scenario: CatchUpPoint, Name: fmt.Sprintf("%d events", o.Events), Sides: names(engines)}
	err := driver.RunPoint(ctx, &p, o.Runs, func(ctx context.Context, svc string, round int) (*driver.SideResult, error) {
		e := engineNamed(engines, svc)
		if !e.Up {
			return nil, notMeasured(e)
		}
		cu, p50, pmax, err := catchUpRun(ctx, o, e)
		if err != nil {
			return nil, fmt.Errorf("%s run %d: %w", e.Name, round+1, err)
		}
		fmt.Fprintf(log, "catch-up %-16s run %d: catch-up %.1f ms, live p50 %.1f ms (max %.1f)\n", e.Name, round+1, cu, p50, pmax)
		return &driver.SideResult{Metrics: map[driver.Metric]float64{MetricCatchUpMS: cu, MetricLiveP50: p50, MetricLiveMax: pmax}}, nil
	})
	run.Points = append(run.Points, p)
	return err
}

// prefill appends n OxygenAdded events to stream in batches of 50, the
// j-th's data {"liters": 1, "n": j}.
func prefill(ctx context.Context, base, stream string, n int) error {
	for i := 0; i < n; i += 50 {
		batch := make([]event, 0, 50)
		for j := i; j < min(i+50, n); j++ {
			batch = append(batch, event{Type: "OxygenAdded", Data: map[string]any{"liters": 1, "n": j}})
		}
		if status, r, err := appendEvents(ctx, base, stream, "any", batch...); err != nil || status != http.StatusCreated {
			return fmt.Errorf("pre-fill: %d %v %s", status, err, r.Error)
		}
	}
	return nil
}

func catchUpRun(ctx context.Context, o Options, e *Engine) (catchUp, p50, pmax float64, err error) {
	id := runID()
	stream := "tank-cu-" + id
	status, marker, err := appendEvents(ctx, e.URL, stream+"-marker", "any", event{Type: "TankRegistered", Data: map[string]any{"capacity_liters": 1}})
	if err != nil || status != http.StatusCreated {
		return 0, 0, 0, fmt.Errorf("marker append: %d %v %s", status, err, marker.Error)
	}
	var from string
	if e.Name == KeyedName {
		// A keyed topic resumes only from a cursor over every partition
		// (the marker's "<partition>:<offset>" is refused): the high
		// watermarks after the marker, read from Kafka, are the cursor
		// just after it.
		if from, err = keyedCursor(ctx, o); err != nil {
			return 0, 0, 0, err
		}
	} else {
		from = marker.Position
	}
	if err := prefill(ctx, e.URL, stream, o.Events); err != nil {
		return 0, 0, 0, err
	}
	catchUp, last, err := catchUpTime(ctx, e, from, stream, o.Events)
	if err != nil {
		return 0, 0, 0, err
	}
	lat, err := liveLatencies(ctx, e, stream, last)
	if err != nil {
		return 0, 0, 0, err
	}
	slices.Sort(lat)
	return round2(catchUp), round2(lat[len(lat)/2]), round2(lat[len(lat)-1]), nil
}

// catchUpTime subscribes from the cursor from and returns the time in ms
// until the subscriber is caught up, having received the stream's events
// (events of them), and the id of the last one.
func catchUpTime(ctx context.Context, e *Engine, from, stream string, events int) (float64, string, error) {
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	t0 := time.Now()
	ch, err := subscribe(sctx, e.URL, from)
	if err != nil {
		return 0, "", err
	}
	got := 0
	var last string
	for m := range ch {
		if m.Event == "event" && strings.Contains(m.Data, stream) {
			got++
			last = m.ID
		}
		if m.Event == "caught-up" {
			break
		}
	}
	catchUp := float64(time.Since(t0).Microseconds()) / 1000
	cancel()
	if got != events {
		return 0, "", fmt.Errorf("catch-up delivered %d of %d events", got, events)
	}
	return catchUp, last, nil
}

// liveLatencies subscribes from last with an independent subscriber,
// caught up before anything is sent, then appends livePerRun events to
// the stream's live twin, 20 ms apart, and returns each one's latency
// from its append to its delivery, in ms.
func liveLatencies(ctx context.Context, e *Engine, stream, last string) ([]float64, error) {
	lctx, lcancel := context.WithTimeout(ctx, 2*time.Minute)
	defer lcancel()
	live, err := subscribe(lctx, e.URL, last)
	if err != nil {
		return nil, err
	}
	for m := range live {
		if m.Event == "caught-up" {
			break
		}
	}
	sent := make([]time.Time, livePerRun)
	var mu sync.Mutex
	go func() {
		for i := range livePerRun {
			mu.Lock()
			sent[i] = time.Now()
			mu.Unlock()
			if _, _, err := appendEvents(lctx, e.URL, stream+"-live", "any", event{Type: "OxygenConsumed", Data: map[string]any{"liters": 1, "i": i}}); err != nil {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	var lat []float64
	for m := range live {
		if m.Event != "event" || !strings.Contains(m.Data, stream+"-live") {
			continue
		}
		var ev struct {
			Data struct {
				I int `json:"i"`
			} `json:"data"`
		}
		if json.Unmarshal([]byte(m.Data), &ev) != nil || ev.Data.I < 0 || ev.Data.I >= livePerRun {
			continue
		}
		mu.Lock()
		lat = append(lat, float64(m.At.Sub(sent[ev.Data.I]).Microseconds())/1000)
		mu.Unlock()
		if len(lat) == livePerRun {
			break
		}
	}
	if len(lat) != livePerRun {
		return nil, fmt.Errorf("live subscriber received %d of %d events", len(lat), livePerRun)
	}
	return lat, nil
}

// DefaultTargets names the event store trio at their pair-table ports on
// localhost, the Postgres side first.
func DefaultTargets() string { return Targets("localhost", 0) }

// Targets names the event store trio on host at their pair-table ports
// plus portOffset, the Postgres side first: the -targets spelling.
func Targets(host string, portOffset int) string {
	var named []string
	for _, s := range pairs.Pair(pairs.EventStore) {
		named = append(named, s.Name+"="+s.URL(host, portOffset))
	}
	named = append(named, fmt.Sprintf("%s=http://%s:%d", KeyedName, host, KeyedPort+portOffset))
	return strings.Join(named, ",")
}
