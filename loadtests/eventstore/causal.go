package eventstore

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/segmentio/kafka-go"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/scenario"
	contract "github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/eventstore"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// The causal experiment (issue 24, item 1) answers the reference's open
// question: how much of Kafka's slow point read is due to the records it
// scans that are not the stream's. It reads the same streams from stores
// of growing total size, everything else equal, on each engine: a
// service instance of its own on a store created empty for the run, the
// read streams written first through the service's API, then the store
// filled with other streams' events up to each size of CausalOptions.Sizes
// in turn. Each step measures the store's size before its reads.

// CausalCommand is the causal experiment's results file command:
// <out>/<UTC time>-eventstore-causal.json.
const CausalCommand = "eventstore-causal"

// CausalLadder is the store sizes, in records, the experiment can step
// through: the 10 K, 100 K, 1 M and 5 M, with 300 K between 100 K
// and 1 M so that the default run has four sizes.
var CausalLadder = []int64{10_000, 100_000, 300_000, 1_000_000, 5_000_000}

// DefaultCausalMax is -causal-max's default: the largest size `make
// results` fills. 5 M does not fit the results run's budget on 2 cores
// (filling 5 M records into each of three stores and scanning the
// single partition at 5 M about 20 times take minutes): it is
// -causal-max 5000000.
const DefaultCausalMax = 1_000_000

// CausalStreams are the read streams' lengths: 1,000 events, then 10,000
// (contract.MaxReadLimit: one GET reads the whole stream).
var CausalStreams = []int{1_000, 10_000}

// The experiment's defaults.
const (
	// DefaultCausalReads is how many timed reads each engine makes of
	// each stream at each size, after one untimed warm-up read.
	DefaultCausalReads = 9
	// DefaultCausalFillStreams is how many other streams the fill
	// spreads its events over, round-robin.
	DefaultCausalFillStreams = 1000
	// CausalBackendTimeout is BACKEND_TIMEOUT on the experiment's
	// instances, every engine alike: a single-partition scan of millions
	// of records outlasts the default 10 s, and its time is what is
	// measured. It stays under the driver's 30 s request timeout, so a
	// read that takes longer fails with the service's own 503.
	CausalBackendTimeout = 25 * time.Second
	// CausalPortOffset is added to each engine's pair-table port (and
	// to KeyedPort) for its experiment instance: 8790, 8791, 8792.
	CausalPortOffset = 700
	// CausalSchemaPrefix starts the name of every schema the experiment
	// creates; only such schemas are dropped.
	CausalSchemaPrefix = "eventstore_causal_"
)

// causalFillAppend is the fill's record batch and COPY chunk: the contract's
// largest append.
const causalFillAppend = contract.MaxEventsPerAppend

// causalCopyChunk is how many rows one COPY transaction of the Postgres fill
// writes.
const causalCopyChunk = 50_000

// CausalOptions are the experiment's settings (flags of `go run
// ./loadtests eventstore causal`).
type CausalOptions struct {
	// Sizes are the store sizes, in records, stepped through in order;
	// only those up to Max run.
	Sizes []int64 `json:"sizes"`
	// Max is the largest size run (-causal-max).
	Max int64 `json:"max"`
	// Streams are the read streams' lengths in events.
	Streams []int `json:"streams"`
	// Reads is the timed reads per engine, stream and size.
	Reads int `json:"reads"`
	// FillStreams is how many other streams the fill spreads over.
	FillStreams int `json:"fill_streams"`
	// KeyedPartitions is the keyed Kafka side's partition count.
	KeyedPartitions int `json:"keyed_partitions"`
	// Out is the results folder.
	Out string `json:"-"`
	// DatabaseURL is the Postgres the Postgres side's instance and its
	// fill use; never written to the results.
	DatabaseURL string `json:"-"`
	// KafkaBrokers are the Kafka side's brokers.
	KafkaBrokers string `json:"kafka_brokers"`
}

