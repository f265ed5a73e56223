package eventstore

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/scenario"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// Mode is how the append scenario makes each append: one of its
// variants, measured as its own series.
type Mode struct {
	// Name names the mode in points ("read-then-append", "blind").
	Name string
	// ReadFirst reads the stream's state before each append and expects
	// the version read (conditional engines; the others are sent "any"
	// after the same read). Without it every append is expected_version
	// "any" with no read: the producer call the reference measured on
	// Kafka.
	ReadFirst bool
	// Label says what the mode is, for tables and findings.
	Label string
}

// The append modes. A figure of one is never compared with one of the
// other: a read-then-append on Kafka scans the partition before it
// produces, a blind append does not.
var (
	ReadThenAppend = Mode{Name: "read-then-append", ReadFirst: true,
		Label: "read-then-append: read the stream's state, then append expecting its version (Kafka: \"any\", it cannot check one)"}
	Blind = Mode{Name: "blind",
		Label: "blind append: expected_version \"any\", no read first"}
)

// ModeOf returns the mode named name; the empty name is ReadThenAppend
// (the bench's only mode before blind appends were measured).
func ModeOf(name string) (Mode, bool) {
	for _, m := range []Mode{ReadThenAppend, Blind} {
		if m.Name == name || (name == "" && m == ReadThenAppend) {
			return m, true
		}
	}
	return Mode{}, false
}

// AppendScenario declares the append scenario: the engines driven, the
// load shape (closed loops of Options.Workers over Options.Streams), its
// variants (Modes) and its series, growing (the same streams every round)
// and reset (fresh streams every round), run interleaved round by round.
type AppendScenario struct {
	// Sides are the services, the Postgres side first.
	Sides []string
	// Modes are the variants, each a series of its own.
	Modes []Mode
	// Series are "growing" and "reset".
	Series []string
	// Defaults are the sizes.
	Defaults Options
}

// Append is the event store trio's append scenario: every engine, both
// modes, both series.
var Append = AppendScenario{
	Sides:  trio(),
	Modes:  []Mode{ReadThenAppend, Blind},
	Series: []string{"growing", "reset"},
	Defaults: Options{Targets: DefaultTargets(), Workers: 16, Streams: 64, Duration: 30 * time.Second, Rounds: 3,
		Runs: 6, Events: 500, Reads: 5, Out: "results", Schema: "eventstore", KafkaBrokers: pairs.DefaultKafkaBrokers,
		KeyedPartitions: DefaultKeyedPartitions, Grace: driver.DefaultLoopGrace},
}

// Validate says what is missing or inconsistent in a declared scenario.
func (s AppendScenario) Validate() error {
	var errs []error
	if len(s.Sides) < 2 || s.Sides[0] != pairs.NoKurrentDB {
		errs = append(errs, fmt.Errorf("append: sides %v, want the Postgres side first and at least one other", s.Sides))
	}
	if len(s.Modes) == 0 || !slices.ContainsFunc(s.Modes, func(m Mode) bool { return m.Name == Blind.Name }) {
		errs = append(errs, errors.New("append: the blind mode (the reference's measurement) is required"))
	}
	if !slices.Equal(s.Series, []string{"growing", "reset"}) {
		errs = append(errs, fmt.Errorf("append: series %v, want growing and reset", s.Series))
	}
	d := s.Defaults
	if d.Workers < 1 || d.Streams < 1 || d.Duration <= 0 || d.Rounds < 1 || d.Runs < 1 || d.Events < 1 || d.Reads < 1 {
		errs = append(errs, fmt.Errorf("append: defaults %+v cannot run", d))
	}
	return errors.Join(errs...)
}

// Estimate is how long the append scenario takes with o against engines
// engines: each loop's duration plus about a second of stream sampling.
// Bound doubles it and adds every loop's wait for its late operations
// (o.Grace): the Kafka side's loops slow as its partition grows.
func (s AppendScenario) Estimate(o Options, engines int) scenario.Estimate {
	loops := o.Rounds * len(s.Modes) * len(s.Series) * engines
	t := time.Duration(loops) * (o.Duration + time.Second)
	return scenario.Estimate{Attacks: loops, Typical: t, Bound: 2*t + time.Duration(loops)*o.Grace}
}

// BenchEstimate is how long the whole bench (append, point-read,
// catch-up) takes with o against engines engines: the append loops, the
// point read's pre-fill (o.Streams × pointReadEvents one-event appends,
// about 5 ms each) and reads, and the catch-up runs (a pre-fill, a
// catch-up and 20 live events 20 ms apart, about 3 s each).
func BenchEstimate(o Options, engines int) scenario.Estimate {
	fill := time.Duration(engines*o.Streams*pointReadEvents) * 5 * time.Millisecond
	rest := fill + time.Duration(engines*o.Reads)*200*time.Millisecond + time.Duration(engines*o.Runs)*3*time.Second
	return Append.Estimate(o, engines).Add(scenario.Estimate{Typical: rest, Bound: 2 * rest})
}

// trio names the event store services, the Postgres side first.
func trio() []string {
	var out []string
	for _, s := range pairs.Pair(pairs.EventStore) {
		out = append(out, s.Name)
	}
	return out
}
