package eventstore

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
)

// Fit is a least-squares line y = Intercept + Slope·x, on linear axes.
type Fit struct {
	Slope, Intercept float64
	// R2 is the coefficient of determination (1 when every y is equal:
	// the line explains all there is).
	R2 float64
	// N is the points fitted.
	N int
}

// At is the fitted y at x.
func (f Fit) At(x float64) float64 { return f.Intercept + f.Slope*x }

// ErrFewPoints is FitLine's error for fewer than two distinct x.
var ErrFewPoints = errors.New("a line needs two points at different sizes")

// FitLine fits y = a + b·x to the points (xs[i], ys[i]) by ordinary least
// squares.
func FitLine(xs, ys []float64) (Fit, error) {
	if len(xs) != len(ys) {
		return Fit{}, fmt.Errorf("fit: %d x and %d y", len(xs), len(ys))
	}
	n := float64(len(xs))
	if len(xs) < 2 {
		return Fit{}, ErrFewPoints
	}
	var mx, my float64
	for i := range xs {
		mx += xs[i]
		my += ys[i]
	}
	mx, my = mx/n, my/n
	var sxx, sxy, syy float64
	for i := range xs {
		dx, dy := xs[i]-mx, ys[i]-my
		sxx += dx * dx
		sxy += dx * dy
		syy += dy * dy
	}
	if sxx == 0 {
		return Fit{}, ErrFewPoints
	}
	f := Fit{Slope: sxy / sxx, N: len(xs), R2: 1}
	f.Intercept = my - f.Slope*mx
	if syy > 0 {
		f.R2 = sxy * sxy / (sxx * syy)
	}
	return f, nil
}