// DefaultCausalOptions are the experiment's defaults, against the
// stack.
func DefaultCausalOptions() CausalOptions {
	return CausalOptions{Sizes: CausalLadder, Max: DefaultCausalMax, Streams: CausalStreams, Reads: DefaultCausalReads,
		FillStreams: DefaultCausalFillStreams, KeyedPartitions: DefaultKeyedPartitions, Out: "results",
		KafkaBrokers: pairs.DefaultKafkaBrokers}
}

// Register adds the experiment's flags to fs.
func (o *CausalOptions) Register(fs *flag.FlagSet) {
	fs.Func("causal-sizes", "store sizes in records, comma-separated, stepped through in order (those above -causal-max are skipped; default "+formatCausalSizes(o.Sizes)+")", func(s string) error {
		v, err := ParseCausalSizes(s)
		if err == nil {
			o.Sizes = v
		}
		return err
	})
	fs.Int64Var(&o.Max, "causal-max", o.Max, "largest store size run; 5000000 adds the issue's 5 M step, which does not fit `make results`' budget")
	fs.Func("causal-streams", "read streams' lengths in events, comma-separated (at most "+strconv.Itoa(contract.MaxReadLimit)+"; default "+formatCausalInts(o.Streams)+")", func(s string) error {
		v, err := parseCausalInts(s)
		if err == nil {
			o.Streams = v
		}
		return err
	})
	fs.IntVar(&o.Reads, "causal-reads", o.Reads, "timed reads per engine, stream and size (after one untimed warm-up)")
	fs.IntVar(&o.FillStreams, "causal-fill-streams", o.FillStreams, "other streams the fill spreads its events over")
	fs.IntVar(&o.KeyedPartitions, "causal-keyed-partitions", o.KeyedPartitions, "the keyed Kafka side's partitions")
	fs.StringVar(&o.Out, "out", o.Out, "directory of the JSON results")
	fs.StringVar(&o.DatabaseURL, "database-url", o.DatabaseURL, "Postgres of the Postgres side's instance and fill")
	fs.StringVar(&o.KafkaBrokers, "kafka-brokers", o.KafkaBrokers, "Kafka brokers of the Kafka sides' instances and fill")
}

// Validate names the first setting that cannot run.
func (o CausalOptions) Validate() error {
	var errs []error
	if len(o.Run()) == 0 {
		errs = append(errs, fmt.Errorf("-causal-sizes %s: none is at most -causal-max %d", formatCausalSizes(o.Sizes), o.Max))
	}
	for i, s := range o.Sizes {
		if s <= 0 || (i > 0 && s <= o.Sizes[i-1]) {
			errs = append(errs, fmt.Errorf("-causal-sizes %s: want positive sizes in increasing order", formatCausalSizes(o.Sizes)))
			break
		}
	}
	if len(o.Streams) == 0 {
		errs = append(errs, errors.New("-causal-streams: at least one stream"))
	}
	for _, n := range o.Streams {
		if n < 1 || n > contract.MaxReadLimit {
			errs = append(errs, fmt.Errorf("-causal-streams: %d is not between 1 and %d (one GET reads the whole stream)", n, contract.MaxReadLimit))
		}
	}
	if o.Reads < 1 {
		errs = append(errs, fmt.Errorf("-causal-reads %d: at least 1", o.Reads))
	}
	if o.FillStreams < 1 {
		errs = append(errs, fmt.Errorf("-causal-fill-streams %d: at least 1", o.FillStreams))
	}
	if o.KeyedPartitions < 2 {
		errs = append(errs, fmt.Errorf("-causal-keyed-partitions %d: at least 2", o.KeyedPartitions))
	}
	return errors.Join(errs...)
}

// Run is the sizes that run: Sizes up to Max.
func (o CausalOptions) Run() []int64 {
	var out []int64
	for _, s := range o.Sizes {
		if s <= o.Max {
			out = append(out, s)
		}
	}
	return out
}

// streamRecords is every read stream's events together: the least a
// store holding them all can hold.
func (o CausalOptions) streamRecords() int64 {
	var n int64
	for _, s := range o.Streams {
		n += int64(s)
	}
	return n
}

// Estimated rates of this 2-core machine, for CausalEstimate.
const (
	causalEstKafkaFill = 150_000
	causalEstPGFill    = 80_000
	causalEstKafkaScan = 600_000
	causalEstPGReadMS  = 10
)

