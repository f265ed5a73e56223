package raw

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/resultfile"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// SchemaVersion is the version of the raw results file's shape. Version
// 2 holds figures, statuses and settings only: what a loop counts, and
// how, is worded here (Results.LoopDesc) from the settings. Load reads
// every version from OldestSchema on.
const SchemaVersion = 2

// OldestSchema is the oldest version Load reads: version 1 files held
// each loop's description (Result.Desc).
const OldestSchema = 1

// Schema is the versions Load reads, under resultfile's one rule.
var Schema = resultfile.Schema{Oldest: OldestSchema, Current: SchemaVersion}

// Engines measured, the Engine of a Result.
const (
	Postgres = "postgres"
	RabbitMQ = "rabbitmq"
	Kafka    = "kafka"
)

// Loops, the Loop of a Result.
const (
	// InsertCommit is one row per transaction from Options.Conns
	// connections.
	InsertCommit = "insert_commit"
	// InsertBatch is a 100-row multi-row INSERT per transaction.
	InsertBatch = "insert_batch"
	// ClaimDelete is FOR UPDATE SKIP LOCKED claims of claimBatch (256)
	// rows, then a DELETE of them by id, on an unlogged table like
	// queue_jobs.
	ClaimDelete = "claim_delete"
	// RecordUpdate is claimBatch-row (256) UPDATEs by primary key of a logged record
	// table (status and a timestamp, with a partial index on open
	// statuses), as the queue pair's task records are updated on delivery
	// and completion.
	RecordUpdate = "record_update"
	// Wal2JSON is the decoding rate of inserted rows through one logical
	// slot with wal2json (format-version 2, as no-kafka streams it).
	Wal2JSON = "wal2json_decode"
	// Publish is amqp091 publishing with pipelined publisher confirms.
	Publish = "publish"
	// Consume is amqp091 consuming with a prefetch and multiple acks.
	Consume = "consume"
	// Produce is kafka-go producing in batches with acks=all.
	Produce = "produce"
	// Fetch is kafka-go reading with Conn.ReadBatch.
	Fetch = "fetch"
)

// Options say where the engines are and how long each loop runs.
type Options struct {
	// PostgresURL, RabbitMQURL and KafkaBrokers locate the engines.
	PostgresURL, RabbitMQURL string
	KafkaBrokers             []string
	// Duration is each loop's duration.
	Duration time.Duration
	// Conns is the concurrency of the loops that have one (connections,
	// channels, producers).
	Conns int
	// Name makes the scratch schema, queue and topic unique
	// ("wpe_raw_<name>").
	Name string
	// Only, when not empty, limits the loops to these engines
	// ("postgres", "rabbitmq", "kafka").
	Only []string
	// Log receives one line per loop; nil for none.
	Log func(format string, args ...any)
	// RetentionRows sizes the retention measurement (MeasureRetention,
	// with the Postgres loops); 0 skips it.
	RetentionRows int
}

// DefaultOptions are the stack's servers, 3 s per loop, 8 connections.
func DefaultOptions() Options {
	o := Options{
		PostgresURL: envOr("DATABASE_URL", pairs.DefaultPostgresURL),
		RabbitMQURL: envOr("RABBITMQ_URL", pairs.DefaultRabbitMQURL),
		Duration:    3 * time.Second, Conns: 8, RetentionRows: DefaultRetentionRows,
		Name: fmt.Sprintf("%d", time.Now().UnixNano()%1e9),
	}
	o.KafkaBrokers = strings.Split(envOr("KAFKA_BROKERS", pairs.DefaultKafkaBrokers), ",")
	return o
}

func envOr(k, d string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return d
}

func (o Options) logf(format string, args ...any) {
	if o.Log != nil {
		o.Log(format, args...)
	}
}

// Result is one loop's outcome.
type Result struct {
	// Engine and Loop name the loop.
	Engine string `json:"engine"`
	Loop   string `json:"loop"`
	// Desc said what one item is and how the loop ran, in files of schema
	// 1; LoopDesc words it now.
	Desc string `json:"desc,omitempty"`
	// Items counts rows, messages or records; Seconds is the loop's
	// wall time; Rate is Items / Seconds.
	Items   int64   `json:"items"`
	Seconds float64 `json:"seconds"`
	Rate    float64 `json:"rate"`
	// Error is set when the loop could not run (Rate is then 0).
	Error string `json:"error,omitempty"`
	// RanOut is set when the loop's rows ran out before its end.
	RanOut bool `json:"ran_out,omitempty"`
}

