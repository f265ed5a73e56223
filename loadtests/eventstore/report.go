package eventstore

import (
	"fmt"
	"strings"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
)

// SectionTitle is the heading of the RESULTS.md section Markdown renders,
// so that other reports can link to it.
const SectionTitle = "Event store: Postgres vs KurrentDB vs Kafka"

// Results are the bench's results as the report reads them, one field
// per scenario; a scenario that has not run leaves its field nil. They
// come from the event store's runs (FromRuns): the bench's results
// files, or the files of the bench before it ran on the driver
// (results/eventstore-<scenario>.json, the same shape as these types,
// converted on load by LoadRuns).
type Results struct {
	Append    *AppendResult
	PointRead *PointReadResult
	CatchUp   *CatchUpResult
	// StartState is the event store's tables at the start of the first
	// scenario's run that recorded them (nil in older files).
	StartState *driver.StartState
	// Causal is the causal point-read experiment's (RunCausal), nil
	// when it has not run.
	Causal *CausalResult
	// Long and Cleanup are the newest eventstore-long and
	// eventstore-cleanup runs (long_results.go); nil when none ran.
	Long, Cleanup *driver.Run
	// Ceiling is the newest eventstore-ceiling run (CeilingCommand): the
	// append ceiling search in its Ceilings; nil when none ran.
	Ceiling *driver.Run
}

// AppendRow is one engine's loop of one series and round.
type AppendRow struct {
	Engine string `json:"engine"`
	// Label is the engine's row label (Engine.Label); empty: Engine.
	Label string `json:"label,omitempty"`
	// Mode is the Mode's name: "read-then-append" or "blind"; empty in the
	// older files, whose appends were all read-then-append (ModeOf).
	Mode string `json:"mode,omitempty"`
	// Series is "growing" (the same streams every round) or "reset"
	// (fresh streams before every round).
	Series          string  `json:"series"`
	Round           int     `json:"round"`
	Ops             int64   `json:"ops"`
	Conflicts       int64   `json:"conflicts"`
	Errors          int64   `json:"errors"`
	Seconds         float64 `json:"seconds"`
	OpsPerSec       float64 `json:"ops_per_sec"`
	ConflictsPerOp  float64 `json:"conflicts_per_op"`
	EventsPerStream float64 `json:"events_per_stream_at_end"`
	Measured        bool    `json:"measured"`
	// Late counts the operations (counted in Ops, Conflicts or Errors)
	// that completed after the loop's window; InFlight those still
	// running at the grace bound, abandoned. Counted is false in files
	// written before the bench counted them: the loop then dropped every
	// operation its window's end interrupted.
	Late     int64 `json:"late"`
	InFlight int64 `json:"in_flight"`
	Counted  bool  `json:"counted"`
}

// AppendResult is the append scenario's results.
type AppendResult struct {
	RunID    string      `json:"run_id"`
	At       time.Time   `json:"at"`
	Options  Options     `json:"options"`
	Engines  []*Engine   `json:"engines"`
	Rows     []AppendRow `json:"rows"`
	Verdicts []string    `json:"verdicts"`
	// Stores are the engines' store sizes at the scenario's start (nil in
	// older files).
	Stores []StoreState `json:"stores,omitempty"`
}

// PointReadRow is one engine's point read.
type PointReadRow struct {
	Engine string `json:"engine"`
	// Label is the engine's row label (Engine.Label); empty: Engine.
	Label          string  `json:"label,omitempty"`
	Stream         string  `json:"stream"`
	Matched        int     `json:"matched"`
	RecordsScanned *int64  `json:"records_scanned"`
	ScanRatio      float64 `json:"scanned_per_matched,omitempty"`
	MedianMS       float64 `json:"median_ms"`
	Measured       bool    `json:"measured"`
	// Failed says why an engine that was up has no figure (its stream
	// differs from the other engines', its reads failed); empty
	// otherwise.
	Failed string `json:"failed,omitempty"`
}

// PointReadResult is the point-read scenario's results.
type PointReadResult struct {
	At      time.Time      `json:"at"`
	Options Options        `json:"options"`
	Source  string         `json:"source"`
	Rows    []PointReadRow `json:"rows"`
	// Stores are the engines' store sizes at the scenario's start.
	Stores []StoreState `json:"stores,omitempty"`
}

// CatchUpRow is one engine's runs.
type CatchUpRow struct {
	Engine string `json:"engine"`
	// Label is the engine's row label (Engine.Label); empty: Engine.
	Label string `json:"label,omitempty"`
	// CatchUpMS is, per run, the time from opening the subscription at
	// the position before the pre-fill to its caught-up event, with every
	// pre-filled event received.
	CatchUpMS []float64 `json:"catch_up_ms"`
	// LiveP50MS is, per run, the median latency from the append request
	// being sent to an independent, already caught-up subscriber receiving
	// the event.
	LiveP50MS []float64 `json:"live_p50_ms"`
	LiveMaxMS []float64 `json:"live_max_ms"`
	Measured  bool      `json:"measured"`
}