// CausalEstimate is how long the experiment takes with o: three service
// starts, the fill to the largest size (two Kafka topics and the events
// table, plus a VACUUM per step) and the reads, whose single-partition
// scans dominate.
func CausalEstimate(o CausalOptions) scenario.Estimate {
	sizes := o.Run()
	if len(sizes) == 0 {
		return scenario.Estimate{}
	}
	top := float64(sizes[len(sizes)-1])
	secs := 30 + top*(2.0/causalEstKafkaFill+1.5/causalEstPGFill)
	reads := float64(len(o.Streams) * (o.Reads + 1))
	for _, s := range sizes {
		scanned := float64(s) * (1 + 1/float64(max(o.KeyedPartitions, 1)))
		secs += reads * (scanned/causalEstKafkaScan + causalEstPGReadMS/1000.0)
	}
	t := time.Duration(secs * float64(time.Second))
	return scenario.Estimate{Typical: t, Bound: 3 * t}
}

// CausalSide is one engine of the experiment: a service instance of its
// own, reading a store created for the run.
type CausalSide struct {
	// Engine is the engine as the results name and label it.
	Engine
	// Service is the service's directory (no-kurrentdb,
	// kafka-eventstore).
	Service string `json:"service"`
	// Instance is the instance's name for the launcher
	// ("kafka-eventstore@causal").
	Instance string `json:"instance"`
	// Port is the instance's port.
	Port int `json:"port"`
	// Store is the schema or topic it reads.
	Store string `json:"store"`
	// Env is the instance's environment beyond the driver's; the
	// Postgres side's DATABASE_URL (never written to the results) is
	// added when it starts.
	Env map[string]string `json:"env"`
}

// CausalLauncher starts side's instance and returns its base URL and a
// function that stops it.
type CausalLauncher func(ctx context.Context, side CausalSide) (url string, stop func(), err error)

// CausalFill is one engine's store at one size step, as measured before
// its reads.
type CausalFill struct {
	Engine string `json:"engine"`
	// Size is the step's target, in records.
	Size int64 `json:"size"`
	// Before is the store's records when the step began; Records after
	// its fill, measured (nil when the count failed).
	Before  *int64 `json:"before"`
	Records *int64 `json:"records"`
	// Filled is the records the step added; FillS its seconds (VACUUM
	// included on Postgres).
	Filled int64   `json:"filled"`
	FillS  float64 `json:"fill_s"`
	// Error says why the step's store is not what it should be.
	Error string `json:"error,omitempty"`
}

// CausalFillMethod says how each engine's store is filled and why the
// fill is equal to appends through the service.
const CausalFillMethod = "The read streams are appended first through each service's API (50 events per append). " +
	"The other streams' events are then added in bulk, round-robin over the fill streams (event j to stream j mod F, as concurrent appends interleave them): " +
	"Kafka through a producer (kafka-go Writer) straight into the service's topic, in record batches of up to 1,000 records (the contract's largest append), each record what the service's append writes: key the stream id, value its envelope {type, data, metadata}, no headers, uncompressed, acks=all, partition murmur2(stream id) mod P as the service picks it; " +
	"Postgres by COPY into the service's own events table (its migrations, its schema), 50,000 rows per transaction, the columns its append writes (stream_id, version, event_type, data, metadata; created_at, global_pos and xid from their defaults). " +
	"A read scans records or index entries, not appends, so the bulk path stores what the API would, only faster; Postgres's table is VACUUMed and ANALYZEd after each step's fill, so that every step reads a table in the same state."

// causalPointName names the point of a stream of events events read
// from a store of size records.
func causalPointName(events int, size int64) string {
	return fmt.Sprintf("stream of %d events, store of %d records", events, size)
}

// parseCausalPointName is causalPointName's inverse.
func parseCausalPointName(name string) (events int, size int64, ok bool) {
	n, err := fmt.Sscanf(name, "stream of %d events, store of %d records", &events, &size)
	return events, size, err == nil && n == 2
}

