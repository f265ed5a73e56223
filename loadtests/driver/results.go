package driver

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/resultfile"
)

// SchemaVersion is the version of the results file's shape; it changes
// when a field changes meaning or disappears. Version 2 holds figures,
// statuses and settings only: the sentences that explain a scenario's
// figures live beside the scenario (scenario.Explain) and Ceiling.Spec
// replaces Ceiling.Criteria. ReadRun reads every version from
// OldestSchema on.
const SchemaVersion = 2

// OldestSchema is the oldest version ReadRun reads: version 1 files
// kept the explanations in Notes and each ceiling's criteria in words.
const OldestSchema = 1

// RunSchema is the versions ReadRun reads, under resultfile's one rule.
var RunSchema = resultfile.Schema{Oldest: OldestSchema, Current: SchemaVersion}

// Run is one results file: every point one command measured.
type Run struct {
	// Schema is SchemaVersion.
	Schema int `json:"schema"`
	// ID names the run and its file: "20260102T150405Z-queue".
	ID string `json:"id"`
	// Command is the pair or command that ran: queue, log, documents.
	Command string `json:"command"`
	// Args are the command-line arguments.
	Args []string `json:"args"`
	// StartedAt and FinishedAt bound the run.
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at"`
	// Machine is where it ran.
	Machine Machine `json:"machine"`
	// Versions are the servers' versions.
	Versions Versions `json:"versions"`
	// Settings are the run's parameters (durations, rounds, rates, the
	// services' environment overrides).
	Settings map[string]any `json:"settings"`
	// Points are the fixed measurements, each over several rounds.
	Points []Point `json:"points"`
	// Ceilings are the ceiling searches.
	Ceilings []Ceiling `json:"ceilings"`
	// Notes are the run's incidents, each "what: why" (a variant not
	// measured and its error, the run ended early): never a sentence
	// that explains a figure, which belongs beside the scenario's code
	// (files of schema 1 held those too).
	Notes []string `json:"notes"`
	// StartState is what the pair's tables held at the start (absent in
	// files written before runs declared it).
	StartState *StartState `json:"start_state,omitempty"`
	// Aborted is why the command ended before its last point ("" when
	// it ran to the end; older files left a note instead, see
	// AbortReason).
	Aborted string `json:"aborted,omitempty"`
}

// Machine describes the host the driver (and, on the native stack, every
// server) ran on.
type Machine struct {
	Hostname    string `json:"hostname"`
	OS          string `json:"os"`
	Arch        string `json:"arch"`
	CPUModel    string `json:"cpu_model"`
	CPUs        int    `json:"cpus"`
	MemoryBytes int64  `json:"memory_bytes"`
	GoVersion   string `json:"go_version"`
}

// Versions are the servers' versions as they reported them. A field is
// empty when the server could not be asked; Errors says why.
type Versions struct {
	// Postgres is SHOW server_version.
	Postgres string `json:"postgres"`
	// PostgresSettings are the server settings that shape every Postgres
	// figure (versions.PostgresSettingNames), as the run saw them
	// (absent in files written before they were recorded).
	PostgresSettings map[string]string `json:"postgres_settings,omitempty"`
	// Wal2json is the version of the wal2json output plugin installed
	// for that server, and where it was learned (absent in files written
	// before it was recorded).
	Wal2json string `json:"wal2json,omitempty"`
	// RabbitMQ and Erlang come from the management API's /api/overview.
	RabbitMQ string `json:"rabbitmq"`
	Erlang   string `json:"erlang"`
	// Kafka is the broker's version and where it was learned.
	Kafka string `json:"kafka"`
	// Mongo is buildInfo's version; MongoFlavor is "MongoDB" or
	// "FerretDB" (FerretDB answers buildInfo with ferretdb* fields);
	// FerretDB is FerretDB's own version when it is FerretDB.
	Mongo       string `json:"mongo"`
	MongoFlavor string `json:"mongo_flavor"`
	FerretDB    string `json:"ferretdb,omitempty"`
	// Redis is INFO server's redis_version.
	Redis string `json:"redis,omitempty"`
	// Errors maps a server to the reason its version is missing.
	Errors map[string]string `json:"errors,omitempty"`
	// Fsync is this machine's cost of a durable write (absent in files
	// written before it was measured).
	Fsync *Fsync `json:"fsync,omitempty"`
}