// NearestRank is the nearest-rank q-quantile of xs (0 < q ≤ 1): with
// fewer than 100 values, p99 is the largest.
func NearestRank(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// CausalRow is one engine's reads of one stream at one size step.
type CausalRow struct {
	Engine string `json:"engine"`
	// Label is the engine's row label (Engine.Label).
	Label string `json:"label,omitempty"`
	// Backend is postgres or kafka.
	Backend string `json:"backend"`
	// Events is the stream's length; Size the step's target.
	Events int   `json:"events"`
	Size   int64 `json:"size"`
	// Records is the store's records at the step, measured before its
	// reads (nil when not measured).
	Records *int64 `json:"records"`
	// ReadsMS are the timed reads.
	ReadsMS []float64 `json:"reads_ms"`
	// P50MS and P99MS are their nearest-rank percentiles.
	P50MS, P99MS float64
	// Scanned is what one read touched: Kafka's records_scanned (records
	// fetched to find the stream), Postgres's rows visited by the plan's
	// scans (EXPLAIN ANALYZE); nil when not measured. Buffers is
	// Postgres's shared buffers hit or read.
	Scanned *int64 `json:"scanned"`
	Buffers *int64 `json:"buffers,omitempty"`
	// Failed says why the row has no figure ("" when it is valid).
	Failed string `json:"failed,omitempty"`
}

// Shown is the row's name in a table (AppendRow.Shown).
func (r CausalRow) Shown() string { return shown(r.Engine, r.Label) }

// CausalResult is the causal experiment's results.
type CausalResult struct {
	RunID   string        `json:"run_id"`
	At      time.Time     `json:"at"`
	Options CausalOptions `json:"options"`
	Engines []*Engine     `json:"engines"`
	Fills   []CausalFill  `json:"fills"`
	Rows    []CausalRow   `json:"rows"`
	Notes   []string      `json:"notes"`
	// FillMethod says how the stores were filled: CausalFillMethod (a
	// file of schema 1 recorded its own words).
	FillMethod string `json:"fill_method"`
	// Aborted is why the run ended early ("" when it did not).
	Aborted string `json:"aborted,omitempty"`
	// BackendTimeoutS is BACKEND_TIMEOUT on the experiment's instances.
	BackendTimeoutS float64 `json:"backend_timeout_s"`
}

// CausalFromRun turns the experiment's results file into its rows.
func CausalFromRun(run *driver.Run) (*CausalResult, error) {
	res := &CausalResult{RunID: run.ID, At: run.StartedAt, Notes: run.Notes, Aborted: run.AbortReason(), FillMethod: CausalFillMethod}
	for key, v := range map[string]any{"engines": &res.Engines, "causal_options": &res.Options, "fills": &res.Fills} {
		if err := run.Setting(key, v); err != nil {
			return nil, err
		}
	}
	if s, ok := run.Settings["fill_method"].(string); ok {
		res.FillMethod = s // a file of schema 1 recorded it
	}
	res.BackendTimeoutS, _ = run.Settings["backend_timeout_s"].(float64)
	for i := range run.Points {
		p := &run.Points[i]
		if p.Scenario != CausalPoint {
			continue
		}
		events, size, ok := parseCausalPointName(p.Name)
		if !ok {
			return nil, fmt.Errorf("results %s: point %q is not a causal step", run.ID, p.Name)
		}
		for _, svc := range p.Sides {
			row := CausalRow{Engine: svc, Label: labelOf(res.Engines, svc), Backend: causalBackendOf(res.Engines, svc), Events: events, Size: size}
			for _, f := range res.Fills {
				if f.Engine == svc && f.Size == size {
					row.Records = f.Records
				}
			}
			if st := p.SideStatus(svc); !st.OK() {
				row.Failed = st.Reason
				if row.Failed == "" {
					row.Failed = st.State
				}
				res.Rows = append(res.Rows, row)
				continue
			}
			for _, rd := range p.Rounds {
				if s := rd.Sides[svc]; s != nil && s.Error == "" {
					row.ReadsMS = append(row.ReadsMS, s.Metrics[MetricReadMS])
					if v, ok := s.Metrics[MetricRecordsScanned]; ok {
						n := int64(v)
						row.Scanned = &n
					}
					if v, ok := s.Metrics[MetricRowsTouched]; ok {
						n, b := int64(v), int64(s.Metrics[MetricSharedBuffers])
						row.Scanned, row.Buffers = &n, &b
					}
				}
			}
			if len(row.ReadsMS) == 0 {
				row.Failed = "no read was recorded"
			} else {
				row.P50MS, row.P99MS = NearestRank(row.ReadsMS, 0.5), NearestRank(row.ReadsMS, 0.99)
			}
			if row.Records == nil && row.Failed == "" {
				row.Failed = "the store's size at this step was not measured"
			}
			res.Rows = append(res.Rows, row)
		}
	}
	// A step the run never reached is a failed row, not a missing one.
	why := "the run ended before this step"
	if res.Aborted != "" {
		why += " (" + res.Aborted + ")"
	}
	for _, n := range res.Options.Streams {
		for _, size := range res.Options.Run() {
			for _, e := range res.Engines {
				if !slices.ContainsFunc(res.Rows, func(r CausalRow) bool { return r.Engine == e.Name && r.Events == n && r.Size == size }) {
					res.Rows = append(res.Rows, CausalRow{Engine: e.Name, Label: e.Label, Backend: e.Backend, Events: n, Size: size, Failed: why})
				}
			}
		}
	}
	return res, nil
}

func causalBackendOf(engines []*Engine, name string) string {
	for _, e := range engines {
		if e.Name == name {
			return e.Backend
		}
	}
	return ""
}

// CausalFit is one engine's fit for one stream: read time (p50) and
// records scanned against the store's measured records.
type CausalFit struct {
	Engine, Label string
	Events        int
	// Time is read p50 (ms) against records; Scan is records scanned per
	// read against records (nil when no row has it).
	Time Fit
	Scan *Fit
	// MinRecords and MaxRecords bound the sizes fitted.
	MinRecords, MaxRecords int64
	// Sizes is the valid sizes fitted; Failed the others' reasons
	// ("1,000,000: failed: …").
	Sizes  int
	Failed []string
	// Err says why there is no fit (fewer than two valid sizes).
	Err string
}

// Shown is the fit's engine as a table names it.
func (f CausalFit) Shown() string { return shown(f.Engine, f.Label) }

// GrowthShare is the share of the fitted read time at the largest store
// that the fit puts on the records beyond the smallest store:
// slope·(max−min) ÷ fitted time at max. NaN when there is no fit or the
// fitted time at max is not positive.
func (f CausalFit) GrowthShare() float64 {
	if f.Err != "" {
		return math.NaN()
	}
	top := f.Time.At(float64(f.MaxRecords))
	if top <= 0 {
		return math.NaN()
	}
	return f.Time.Slope * float64(f.MaxRecords-f.MinRecords) / top
}

// Fits fits every engine and stream of r, in the rows' order.
func (r *CausalResult) Fits() []CausalFit {
	var out []CausalFit
	for _, e := range r.Engines {
		for _, n := range r.Options.Streams {
			out = append(out, r.fit(e, n))
		}
	}
	return out
}

func (r *CausalResult) fit(e *Engine, events int) CausalFit {
	f := CausalFit{Engine: e.Name, Label: e.Label, Events: events}
	var xs, ys, sx, sy []float64
	for _, row := range r.Rows {
		if row.Engine != e.Name || row.Events != events {
			continue
		}
		if row.Failed != "" {
			f.Failed = append(f.Failed, strconv.FormatInt(row.Size, 10)+": failed: "+row.Failed)
			continue
		}
		x := float64(*row.Records)
		xs, ys = append(xs, x), append(ys, row.P50MS)
		if row.Scanned != nil {
			sx, sy = append(sx, x), append(sy, float64(*row.Scanned))
		}
		if f.Sizes == 0 || *row.Records < f.MinRecords {
			f.MinRecords = *row.Records
		}
		f.MaxRecords = max(f.MaxRecords, *row.Records)
		f.Sizes++
	}
	var err error
	if f.Time, err = FitLine(xs, ys); err != nil {
		f.Err = fmt.Sprintf("%d valid size(s): %v", f.Sizes, err)
		return f
	}
	if len(sx) == len(xs) {
		if s, err := FitLine(sx, sy); err == nil {
			f.Scan = &s
		}
	}
	return f
}

// ParseCausalSizes parses "10000,100000" (K and M suffixes allowed:
// "10K,1M").
func ParseCausalSizes(s string) ([]int64, error) {
	var out []int64
	for _, orig := range strings.Split(s, ",") {
		f := strings.ToUpper(strings.TrimSpace(orig))
		mult := int64(1)
		switch {
		case strings.HasSuffix(f, "K"):
			f, mult = strings.TrimSuffix(f, "K"), 1_000
		case strings.HasSuffix(f, "M"):
			f, mult = strings.TrimSuffix(f, "M"), 1_000_000
		}
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("size %q: want a positive number of records (10000, 10K, 1M)", orig)
		}
		out = append(out, n*mult)
	}
	return out, nil
}

func formatCausalSizes(v []int64) string {
	var parts []string
	for _, n := range v {
		parts = append(parts, strconv.FormatInt(n, 10))
	}
	return strings.Join(parts, ",")
}

func formatCausalInts(v []int) string {
	var parts []string
	for _, n := range v {
		parts = append(parts, strconv.Itoa(n))
	}
	return strings.Join(parts, ",")
}

func parseCausalInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("%q is not a number", f)
		}
		out = append(out, n)
	}
	return out, nil
}
