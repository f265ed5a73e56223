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
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// Options are the bench's flags; the defaults are the sizes.
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
}

func defaultEngines(targets string) []*Engine {
	var out []*Engine
	backends := map[string]string{"no-kurrentdb": "postgres", "kurrentdb": "kurrentdb", "kafka-eventstore": "kafka"}
	for _, t := range strings.Split(targets, ",") {
		name, u, ok := strings.Cut(strings.TrimSpace(t), "=")
		if !ok {
			continue
		}
		out = append(out, &Engine{Name: name, Backend: backends[name], URL: strings.TrimRight(u, "/")})
	}
	return out
}

// Scenarios are the bench's scenarios, in the order `make results` runs
// them (point-read reads a stream of the last append run).
var Scenarios = []string{"append", "point-read", "catch-up"}

// DefaultOptions are the sizes, against the trio on localhost.
func DefaultOptions() Options {
	return Options{Targets: DefaultTargets(), Workers: 16, Streams: 64, Duration: 30 * time.Second, Rounds: 3,
		Runs: 6, Events: 500, Reads: 5, Out: "results"}
}

// Register adds the bench's flags to fs, defaulting to o's values.
func (o *Options) Register(fs *flag.FlagSet) {
	fs.StringVar(&o.Targets, "targets", o.Targets, "name=url of each engine")
	fs.IntVar(&o.Workers, "workers", o.Workers, "append: concurrent workers per engine")
	fs.IntVar(&o.Streams, "streams", o.Streams, "append: streams the workers share")
	fs.DurationVar(&o.Duration, "duration", o.Duration, "append: duration of one round per engine")
	fs.IntVar(&o.Rounds, "rounds", o.Rounds, "append: rounds (engine order rotated)")
	fs.IntVar(&o.Runs, "runs", o.Runs, "catch-up: runs per engine")
	fs.IntVar(&o.Events, "events", o.Events, "catch-up: pre-filled events per run")
	fs.IntVar(&o.Reads, "reads", o.Reads, "point-read: reads per engine (the median is reported)")
	fs.StringVar(&o.Out, "out", o.Out, "directory of the JSON results")
	fs.StringVar(&o.MD, "md", o.MD, "also write the RESULTS.md section, rendered from every JSON result present, to this file")
}

// ErrUnknownScenario is returned by Bench for a scenario not in
// Scenarios.
var ErrUnknownScenario = errors.New("unknown eventstore scenario (append, point-read, catch-up)")

// Bench probes the engines of o.Targets, runs scenario against those that
// answer (the others are "not measured here") and writes
// <o.Out>/eventstore-<scenario>.json, whose path it returns.
func Bench(ctx context.Context, scenario string, o Options, log io.Writer) (string, error) {
	if !slices.Contains(Scenarios, scenario) {
		return "", fmt.Errorf("%w: %q", ErrUnknownScenario, scenario)
	}
	engines := defaultEngines(o.Targets)
	for _, e := range engines {
		probe(ctx, e)
		if !e.Up {
			fmt.Fprintf(log, "%s (%s): not measured here: %s\n", e.Name, e.URL, e.Why)
		}
	}
	var result any
	var err error
	switch scenario {
	case "append":
		result, err = runAppend(ctx, o, engines, log)
	case "point-read":
		result, err = runPointRead(ctx, o, engines)
	case "catch-up":
		result, err = runCatchUp(ctx, o, engines, log)
	}
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(o.Out, "eventstore-"+scenario+".json")
	b, _ := json.MarshalIndent(result, "", "  ")
	return path, os.WriteFile(path, append(b, '\n'), 0o644)
}

func runID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// AppendRow is one engine's round of one series.
type AppendRow struct {
	Engine string `json:"engine"`
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
}

// AppendResult is results/eventstore-append.json.
type AppendResult struct {
	RunID    string      `json:"run_id"`
	At       time.Time   `json:"at"`
	Options  Options     `json:"options"`
	Engines  []*Engine   `json:"engines"`
	Rows     []AppendRow `json:"rows"`
	Verdicts []string    `json:"verdicts"`
}