// CatchUpResult is the catch-up scenario's results.
type CatchUpResult struct {
	At          time.Time    `json:"at"`
	Options     Options      `json:"options"`
	LivePerRun  int          `json:"live_events_per_run"`
	Rows        []CatchUpRow `json:"rows"`
	Description string       `json:"description"`
	// Stores are the engines' store sizes at the scenario's start.
	Stores []StoreState `json:"stores,omitempty"`
}

// add fills the scenario's field from run.
func (r *Results) add(scenario string, run *driver.Run) error {
	if _, ok := run.Settings[legacySetting]; ok {
		if r.StartState == nil {
			r.StartState = run.StartState
		}
		return r.addLegacy(scenario, run)
	}
	var engines []*Engine
	var o Options
	if err := run.Setting("engines", &engines); err != nil {
		return err
	}
	if err := run.Setting("options", &o); err != nil {
		return err
	}
	if r.StartState == nil {
		r.StartState = run.StartState
	}
	var stores []StoreState
	if _, ok := run.Settings["store_state"]; ok {
		if err := run.Setting("store_state", &stores); err != nil {
			return err
		}
	}
	switch scenario {
	case "append":
		r.Append = appendFromRun(run, o, engines)
		r.Append.Stores = stores
	case "point-read":
		r.PointRead = pointReadFromRun(run, o, engines)
		r.PointRead.Stores = stores
	case "catch-up":
		r.CatchUp = catchUpFromRun(run, o, engines)
		r.CatchUp.Stores = stores
	}
	return nil
}

// sides walks every point of scenario in run, round by round, each side
// in the point's order (not the round's rotated one).
func sides(run *driver.Run, scenario driver.ScenarioName, fn func(p *driver.Point, round int, svc string, s *driver.SideResult)) {
	for i := range run.Points {
		p := &run.Points[i]
		if p.Scenario != scenario {
			continue
		}
		for _, rd := range p.Rounds {
			for _, svc := range p.Sides {
				if s := rd.Sides[svc]; s != nil {
					fn(p, rd.Index, svc, s)
				}
			}
		}
	}
}

func appendFromRun(run *driver.Run, o Options, engines []*Engine) *AppendResult {
	tag, _ := run.Settings["run_tag"].(string)
	res := &AppendResult{RunID: tag, At: run.StartedAt, Options: o, Engines: engines}
	for _, m := range Append.Modes {
		sides(run, AppendScenarioName(m.Name), func(p *driver.Point, round int, svc string, s *driver.SideResult) {
			row := AppendRow{Engine: svc, Label: labelOf(engines, svc), Mode: m.Name, Series: p.Name, Round: round + 1}
			if s.Error == "" {
				mt := s.Metrics
				row.Ops, row.Conflicts, row.Errors = int64(mt[MetricAppendOps]), int64(mt[MetricAppendConflicts]), int64(mt[MetricAppendErrors])
				row.Seconds, row.OpsPerSec, row.ConflictsPerOp = mt[MetricAppendSeconds], mt[MetricAppendOpsPerSec], mt[MetricAppendConflictsPerOp]
				row.EventsPerStream, row.Measured = mt[MetricEventsPerStreamAtEnd], true
				if late, ok := mt[MetricAppendLate]; ok {
					row.Late, row.InFlight, row.Counted = int64(late), int64(mt[MetricAppendInFlight]), true
				}
			}
			res.Rows = append(res.Rows, row)
		})
	}
	for _, m := range Append.Modes {
		res.Verdicts = append(res.Verdicts, appendVerdicts(res, m)...)
	}
	return res
}

func pointReadFromRun(run *driver.Run, o Options, engines []*Engine) *PointReadResult {
	res := &PointReadResult{At: run.StartedAt, Options: o}
	res.Source = pointReadSource(o.Streams)
	if s, ok := run.Settings["source"].(string); ok {
		res.Source = s // a file of schema 1 recorded it
	}
	stream, _ := run.Settings["stream"].(string)
	for i := range run.Points {
		p := &run.Points[i]
		if p.Scenario != PointReadPoint {
			continue
		}
		for _, svc := range p.Sides {
			row := PointReadRow{Engine: svc, Label: labelOf(engines, svc)}
			if m := p.Find(MetricReadMS); m != nil {
				if a, ok := m.Sides[svc]; ok {
					row.Stream, row.MedianMS, row.Measured = stream, a.Median, true
				}
			}
			if !row.Measured {
				row.Failed = sideFailure(p, svc)
			}
			if m := p.Find(MetricMatched); m != nil {
				row.Matched = int(m.Sides[svc].Max)
			}
			if m := p.Find(MetricRecordsScanned); m != nil {
				if a, ok := m.Sides[svc]; ok {
					n := int64(a.Max)
					row.RecordsScanned = &n
					if row.Matched > 0 {
						row.ScanRatio = round2(a.Max / float64(row.Matched))
					}
				}
			}
			res.Rows = append(res.Rows, row)
		}
	}
	return res
}