// causalSides are the experiment's three engines, each on a store named
// for run id.
func causalSides(o CausalOptions, id string, now time.Time) []*CausalSide {
	timeout := CausalBackendTimeout.String()
	topic := BenchTopic(now) + "-causal"
	schema := CausalSchemaPrefix + id
	pg, kf := pairs.Get(pairs.NoKurrentDB), pairs.Get(pairs.KafkaEventStore)
	return []*CausalSide{
		{Engine: Engine{Name: pg.Name, Backend: "postgres"}, Service: pg.Name, Instance: pg.Name + "@causal", Port: pg.Port + CausalPortOffset, Store: schema,
			Env: map[string]string{"DATABASE_SCHEMA": schema, "BACKEND_TIMEOUT": timeout}},
		{Engine: Engine{Name: kf.Name, Backend: "kafka", Label: ReferenceLabel, Partitions: 1}, Service: kf.Name, Instance: kf.Name + "@causal", Port: kf.Port + CausalPortOffset, Store: topic,
			Env: map[string]string{"KAFKA_TOPIC": topic, "KAFKA_PARTITIONS": "1", "KAFKA_BROKERS": o.KafkaBrokers, "BACKEND_TIMEOUT": timeout}},
		{Engine: Engine{Name: KeyedName, Backend: "kafka", Label: KeyedLabel(o.KeyedPartitions), Partitions: o.KeyedPartitions}, Service: kf.Name, Instance: kf.Name + "@causal-keyed", Port: KeyedPort + CausalPortOffset, Store: topic + "-keyed",
			Env: map[string]string{"KAFKA_TOPIC": topic + "-keyed", "KAFKA_PARTITIONS": strconv.Itoa(o.KeyedPartitions), "KAFKA_BROKERS": o.KafkaBrokers, "BACKEND_TIMEOUT": timeout}},
	}
}

// causalStream names the read stream of events events.
func causalStream(id string, events int) string { return fmt.Sprintf("causal-%s-read-%d", id, events) }

// causalFillStream names fill stream i.
func causalFillStream(id string, i int64) string { return fmt.Sprintf("causal-%s-fill-%d", id, i) }

// causalFillEvent is the fill's j-th event: its stream, its version in that
// stream and its data.
func causalFillEvent(id string, streams int, j int64) (stream string, version int64, data string) {
	f := int64(streams)
	return causalFillStream(id, j%f), j / f, `{"liters":1,"n":` + strconv.FormatInt(j, 10) + `}`
}

// fillEnvelope is the Kafka record value the service's append writes for an
// OxygenAdded event of data with no metadata.
func fillEnvelope(data string) []byte {
	v, _ := json.Marshal(struct {
		Type     string          `json:"type"`
		Data     json.RawMessage `json:"data"`
		Metadata json.RawMessage `json:"metadata"`
	}{"OxygenAdded", json.RawMessage(data), json.RawMessage("{}")})
	return v
}

// causalRun is one run of the experiment.
type causalRun struct {
	o      CausalOptions
	id     string
	run    *driver.Run
	sides  []*CausalSide
	broken map[string]string // engine → why its later steps cannot run
	filled map[string]int64  // engine → fill events written so far
	log    io.Writer
}