// Fsync is what pg_test_fsync measured on the filesystem of Postgres'
// data directory: the floor under every commit that waits for its WAL
// flush. The ops/sec are nil when not measured; Error says why.
type Fsync struct {
	// Tool is the command run ("pg_test_fsync -s 1 -f <dir>/…").
	Tool string `json:"tool"`
	// Dir is the directory its test file was written in.
	Dir string `json:"dir"`
	// FdatasyncOpsPerSec and FsyncOpsPerSec are one 8 kB write followed by
	// fdatasync (Linux's default wal_sync_method) or fsync, per second.
	FdatasyncOpsPerSec *float64 `json:"fdatasync_ops_per_sec"`
	FsyncOpsPerSec     *float64 `json:"fsync_ops_per_sec,omitempty"`
	// Error says why it was not measured.
	Error string `json:"error,omitempty"`
}

// Point is one measurement of a pair, over several rounds.
type Point struct {
	// Scenario groups points: "queue.rate", "queue.durable", "log.rate",
	// "log.sync_off", "documents.search", "documents.rewrite".
	Scenario ScenarioName `json:"scenario"`
	// Name labels the point within the scenario ("1000/s", "512KB").
	Name string `json:"name"`
	// Rate is the arrival rate per second (0 when not rate-based).
	Rate float64 `json:"rate"`
	// DurationS is each attack's duration in seconds.
	DurationS float64 `json:"duration_s"`
	// Sides are the services compared, A first: ratios are A/B.
	Sides []string `json:"sides"`
	// Env holds each side's environment overrides for this point.
	Env map[string]map[string]string `json:"env,omitempty"`
	// Rounds are every round, in order.
	Rounds []Round `json:"rounds"`
	// Metrics summarizes the rounds (Summarize).
	Metrics []MetricSummary `json:"metrics"`
	// Status is each side's validity over every round (Validate): a
	// side that is not ok has no figure worth printing. Absent in files
	// written before statuses existed; ReadRun derives it.
	Status map[string]Status `json:"status,omitempty"`
}

// Round is one round of a point: each side once, in Order.
type Round struct {
	// Index counts rounds from 0.
	Index int `json:"index"`
	// Order is the order the sides ran in.
	Order []string `json:"order"`
	// Sides maps a service to what it measured.
	Sides map[string]*SideResult `json:"sides"`
}

// SideResult is one side's part of a round.
type SideResult struct {
	// Service is the service's name.
	Service string `json:"service"`
	// StartedAt is when its stats were reset.
	StartedAt time.Time `json:"started_at"`
	// Phases are its attacks, in order (one for most points; "rewrite"
	// then "patch" for the documents rewrite point).
	Phases []Phase `json:"phases"`
	// Stats is GET /stats at the end of the round (after the settle
	// wait), covering the whole round.
	Stats *ServerStats `json:"stats,omitempty"`
	// ProgressAtEnd is GET /queue or /consumer right after the last
	// attack; Progress the same after the settle wait.
	ProgressAtEnd json.RawMessage `json:"progress_at_end,omitempty"`
	Progress      json.RawMessage `json:"progress,omitempty"`
	// Metrics are the flat numbers compared across sides and rounds
	// ("client.p99_ms", "server.delivery.p99_ms", "backlog_end", ...).
	Metrics map[Metric]float64 `json:"metrics"`
	// Error is set when the side could not be measured.
	Error string `json:"error,omitempty"`
	// Precondition says why the side's starting state was not the one
	// its scenario declares (a replication slot behind, a queue not
	// empty, a table not at its size), proven before its load began:
	// the round is invalid (StateInvalid) and its figures unused.
	Precondition string `json:"precondition,omitempty"`
	// Status is set (by Validate) when this round of the side is not
	// ok.
	Status *Status `json:"status,omitempty"`
}