// runAppend: per round, per series (growing, then reset — interleaved), per
// engine in rotated order, workers loop: read the stream's state (its
// current version), append one event expecting that version.
func runAppend(ctx context.Context, o Options, engines []*Engine, log io.Writer) (*AppendResult, error) {
	res := &AppendResult{RunID: runID(), At: time.Now().UTC(), Options: o, Engines: engines}
	for round := 1; round <= o.Rounds; round++ {
		order := slices.Clone(engines)
		for i := 0; i < (round-1)%max(len(order), 1); i++ {
			order = append(order[1:], order[0])
		}
		for _, series := range []string{"growing", "reset"} {
			for _, e := range order {
				row := AppendRow{Engine: e.Name, Series: series, Round: round}
				if e.Up {
					prefix := fmt.Sprintf("tank-%s-g", res.RunID)
					if series == "reset" {
						prefix = fmt.Sprintf("tank-%s-r%d", res.RunID, round)
					}
					row = appendRound(ctx, o, e, prefix)
					row.Series, row.Round = series, round
					fmt.Fprintf(log, "append %-16s %-7s round %d: %7.1f ops/s, conflicts/op %.3f, errors %d\n", e.Name, series, round, row.OpsPerSec, row.ConflictsPerOp, row.Errors)
				}
				res.Rows = append(res.Rows, row)
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
			}
		}
	}
	res.Verdicts = appendVerdicts(res)
	return res, nil
}