// Results is one raw run: the results file.
type Results struct {
	Schema     int            `json:"schema"`
	ID         string         `json:"id"`
	StartedAt  time.Time      `json:"started_at"`
	FinishedAt time.Time      `json:"finished_at"`
	Machine    driver.Machine `json:"machine"`
	// Settings are the loops' parameters.
	Settings map[string]any `json:"settings"`
	Loops    []Result       `json:"loops"`
	// Notify is the NOTIFY series (notify.go), when Postgres was measured.
	Notify *NotifySeries `json:"notify,omitempty"`
	// Retention is the retention measurement, when it ran.
	Retention *Retention `json:"retention,omitempty"`
}

// loop is one declared loop (or a pair of loops: the consuming loop
// reads what its producing loop wrote, on one scratch queue or topic).
type loop struct {
	engine string
	names  []string
	run    func(ctx context.Context, o Options) ([]Result, error)
	// descs say what each of names counts, and how (Results.LoopDesc).
	descs []func(f figures, ranOut bool) string
}

// one adapts a single loop to the loops table.
func one(fn func(context.Context, Options) (Result, error)) func(context.Context, Options) ([]Result, error) {
	return func(ctx context.Context, o Options) ([]Result, error) {
		r, err := fn(ctx, o)
		return []Result{r}, err
	}
}

// loops are every loop, in the order they run and are reported.
var loops = []loop{
	{Postgres, []string{InsertCommit}, one(insertCommit), descs(insertCommitDesc)},
	{Postgres, []string{InsertBatch}, one(insertBatch), descs(insertBatchDesc)},
	{Postgres, []string{ClaimDelete}, one(claimDelete), descs(claimDeleteDesc)},
	{Postgres, []string{RecordUpdate}, one(recordUpdate), descs(recordUpdateDesc)},
	{Postgres, []string{Wal2JSON}, one(wal2jsonDecode), descs(wal2jsonDesc)},
	{RabbitMQ, []string{Publish, Consume}, amqpPair, descs(publishDesc, consumeDesc)},
	{Kafka, []string{Produce, Fetch}, kafkaPair, descs(produceDesc, fetchDesc)},
}

// descs lists a loop's descriptions, one per name.
func descs(fs ...func(figures, bool) string) []func(figures, bool) string { return fs }

// figures are the loops' parameters their descriptions word, recorded in
// a run's settings; a file that lacks one (schema 1) is read with this
// code's constant.
type figures struct {
	Conns           int `json:"conns"`
	BatchInsertRows int `json:"batch_insert_rows"`
	ClaimBatch      int `json:"claim_batch"`
	ClaimFill       int `json:"claim_fill"`
	RecordFill      int `json:"record_fill"`
	SlotRows        int `json:"slot_rows"`
	AMQPPrefetch    int `json:"amqp_prefetch"`
	AMQPWindow      int `json:"amqp_confirm_window"`
	AMQPPublishers  int `json:"amqp_publishers"`
	AMQPAckEvery    int `json:"amqp_ack_every"`
	KafkaBatch      int `json:"kafka_batch"`
	KafkaPartitions int `json:"kafka_partitions"`
	KafkaProducers  int `json:"kafka_producers"`
}

// settings are a run's settings with o: every figure, each loop's
// duration and the payload's size.
func settings(o Options) map[string]any {
	f := figures{Conns: o.Conns, BatchInsertRows: insertBatchRows, ClaimBatch: claimBatch, ClaimFill: claimFill, RecordFill: recordFill,
		SlotRows: slotRows, AMQPPrefetch: amqpPrefetch, AMQPWindow: amqpWindow, AMQPPublishers: amqpPublishers, AMQPAckEvery: amqpAckEvery,
		KafkaBatch: kafkaBatch, KafkaPartitions: kafkaPartitions, KafkaProducers: kafkaProducers}
	s := map[string]any{}
	b, _ := json.Marshal(f)
	_ = json.Unmarshal(b, &s)
	s["duration_s"], s["payload_bytes"] = o.Duration.Seconds(), len(payload)
	return s
}

// figures reads r's figures from its settings, this code's constants
// standing in for those a file of schema 1 did not record.
func (r Results) figures() figures {
	var f figures
	b, _ := json.Marshal(settings(Options{}))
	_ = json.Unmarshal(b, &f)
	b, _ = json.Marshal(r.Settings)
	_ = json.Unmarshal(b, &f)
	return f
}