// Phase is one attack of a side.
type Phase struct {
	// Name is the phase ("send", "write", "search", "rewrite", "patch").
	Name string `json:"name"`
	// Client is what the driver saw.
	Client ClientResult `json:"client"`
	// WALBytes is pg_current_wal_lsn()'s advance over the phase (whole
	// cluster), when measured.
	WALBytes *int64 `json:"wal_bytes,omitempty"`
}

// ServerStats is a service's GET /stats body.
type ServerStats struct {
	Service           string             `json:"service"`
	Pair              string             `json:"pair"`
	Backend           string             `json:"backend"`
	SinceResetSeconds float64            `json:"since_reset_s"`
	Counters          map[string]int64   `json:"counters"`
	Latencies         map[string]Summary `json:"latencies"`
}

// MetricSummary is one number summarized over a point's rounds.
type MetricSummary struct {
	// Name is the metric's key in SideResult.Metrics.
	Name Metric `json:"name"`
	// Sides maps a service to its median, min and max across rounds.
	Sides map[string]Agg `json:"sides"`
	// Ratios holds A/B per round (null where B was 0 or a side missing).
	Ratios []*float64 `json:"ratios"`
	// Ratio is the median of Ratios.
	Ratio *float64 `json:"ratio"`
}

// Agg is a median with its range.
type Agg struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	N      int     `json:"n"`
}

// Ceiling is one side's ceiling search, over several rounds.
type Ceiling struct {
	// Scenario is "queue.ceiling" or "log.ceiling".
	Scenario ScenarioName `json:"scenario"`
	// Service is the side searched.
	Service string `json:"service"`
	// Criteria said in words what a passing step is, in files of schema
	// 1; files of schema 2 leave it out: Spec holds it as figures, and
	// the report words it (scenario.CriteriaText).
	Criteria string `json:"criteria,omitempty"`
	// Rounds are every search.
	Rounds []CeilingRound `json:"rounds"`
	// Rate is the median ceiling with its range.
	Rate Agg `json:"rate"`
	// Status is the search's validity (Validate); absent in older files.
	Status *Status `json:"status,omitempty"`
	// Spec is what a passing step is, as figures, with the in-flight bound the services
	// ran the search with and the side's own low-rate p99 (absent in
	// files written before it was recorded): two sides' ceilings are
	// compared only when their specs agree.
	Spec *CeilingSpec `json:"spec,omitempty"`
}

// CeilingSpec is what a ceiling step had to meet, as figures: a step
// passes when each share and bound holds.
type CeilingSpec struct {
	// Latency names the server-side latency judged ("processing",
	// "delivery").
	Latency string `json:"latency"`
	// StepS is each step's duration in seconds.
	StepS float64 `json:"step_s"`
	// ErrorShare and ShedShare are the shares of the requests sent that
	// may fail or be shed; SentShare the least share of the rate the
	// driver must send.
	ErrorShare float64 `json:"error_share"`
	ShedShare  float64 `json:"shed_share"`
	SentShare  float64 `json:"sent_share"`
	// BacklogS and BacklogMin bound the backlog at the end of a step:
	// max(BacklogMin, BacklogS seconds of arrivals).
	BacklogS   float64 `json:"backlog_s"`
	BacklogMin float64 `json:"backlog_min"`
	// AckLatency names the server-side latency of the request's own
	// acknowledgement ("send", "write"), whose p99 P99MS bounds as well:
	// a step whose delivery keeps up while the producer waits longer
	// than the bound for its answer does not pass. Empty in files
	// written before 7 December 2026, which judged Latency alone.
	AckLatency string `json:"ack_latency,omitempty"`
	// P99MS is the bound the latencies' p99 must stay under.
	P99MS float64 `json:"p99_ms"`
	// KneeFactor bounded the p99 to KneeFactor × LowP99MS, the side's
	// own p99 at LowRate, in files written before 5 December 2026: a
	// relative rule that gave the side with the lower floor the tighter
	// bound. Searches now judge every side by the absolute P99MS alone
	// and leave it 0.
	KneeFactor float64 `json:"knee_factor"`
	LowRate    float64 `json:"low_rate,omitempty"`
	LowP99MS   float64 `json:"low_p99_ms,omitempty"`
	// WarmupS is how long each step first offered its own rate, not
	// measured, before its StepS measured seconds (0 in older files).
	WarmupS float64 `json:"warmup_s,omitempty"`
	// MaxInFlight is the MAX_IN_FLIGHT the services ran the search with
	// (0: no bound); nil when the driver left the services' own bound.
	MaxInFlight *int `json:"max_in_flight"`
}