// sideFailure is the error of svc's first failed round of p, unless it
// is "not measured here" (the engine did not answer the probe).
func sideFailure(p *driver.Point, svc string) string {
	for _, rd := range p.Rounds {
		if s := rd.Sides[svc]; s != nil && s.Error != "" && !strings.HasPrefix(s.Error, "not measured here") {
			return s.Error
		}
	}
	return ""
}

func catchUpFromRun(run *driver.Run, o Options, engines []*Engine) *CatchUpResult {
	res := &CatchUpResult{At: run.StartedAt, Options: o}
	if n, ok := run.Settings["live_events_per_run"].(float64); ok {
		res.LivePerRun = int(n)
	}
	res.Description = catchUpDescription
	if s, ok := run.Settings["description"].(string); ok {
		res.Description = s // a file of schema 1 recorded it
	}
	rows := map[string]*CatchUpRow{}
	var order []string
	sides(run, CatchUpPoint, func(_ *driver.Point, _ int, svc string, s *driver.SideResult) {
		row := rows[svc]
		if row == nil {
			row = &CatchUpRow{Engine: svc, Label: labelOf(engines, svc)}
			rows[svc] = row
			order = append(order, svc)
		}
		if s.Error == "" {
			row.Measured = true
			row.CatchUpMS = append(row.CatchUpMS, s.Metrics[MetricCatchUpMS])
			row.LiveP50MS = append(row.LiveP50MS, s.Metrics[MetricLiveP50])
			row.LiveMaxMS = append(row.LiveMaxMS, s.Metrics[MetricLiveMax])
		}
	})
	for _, svc := range order {
		res.Rows = append(res.Rows, *rows[svc])
	}
	return res
}

// labelOf is the label of engine name among engines; empty when it has
// none.
func labelOf(engines []*Engine, name string) string {
	for _, e := range engines {
		if e.Name == name {
			return e.Label
		}
	}
	return ""
}

// Shown is the row's name in a table: its engine, with its label when it
// has one ("kafka-eventstore-keyed: Kafka, keyed, 8 partitions").
func (r AppendRow) Shown() string { return shown(r.Engine, r.Label) }

// Shown is the row's name in a table (AppendRow.Shown).
func (r PointReadRow) Shown() string { return shown(r.Engine, r.Label) }

// Shown is the row's name in a table (AppendRow.Shown).
func (r CatchUpRow) Shown() string { return shown(r.Engine, r.Label) }

func shown(engine, label string) string {
	if label == "" {
		return engine
	}
	return engine + ": " + label
}

// appendVerdicts says, per engine measured in mode m, whether throughput
// fell from the first to the last round in each series, and what that
// tells.
func appendVerdicts(res *AppendResult, m Mode) []string {
	var out []string
	for _, e := range res.Engines {
		if !e.Up {
			continue
		}
		first, last := map[string]float64{}, map[string]float64{}
		for _, r := range res.Rows {
			if r.Engine != e.Name || !r.Measured || r.Mode != m.Name {
				continue
			}
			if r.Round == 1 {
				first[r.Series] = r.OpsPerSec
			}
			if r.Round == res.Options.Rounds {
				last[r.Series] = r.OpsPerSec
			}
		}
		if len(first) == 0 {
			continue
		}
		change := func(s string) float64 {
			if first[s] == 0 {
				return 0
			}
			return (last[s] - first[s]) / first[s]
		}
		g, r := change("growing"), change("reset")
		var why string
		switch {
		case res.Options.Rounds < 2:
			why = "one round only: no trend to judge"
		case g < -0.1 && r > -0.1:
			why = "throughput fell only where streams grew: stream length explains the decline"
		case g < -0.1 && r < -0.1:
			why = "throughput fell in both series, with fresh streams too: the decline follows the store's total size or the machine, not stream length"
		case g >= -0.1 && r >= -0.1:
			why = "no decline of more than 10% in either series"
		default:
			why = "only the reset series fell: noise or store growth, not stream length"
		}
		out = append(out, fmt.Sprintf("%s, %s: growing streams %+.0f%%, reset streams %+.0f%% from round 1 to %d — %s.", e.Name, m.Name, g*100, r*100, res.Options.Rounds, why))
	}
	return out
}