// LoopDesc says what loop l of r counts, and how: the loop's own words
// (descs) from r's figures, or the description a file of schema 1 held.
func (r Results) LoopDesc(l Result) string {
	if l.Desc != "" {
		return l.Desc
	}
	for _, lp := range loops {
		if i := slices.Index(lp.names, l.Loop); lp.engine == l.Engine && i >= 0 {
			return lp.descs[i](r.figures(), l.RanOut)
		}
	}
	return ""
}

// Estimate is Measure's expected wall time with o: each loop's duration
// plus its setup (filling a queue, writing rows for the slot, draining).
func Estimate(o Options) time.Duration {
	return 9*o.Duration + 25*time.Second + notifyEstimate(o) + RetentionEstimate(o)
}

// Measure runs every loop in turn. A loop that fails is recorded with its
// error and the others still run; only a cancelled ctx stops it early.
func Measure(ctx context.Context, o Options) (Results, error) {
	now := time.Now().UTC()
	res := Results{
		Schema: SchemaVersion, ID: resultfile.ID(now, resultfile.Raw), StartedAt: now,
		Machine:  driver.ThisMachine(),
		Settings: settings(o),
	}
	for _, l := range loops {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		if len(o.Only) > 0 && !slices.Contains(o.Only, l.engine) {
			continue
		}
		lctx, cancel := context.WithTimeout(ctx, 6*o.Duration+60*time.Second)
		rs, err := l.run(lctx, o)
		cancel()
		for i, name := range l.names {
			var r Result
			if i < len(rs) {
				r = rs[i]
			}
			r.Engine, r.Loop = l.engine, name
			if err != nil && (r.Rate == 0 || i == len(l.names)-1) {
				r.Error, r.Rate = err.Error(), 0
			}
			if r.Error != "" {
				o.logf("raw %s %s: %s", r.Engine, r.Loop, r.Error)
			} else {
				o.logf("raw %s %s: %.0f/s (%d in %.1fs)", r.Engine, r.Loop, r.Rate, r.Items, r.Seconds)
			}
			res.Loops = append(res.Loops, r)
		}
	}
	if ctx.Err() == nil && (len(o.Only) == 0 || slices.Contains(o.Only, Postgres)) {
		res.Notify = measureNotify(ctx, o)
	}
	if o.RetentionRows > 0 && ctx.Err() == nil && (len(o.Only) == 0 || slices.Contains(o.Only, Postgres)) {
		rctx, cancel := context.WithTimeout(ctx, 10*RetentionEstimate(o)+time.Minute)
		rr, err := MeasureRetention(rctx, o)
		cancel()
		o.logf("raw retention: %s", rr.summary(err))
		res.Retention = &rr
	}
	res.FinishedAt = time.Now().UTC()
	return res, ctx.Err()
}

// finish fills r's rate from n items over d.
func finish(r *Result, n int64, d time.Duration) {
	r.Items, r.Seconds = n, math.Round(d.Seconds()*1000)/1000
	if d > 0 {
		r.Rate = math.Round(float64(n)/d.Seconds()*10) / 10
	}
}

// payload is every item's body, about the size of a queue task's or a log
// event's JSON.
var payload = []byte(`{"kind":"load","payload":{"n":12345,"note":"raw engine loop"},"fail_times":0}`)

// Find returns the result of engine's loop, if measured.
func (r Results) Find(engine, loop string) (Result, bool) {
	for _, l := range r.Loops {
		if l.Engine == engine && l.Loop == loop && l.Error == "" && l.Rate > 0 {
			return l, true
		}
	}
	return Result{}, false
}

// Write writes r to dir/<id>.json and returns the path.
func Write(dir string, r Results) (string, error) {
	return resultfile.Write(dir, resultfile.FileOf(r.ID), r)
}

// Load reads the newest raw results file in dir; a zero Results (no
// Loops) and no error when there is none.
func Load(dir string) (Results, error) {
	path := resultfile.Newest(dir, resultfile.Raw)
	if path == "" {
		return Results{}, nil
	}
	return Read(path)
}

// Read reads the raw results file at path, refusing unknown fields and
// versions outside Schema.
func Read(path string) (Results, error) {
	var r Results
	if err := resultfile.Read(path, &r); err != nil {
		return Results{}, err
	}
	if err := Schema.Check(path, r.Schema); err != nil {
		return Results{}, err
	}
	return r, nil
}