// CeilingRound is one search: the steps tried and the highest passing
// rate.
type CeilingRound struct {
	Index int           `json:"index"`
	Steps []CeilingStep `json:"steps"`
	// Rate is the highest passing rate (0 if none passed).
	Rate float64 `json:"rate"`
	// Capped is true when the search stopped at its maximum rate.
	Capped bool `json:"capped"`
	// Invalid says why the search stopped without a verdict: a step's
	// starting state could not be proven (the step's Invalid). Its Rate
	// is then not used.
	Invalid string `json:"invalid,omitempty"`
}

// CeilingStep is one rate tried.
type CeilingStep struct {
	Rate    float64            `json:"rate"`
	Pass    bool               `json:"pass"`
	Why     string             `json:"why"`
	Metrics map[Metric]float64 `json:"metrics"`
	// Failed names every criterion the step failed (the scenario
	// package's Crit* keys); absent when it passed and in files written
	// before it was recorded.
	Failed []string `json:"failed,omitempty"`
	// Invalid says why the step was not measured: its precondition (the
	// backlog of the step before drained, a slot caught up) did not hold
	// within its bound. Neither Pass nor Failed then means anything.
	Invalid string `json:"invalid,omitempty"`
}

// NewRun starts a Run for command at now.
func NewRun(command string, args []string, now time.Time) *Run {
	now = now.UTC()
	return &Run{
		Schema: SchemaVersion, ID: resultfile.ID(now, resultfile.Kind(command)), Command: command,
		Args: args, StartedAt: now, Machine: ThisMachine(), Settings: map[string]any{},
		Points: []Point{}, Ceilings: []Ceiling{}, Notes: []string{},
	}
}

// Note records an incident: what went wrong and why ("lz4 rewrite points
// not measured: <error>"). A sentence that explains how a figure is
// measured is no note: it lives beside the scenario (scenario.Explain).
func (r *Run) Note(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

// Setting decodes r's setting key into v through its JSON, so that a run
// just measured (Go values) and one read from its file (JSON values) read
// alike; an absent setting leaves v as it is.
func (r *Run) Setting(key string, v any) error {
	b, err := json.Marshal(r.Settings[key])
	if err == nil {
		err = json.Unmarshal(b, v)
	}
	if err != nil {
		return fmt.Errorf("results %s: setting %q: %w", r.ID, key, err)
	}
	return nil
}

// WriteRun writes run to dir/<id>.json and returns the path.
func WriteRun(dir string, run *Run) (string, error) {
	run.Validate()
	return resultfile.Write(dir, resultfile.FileOf(run.ID), run)
}

// ReadRun reads a results file, refusing unknown fields and schema
// versions outside RunSchema, and derives the statuses a file written
// before they existed lacks (Validate).
func ReadRun(path string) (*Run, error) {
	var r Run
	if err := resultfile.Read(path, &r); err != nil {
		return nil, err
	}
	if err := RunSchema.Check(path, r.Schema); err != nil {
		return nil, err
	}
	r.Validate()
	return &r, nil
}

// NewestRun reads the newest results file of kind k in dir; nil and no
// error when there is none.
func NewestRun(dir string, k resultfile.Kind) (*Run, error) {
	path := resultfile.Newest(dir, k)
	if path == "" {
		return nil, nil
	}
	return ReadRun(path)
}

// ThisMachine describes the host.
func ThisMachine() Machine {
	m := Machine{OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU(), GoVersion: runtime.Version()}
	m.Hostname, _ = os.Hostname()
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if f, err := os.Open("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if f := strings.Fields(sc.Text()); len(f) >= 2 && f[0] == "MemTotal:" {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				m.MemoryBytes = kb * 1024
				break
			}
		}
		f.Close()
	}
	return m
}