func appendRound(ctx context.Context, o Options, e *Engine, prefix string) AppendRow {
	var ops, conflicts, errs atomic.Int64
	rctx, cancel := context.WithTimeout(ctx, o.Duration)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for w := range o.Workers {
		wg.Go(func() {
			rng := mrand.New(mrand.NewPCG(uint64(w), uint64(start.UnixNano())))
			for rctx.Err() == nil {
				stream := fmt.Sprintf("%s-%d", prefix, rng.IntN(o.Streams))
				var st struct {
					Version *int64 `json:"version"`
				}
				status, err := getJSON(rctx, e.URL+"/streams/"+stream+"/state", &st)
				if rctx.Err() != nil {
					return
				}
				if err != nil || status != 200 {
					errs.Add(1)
					continue
				}
				var expected any = "any"
				if e.Conditional {
					expected = "no_stream"
					if st.Version != nil {
						expected = *st.Version
					}
				}
				ev := event{Type: "OxygenConsumed", Data: map[string]any{"liters": 1}}
				if st.Version == nil {
					ev = event{Type: "TankRegistered", Data: map[string]any{"capacity_liters": 1000}}
				}
				status, _, err = appendEvents(rctx, e.URL, stream, expected, ev)
				if rctx.Err() != nil {
					return
				}
				switch {
				case err != nil:
					errs.Add(1)
				case status == 201:
					ops.Add(1)
				case status == 409:
					conflicts.Add(1)
				default:
					errs.Add(1)
				}
			}
		})
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	row := AppendRow{Engine: e.Name, Ops: ops.Load(), Conflicts: conflicts.Load(), Errors: errs.Load(), Seconds: round2(secs), Measured: true}
	row.OpsPerSec = round2(float64(row.Ops) / secs)
	if attempts := row.Ops + row.Conflicts; attempts > 0 {
		row.ConflictsPerOp = math.Round(float64(row.Conflicts)/float64(attempts)*1000) / 1000
	}
	// Stream length at the end: sample a few streams' last versions.
	var total, n float64
	for i := 0; i < min(o.Streams, 8); i++ {
		var r readResult
		if status, err := getJSON(ctx, fmt.Sprintf("%s/streams/%s-%d?limit=1", e.URL, prefix, i), &r); err == nil && status == 200 {
			if r.LastVersion != nil {
				total += float64(*r.LastVersion + 1)
			}
			n++
		}
	}
	if n > 0 {
		row.EventsPerStream = round2(total / n)
	}
	return row
}

func round2(f float64) float64 { return math.Round(f*100) / 100 }

// appendVerdicts says, per engine, whether throughput fell from the first
// to the last round in each series, and what that tells.
func appendVerdicts(res *AppendResult) []string {
	var out []string
	for _, e := range res.Engines {
		if !e.Up {
			continue
		}
		first, last := map[string]float64{}, map[string]float64{}
		for _, r := range res.Rows {
			if r.Engine != e.Name || !r.Measured {
				continue
			}
			if r.Round == 1 {
				first[r.Series] = r.OpsPerSec
			}
			if r.Round == res.Options.Rounds {
				last[r.Series] = r.OpsPerSec
			}
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
		out = append(out, fmt.Sprintf("%s: growing streams %+.0f%%, reset streams %+.0f%% from round 1 to %d — %s.", e.Name, g*100, r*100, res.Options.Rounds, why))
	}
	return out
}

// PointReadRow is one engine's point read.
type PointReadRow struct {
	Engine         string  `json:"engine"`
	Stream         string  `json:"stream"`
	Matched        int     `json:"matched"`
	RecordsScanned *int64  `json:"records_scanned"`
	ScanRatio      float64 `json:"scanned_per_matched,omitempty"`
	MedianMS       float64 `json:"median_ms"`
	Measured       bool    `json:"measured"`
}

// PointReadResult is results/eventstore-point-read.json.
type PointReadResult struct {
	At      time.Time      `json:"at"`
	Options Options        `json:"options"`
	Source  string         `json:"source"`
	Rows    []PointReadRow `json:"rows"`
}

// runPointRead reads one stream of the last append run (growing series),
// or, without one, of a small pre-fill of its own.
func runPointRead(ctx context.Context, o Options, engines []*Engine) (*PointReadResult, error) {
	res := &PointReadResult{At: time.Now().UTC(), Options: o}
	stream := ""
	var prev AppendResult
	if b, err := os.ReadFile(filepath.Join(o.Out, "eventstore-append.json")); err == nil && json.Unmarshal(b, &prev) == nil && prev.RunID != "" {
		stream = fmt.Sprintf("tank-%s-g-0", prev.RunID)
		res.Source = "stream 0 of the growing series of append run " + prev.RunID
	}
	for _, e := range engines {
		row := PointReadRow{Engine: e.Name}
		if !e.Up {
			res.Rows = append(res.Rows, row)
			continue
		}
		s := stream
		if s == "" {
			// No append run: pre-fill streams round-robin, read one.
			id := runID()
			for i := range 20 * o.Streams {
				if _, _, err := appendEvents(ctx, e.URL, fmt.Sprintf("tank-%s-%d", id, i%o.Streams), "any", event{Type: "OxygenAdded", Data: map[string]any{"liters": 1}}); err != nil {
					return nil, err
				}
			}
			s = fmt.Sprintf("tank-%s-0", id)
			res.Source = fmt.Sprintf("own pre-fill: %d streams x 20 events, round-robin", o.Streams)
		}
		var times []float64
		for range max(o.Reads, 1) {
			var r readResult
			t0 := time.Now()
			status, err := getJSON(ctx, e.URL+"/streams/"+s+"?limit=10000", &r)
			if err != nil || status != 200 {
				return nil, fmt.Errorf("%s: read %s: %d %v", e.Name, s, status, err)
			}
			times = append(times, float64(time.Since(t0).Microseconds())/1000)
			row.Matched, row.RecordsScanned = len(r.Events), r.RecordsScanned
		}
		slices.Sort(times)
		row.Stream, row.MedianMS, row.Measured = s, round2(times[len(times)/2]), true
		if row.RecordsScanned != nil && row.Matched > 0 {
			row.ScanRatio = round2(float64(*row.RecordsScanned) / float64(row.Matched))
		}
		res.Rows = append(res.Rows, row)
	}
	return res, nil
}

// CatchUpRow is one engine's runs.
type CatchUpRow struct {
	Engine string `json:"engine"`
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

// CatchUpResult is results/eventstore-catch-up.json.
type CatchUpResult struct {
	At          time.Time    `json:"at"`
	Options     Options      `json:"options"`
	LivePerRun  int          `json:"live_events_per_run"`
	Rows        []CatchUpRow `json:"rows"`
	Description string       `json:"description"`
}

const livePerRun = 20

func runCatchUp(ctx context.Context, o Options, engines []*Engine, log io.Writer) (*CatchUpResult, error) {
	res := &CatchUpResult{At: time.Now().UTC(), Options: o, LivePerRun: livePerRun,
		Description: "Per run: a marker append gives the start position; events are pre-filled in batches of 50; a subscriber opened at the marker must receive them all and caught-up (catch-up time); then an independent subscriber, already caught up, receives live appends sent 20 ms apart (live latency = receive time - send time, same clock)"}
	for _, e := range engines {
		row := CatchUpRow{Engine: e.Name}
		if e.Up {
			row.Measured = true
			for run := 1; run <= o.Runs; run++ {
				cu, p50, pmax, err := catchUpRun(ctx, o, e)
				if err != nil {
					return nil, fmt.Errorf("%s run %d: %w", e.Name, run, err)
				}
				fmt.Fprintf(log, "catch-up %-16s run %d: catch-up %.1f ms, live p50 %.1f ms (max %.1f)\n", e.Name, run, cu, p50, pmax)
				row.CatchUpMS = append(row.CatchUpMS, cu)
				row.LiveP50MS = append(row.LiveP50MS, p50)
				row.LiveMaxMS = append(row.LiveMaxMS, pmax)
			}
		}
		res.Rows = append(res.Rows, row)
	}
	return res, nil
}

func catchUpRun(ctx context.Context, o Options, e *Engine) (catchUp, p50, pmax float64, err error) {
	id := runID()
	stream := "tank-cu-" + id
	status, marker, err := appendEvents(ctx, e.URL, stream+"-marker", "any", event{Type: "TankRegistered", Data: map[string]any{"capacity_liters": 1}})
	if err != nil || status != 201 {
		return 0, 0, 0, fmt.Errorf("marker append: %d %v %s", status, err, marker.Error)
	}
	for i := 0; i < o.Events; i += 50 {
		batch := make([]event, 0, 50)
		for j := i; j < min(i+50, o.Events); j++ {
			batch = append(batch, event{Type: "OxygenAdded", Data: map[string]any{"liters": 1, "n": j}})
		}
		if status, r, err := appendEvents(ctx, e.URL, stream, "any", batch...); err != nil || status != 201 {
			return 0, 0, 0, fmt.Errorf("pre-fill: %d %v %s", status, err, r.Error)
		}
	}
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	t0 := time.Now()
	ch, err := subscribe(sctx, e.URL, marker.Position)
	if err != nil {
		return 0, 0, 0, err
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
	catchUp = float64(time.Since(t0).Microseconds()) / 1000
	cancel()
	if got != o.Events {
		return 0, 0, 0, fmt.Errorf("catch-up delivered %d of %d events", got, o.Events)
	}
	// Live: an independent subscriber, caught up before anything is sent.
	lctx, lcancel := context.WithTimeout(ctx, 2*time.Minute)
	defer lcancel()
	live, err := subscribe(lctx, e.URL, last)
	if err != nil {
		return 0, 0, 0, err
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
		return 0, 0, 0, fmt.Errorf("live subscriber received %d of %d events", len(lat), livePerRun)
	}
	slices.Sort(lat)
	return round2(catchUp), round2(lat[len(lat)/2]), round2(lat[len(lat)-1]), nil
}

// DefaultTargets names the event store trio at their pair-table ports on
// localhost, the Postgres side first.
func DefaultTargets() string {
	var named []string
	for _, s := range pairs.Pair("eventstore") {
		named = append(named, s.Name+"="+s.URL("localhost", 0))
	}
	return strings.Join(named, ",")
}
