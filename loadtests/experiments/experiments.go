package experiments

import (
	"context"
	"io"
	"time"
)

// SchemaVersion is the version of the experiments results file's shape.
const SchemaVersion = 1

// Size says how big an experiment runs: Small in tests (seconds), Full in
// make results.
type Size int

// Sizes of a run.
const (
	// Small runs in seconds, for the experiment's own test.
	Small Size = iota
	// Full is make results' size.
	Full
)

// Env locates the stack and the tools an experiment may need. Fields
// left empty take the stack's defaults (scripts/ports.env).
type Env struct {
	// PostgresURL is the shared stack's Postgres (wal2json installed).
	PostgresURL string
	// PgBouncerURL is the stack's pgbouncer (transaction pooling).
	PgBouncerURL string
	// RabbitMQURL and KafkaBrokers locate the stack's brokers.
	RabbitMQURL  string
	KafkaBrokers []string
	// Root is the repository root (services are built from it).
	Root string
	// Out receives progress lines; nil for none.
	Out io.Writer
}

// Result is what one experiment found: one row of RESULTS.md's Failure
// modes table, plus its raw figures.
type Result struct {
	// Name is the experiment's Experiment.Name.
	Name string `json:"name"`
	// Title names it in the table ("NOTIFY serializes commits").
	Title string `json:"title"`
	// Happens says what happens, in one sentence.
	Happens string `json:"happens"`
	// Figure is the measured figure, in words with its numbers.
	Figure string `json:"figure"`
	// UserMust says what the user must do about it.
	UserMust string `json:"user_must"`
	// AckedLost counts acknowledged writes (2xx answers, committed
	// transactions) missing afterwards; -1 when the experiment writes
	// nothing it acknowledges.
	AckedLost int64 `json:"acked_lost"`
	// LossDocumented is true when the experiment demonstrates a
	// documented loss (AckedLost > 0 is then the figure, not a failure).
	LossDocumented bool `json:"loss_documented,omitempty"`
	// Metrics are the raw figures, named.
	Metrics map[string]float64 `json:"metrics,omitempty"`
	// Notes say what the figure depends on (server, version, machine).
	Notes []string `json:"notes,omitempty"`
	// DurationS is how long the experiment ran.
	DurationS float64 `json:"duration_s"`
}

// Experiment is one runnable failure-mode experiment.
type Experiment struct {
	// Name is its id: lowercase words joined by '-'.
	Name string
	// Run runs it at size against env. It must leave the shared stack as
	// it found it, and return an error only when it could not measure
	// (a lost acknowledged write is a figure, not an error).
	Run func(ctx context.Context, env Env, size Size) (Result, error)
}

// File is the results file of one experiments run.
type File struct {
	SchemaVersion int       `json:"schema_version"`
	Started       time.Time `json:"started"`
	Results       []Result  `json:"results"`
}

// All returns every experiment, in the table's order.
func All() []Experiment {
	return append(stackExperiments(), crashExperiments()...)
}