// RunCausal runs the experiment with o, starting each engine's instance
// through launch, and writes its results file, whose path it returns.
// An engine whose instance, store or fill fails has its points failed
// with the reason, and the others run. The stores are deleted at the end
// (topics by DeleteTopic, the schema by DROP SCHEMA … CASCADE), the
// instances stopped before.
func RunCausal(ctx context.Context, o CausalOptions, launch CausalLauncher, log io.Writer) (string, error) {
	if err := o.Validate(); err != nil {
		return "", err
	}
	now := time.Now()
	c := &causalRun{o: o, id: runID(), run: driver.NewRun(CausalCommand, nil, now), broken: map[string]string{}, filled: map[string]int64{}, log: log}
	c.sides = causalSides(o, c.id, now)
	var engines []*Engine
	for _, s := range c.sides {
		engines = append(engines, &s.Engine)
	}
	c.run.Settings["engines"] = engines
	c.run.Settings["causal_options"] = o
	c.run.Settings["backend_timeout_s"] = CausalBackendTimeout.Seconds()
	var cleanups []func()
	cleanup := func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
		cleanups = nil
	}
	defer cleanup()
	for _, s := range c.sides {
		cleanups = append(cleanups, c.start(ctx, s, launch)...)
	}
	c.run.Settings["sides"] = c.sides
	for _, s := range c.sides {
		if c.broken[s.Name] == "" {
			c.writeStreams(ctx, s)
		}
	}
	var fills []CausalFill
	for _, size := range o.Run() {
		if ctx.Err() != nil {
			break
		}
		for _, s := range c.sides {
			f := c.fill(ctx, s, size)
			fmt.Fprintf(log, "causal: %s at %s: %s\n", s.Name, causalCount(size), causalFillText(f))
			fills = append(fills, f)
		}
		c.run.Settings["fills"] = fills
		for _, n := range o.Streams {
			c.readPoint(ctx, n, size, fills)
		}
	}
	c.run.Settings["fills"] = fills
	// Instances stopped and stores deleted before the file is written,
	// so that a cleanup that failed is in its notes.
	cleanup()
	c.run.FinishedAt = time.Now().UTC()
	if err := ctx.Err(); err != nil {
		c.run.Aborted = err.Error()
	}
	path, err := driver.WriteRun(o.Out, c.run)
	return path, errors.Join(err, ctx.Err())
}

func causalFillText(f CausalFill) string {
	if f.Error != "" {
		return "failed: " + f.Error
	}
	return fmt.Sprintf("added %s records in %.1f s, holds %s", causalCount(f.Filled), f.FillS, causalCount(*f.Records))
}

// causalCount formats n with thousands separators.
func causalCount(n int64) string {
	s := strconv.FormatInt(n, 10)
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 && s[i-1] != '-' {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// start creates side's store and starts its instance; a failure breaks
// the side. It returns the cleanups, to run in reverse order.
func (c *causalRun) start(ctx context.Context, s *CausalSide, launch CausalLauncher) []func() {
	var cleanups []func()
	if s.Backend == "kafka" {
		if err := CreateTopicPartitions(ctx, c.o.KafkaBrokers, s.Store, s.Partitions); err != nil {
			c.broken[s.Name] = err.Error()
			return nil
		}
		cleanups = append(cleanups, func() {
			if err := DeleteTopic(context.Background(), c.o.KafkaBrokers, s.Store); err != nil {
				c.run.Note("causal: %v", err)
			}
		})
	} else {
		// The instance's migrations create the schema.
		cleanups = append(cleanups, func() {
			if err := dropCausalSchema(context.Background(), c.o.DatabaseURL, s.Store); err != nil {
				c.run.Note("causal: %v", err)
			}
		})
	}
	ls := *s
	if s.Backend == "postgres" {
		ls.Env = maps.Clone(s.Env)
		ls.Env["DATABASE_URL"] = c.o.DatabaseURL
	}
	url, stop, err := launch(ctx, ls)
	if err != nil {
		c.broken[s.Name] = "its instance did not start: " + causalFirstLine(err.Error())
		return cleanups
	}
	s.URL, s.Up = url, true
	if stop != nil {
		cleanups = append(cleanups, stop)
	}
	return cleanups
}

func causalFirstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

// dropCausalSchema drops schema, one the experiment named.
func dropCausalSchema(ctx context.Context, dbURL, schema string) error {
	if !strings.HasPrefix(schema, CausalSchemaPrefix) {
		return fmt.Errorf("drop schema %s: not a causal experiment schema (%s…)", schema, CausalSchemaPrefix)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return fmt.Errorf("drop schema %s: %w", schema, err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
		return fmt.Errorf("drop schema %s: %w", schema, err)
	}
	return nil
}

// writeStreams appends the read streams through s's API.
func (c *causalRun) writeStreams(ctx context.Context, s *CausalSide) {
	for _, n := range c.o.Streams {
		err := prefill(ctx, s.URL, causalStream(c.id, n), n)
		if err != nil {
			c.broken[s.Name] = fmt.Sprintf("writing the %d-event read stream: %v", n, err)
			return
		}
	}
}

// records measures s's store: the topic's records over every partition,
// or the events table's rows.
func (c *causalRun) records(ctx context.Context, s *CausalSide) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if s.Backend == "kafka" {
		n, _, err := TopicAllRecords(ctx, c.o.KafkaBrokers, s.Store)
		return n, err
	}
	n, _, err := EventsTable(ctx, c.o.DatabaseURL, s.Store)
	return n, err
}

// fill brings s's store to size records (or, at the first step, to the
// read streams alone when they hold more) and measures it.
func (c *causalRun) fill(ctx context.Context, s *CausalSide, size int64) CausalFill {
	f := CausalFill{Engine: s.Name, Size: size}
	if why := c.broken[s.Name]; why != "" {
		f.Error = why
		return f
	}
	fail := func(err error) CausalFill {
		f.Error = err.Error()
		c.broken[s.Name] = fmt.Sprintf("the fill to %s records failed: %v", causalCount(size), err)
		return f
	}
	before, err := c.records(ctx, s)
	if err != nil {
		return fail(err)
	}
	f.Before = &before
	t0 := time.Now()
	if need := size - before; need > 0 {
		if s.Backend == "kafka" {
			err = c.fillKafka(ctx, s, need)
		} else {
			err = c.fillPostgres(ctx, s, need)
		}
		if err != nil {
			return fail(err)
		}
		f.Filled = need
	}
	if s.Backend == "postgres" {
		if err := causalVacuum(ctx, c.o.DatabaseURL, s.Store); err != nil {
			return fail(err)
		}
	}
	f.FillS = round2(time.Since(t0).Seconds())
	after, err := c.records(ctx, s)
	if err != nil {
		return fail(err)
	}
	f.Records = &after
	if want := max(size, c.o.streamRecords()); after != want {
		return fail(fmt.Errorf("the store holds %s records after the fill, not %s", causalCount(after), causalCount(want)))
	}
	return f
}

// fillKafka produces n fill events into s's topic.
func (c *causalRun) fillKafka(ctx context.Context, s *CausalSide, n int64) error {
	b, _, _ := strings.Cut(c.o.KafkaBrokers, ",")
	w := &kafka.Writer{Addr: kafka.TCP(strings.TrimSpace(b)), Topic: s.Store, Balancer: kafka.Murmur2Balancer{Consistent: true},
		RequiredAcks: kafka.RequireAll, BatchSize: causalFillAppend, BatchBytes: 1 << 20, BatchTimeout: 5 * time.Millisecond,
		WriteTimeout: 30 * time.Second, ReadTimeout: 30 * time.Second}
	defer w.Close()
	const chunk = 50_000
	start := c.filled[s.Name]
	for done := int64(0); done < n; {
		k := min(chunk, n-done)
		msgs := make([]kafka.Message, k)
		now := time.Now()
		for i := range msgs {
			stream, _, data := causalFillEvent(c.id, c.o.FillStreams, start+done+int64(i))
			msgs[i] = kafka.Message{Key: []byte(stream), Value: fillEnvelope(data), Time: now}
		}
		wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		err := w.WriteMessages(wctx, msgs...)
		cancel()
		if err != nil {
			return fmt.Errorf("produce to %s: %w", s.Store, err)
		}
		done += k
		c.filled[s.Name] = start + done
	}
	return nil
}

// fillPostgres COPYs n fill events into s's events table.
func (c *causalRun) fillPostgres(ctx context.Context, s *CausalSide, n int64) error {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(cctx, c.o.DatabaseURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	start := c.filled[s.Name]
	for done := int64(0); done < n; {
		k := min(causalCopyChunk, n-done)
		base := start + done
		err := pgx.BeginFunc(cctx, conn, func(tx pgx.Tx) error {
			// As no-kurrentdb's debounced appends do: no NOTIFY per
			// statement (nobody subscribes to this schema).
			if _, err := tx.Exec(cctx, `SELECT set_config('eventstore.notify', 'off', true)`); err != nil {
				return err
			}
			i := int64(0)
			_, err := tx.CopyFrom(cctx, pgx.Identifier{s.Store, "events"}, []string{"stream_id", "version", "event_type", "data", "metadata"},
				pgx.CopyFromFunc(func() ([]any, error) {
					if i == k {
						return nil, nil
					}
					stream, version, data := causalFillEvent(c.id, c.o.FillStreams, base+i)
					i++
					return []any{stream, version, "OxygenAdded", data, "{}"}, nil
				}))
			return err
		})
		if err != nil {
			return fmt.Errorf("COPY into %s.events: %w", s.Store, err)
		}
		done += k
		c.filled[s.Name] = start + done
	}
	return nil
}

// causalVacuum runs VACUUM (ANALYZE) on schema.events.
func causalVacuum(ctx context.Context, dbURL, schema string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "VACUUM (ANALYZE) "+pgx.Identifier{schema, "events"}.Sanitize()); err != nil {
		return fmt.Errorf("VACUUM %s.events: %w", schema, err)
	}
	return nil
}

// readPoint reads the stream of events events on every engine, o.Reads
// times each, the engines' order rotated per read: one point of the
// results.
func (c *causalRun) readPoint(ctx context.Context, events int, size int64, fills []CausalFill) {
	stream := causalStream(c.id, events)
	p := driver.Point{Scenario: CausalPoint, Name: causalPointName(events, size)}
	stored := map[string]float64{}
	scan := map[string]causalScan{}
	for _, s := range c.sides {
		p.Sides = append(p.Sides, s.Name)
		if why := c.broken[s.Name]; why != "" {
			p.FailSide(s.Name, why)
			continue
		}
		for _, f := range fills {
			if f.Engine == s.Name && f.Size == size && f.Records != nil {
				stored[s.Name] = float64(*f.Records)
			}
		}
		// The warm-up read, untimed, also checks the stream.
		r, _, err := c.read(ctx, s, stream)
		if err == nil && len(r.Events) != events {
			err = fmt.Errorf("stream %s holds %d events on this engine, not %d", stream, len(r.Events), events)
		}
		if err == nil && s.Backend == "postgres" {
			scan[s.Name], err = explainCausalRead(ctx, c.o.DatabaseURL, s.Store, stream, events)
		}
		if err != nil {
			p.FailSide(s.Name, err.Error())
		}
	}
	err := driver.RunPoint(ctx, &p, c.o.Reads, func(ctx context.Context, svc string, _ int) (*driver.SideResult, error) {
		var s *CausalSide
		for _, x := range c.sides {
			if x.Name == svc {
				s = x
			}
		}
		r, ms, err := c.read(ctx, s, stream)
		if err != nil {
			return nil, err
		}
		m := map[driver.Metric]float64{MetricReadMS: round2(ms), MetricMatched: float64(len(r.Events)), MetricStoreRecords: stored[svc]}
		if r.RecordsScanned != nil {
			m[MetricRecordsScanned] = float64(*r.RecordsScanned)
		}
		if sc, ok := scan[svc]; ok {
			m[MetricRowsTouched], m[MetricSharedBuffers] = float64(sc.Rows), float64(sc.Buffers)
		}
		return &driver.SideResult{Metrics: m}, nil
	})
	if err != nil {
		c.run.Note("causal: %s: %v", p.Name, err)
	}
	c.run.Points = append(c.run.Points, p)
	var parts []string
	for _, svc := range p.Sides {
		if a, ok := causalAgg(&p, MetricReadMS, svc); ok {
			parts = append(parts, fmt.Sprintf("%s %.1f ms", svc, a.Median))
		} else {
			parts = append(parts, svc+" failed")
		}
	}
	fmt.Fprintf(c.log, "causal: %s: %s\n", p.Name, strings.Join(parts, ", "))
}

func causalAgg(p *driver.Point, metric driver.Metric, side string) (driver.Agg, bool) {
	m := p.Find(metric)
	if m == nil {
		return driver.Agg{}, false
	}
	a, ok := m.Sides[side]
	return a, ok
}

// read GETs the whole stream from s, timing the request and its answer's
// transfer (not the client's JSON decoding).
func (c *causalRun) read(ctx context.Context, s *CausalSide, stream string) (readResult, float64, error) {
	var r readResult
	t0 := time.Now()
	status, b, err := driver.Do(ctx, http.MethodGet, s.URL+"/streams/"+stream+"?limit="+strconv.Itoa(contract.MaxReadLimit), nil)
	ms := float64(time.Since(t0).Microseconds()) / 1000
	if err != nil {
		return r, ms, fmt.Errorf("read %s: %w", stream, err)
	}
	if status != http.StatusOK {
		return r, ms, fmt.Errorf("read %s: answered %d: %s", stream, status, causalFirstLine(string(b)))
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, ms, fmt.Errorf("read %s: %w", stream, err)
	}
	return r, ms, nil
}

// causalReadSQL is no-kurrentdb's read of one stream (its readSQL,
// services/no-kurrentdb/store.go; TestCausalReadSQLIsTheService's keeps
// them equal), which explainCausalRead runs under EXPLAIN.
const causalReadSQL = `
SELECT m.last, e.version, e.global_pos, e.xid::text, e.event_type, e.data, e.metadata, e.created_at
FROM (SELECT max(version) AS last FROM events WHERE stream_id = $1) m
LEFT JOIN LATERAL (
    SELECT version, global_pos, xid, event_type, data, metadata, created_at
    FROM events
    WHERE stream_id = $1 AND version >= $2
    ORDER BY version
    LIMIT $3
) e ON true
ORDER BY e.version`

// causalScan is what one read of a stream touched in Postgres, from EXPLAIN
// (ANALYZE, BUFFERS): the rows its scans of the table visited (returned,
// filtered out, or rechecked away; heap fetches of index-only scans) and
// the shared buffers it hit or read.
type causalScan struct {
	Rows, Buffers int64
}

// causalPlanNode is a node of EXPLAIN (FORMAT JSON).
type causalPlanNode struct {
	NodeType       string           `json:"Node Type"`
	RelationName   string           `json:"Relation Name"`
	ActualRows     float64          `json:"Actual Rows"`
	ActualLoops    float64          `json:"Actual Loops"`
	RemovedFilter  float64          `json:"Rows Removed by Filter"`
	RemovedRecheck float64          `json:"Rows Removed by Index Recheck"`
	HeapFetches    float64          `json:"Heap Fetches"`
	SharedHit      int64            `json:"Shared Hit Blocks"`
	SharedRead     int64            `json:"Shared Read Blocks"`
	Plans          []causalPlanNode `json:"Plans"`
}

// scanRows is the rows the scans of a table under n visited (nodes with
// a relation: a subquery or CTE scan re-reads rows already counted).
func (n causalPlanNode) scanRows() float64 {
	var rows float64
	if n.RelationName != "" {
		rows = (n.ActualRows+n.RemovedFilter+n.RemovedRecheck)*max(n.ActualLoops, 1) + n.HeapFetches
	}
	for _, c := range n.Plans {
		rows += c.scanRows()
	}
	return rows
}

// parseCausalExplain reads EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)'s output.
func parseCausalExplain(b []byte) (causalScan, error) {
	var out []struct {
		Plan causalPlanNode `json:"Plan"`
	}
	if err := json.Unmarshal(b, &out); err != nil || len(out) != 1 {
		return causalScan{}, fmt.Errorf("EXPLAIN output is not one plan: %v", err)
	}
	p := out[0].Plan
	return causalScan{Rows: int64(p.scanRows() + 0.5), Buffers: p.SharedHit + p.SharedRead}, nil
}

// explainCausalRead runs the service's read of stream (limit events) in
// schema under EXPLAIN (ANALYZE, BUFFERS).
func explainCausalRead(ctx context.Context, dbURL, schema, stream string, limit int) (causalScan, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return causalScan{}, err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "SET search_path TO "+pgx.Identifier{schema}.Sanitize()); err != nil {
		return causalScan{}, err
	}
	var b []byte
	if err := conn.QueryRow(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)"+causalReadSQL, stream, int64(0), int64(limit)).Scan(&b); err != nil {
		return causalScan{}, fmt.Errorf("EXPLAIN the read of %s: %w", stream, err)
	}
	return parseCausalExplain(b)
}
