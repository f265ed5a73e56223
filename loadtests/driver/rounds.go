package driver

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"
)

// Order returns the order the sides run in during round r: the sides
// rotated left by r, so with two sides A B, B A, A B, ...; with three
// A B C, B C A, C A B, ...
func Order(sides []string, round int) []string {
	n := len(sides)
	out := make([]string, n)
	for i := range sides {
		out[i] = sides[(i+round)%n]
	}
	return out
}

// SideFunc measures one side for one round of a point.
type SideFunc func(ctx context.Context, service string, round int) (*SideResult, error)

// RunPoint runs rounds rounds of p over p.Sides, in the rotated order,
// then summarizes them. A side's error is recorded in its SideResult and
// does not stop the other rounds; a cancelled ctx does. A side failed
// before its rounds (Point.FailSide) is skipped: it has no round.
func RunPoint(ctx context.Context, p *Point, rounds int, fn SideFunc) error {
	return RunPoints(ctx, []*Point{p}, rounds, func(ctx context.Context, _ int, svc string, round int) (*SideResult, error) {
		return fn(ctx, svc, round)
	})
}

// PointsFunc measures one side for one round of the i-th point of
// RunPoints.
type PointsFunc func(ctx context.Context, i int, service string, round int) (*SideResult, error)

// RunPoints runs points interleaved: in each round, every point in turn,
// each over its sides in the order rotated for that round. Series that
// must be told apart by what happened between them (streams that grow
// across rounds against fresh ones) then see the same history. Each point
// is summarized at the end; errors are handled as in RunPoint.
func RunPoints(ctx context.Context, points []*Point, rounds int, fn PointsFunc) error {
	defer func() {
		for _, p := range points {
			Summarize(p)
		}
	}()
	for r := range rounds {
		for i, p := range points {
			round := Round{Index: r, Order: Order(p.Sides, r), Sides: map[string]*SideResult{}}
			for _, s := range round.Order {
				if err := ctx.Err(); err != nil {
					return err
				}
				if p.SetupFailed(s) {
					continue
				}
				started := time.Now().UTC()
				res, err := fn(ctx, i, s, r)
				if res == nil {
					res = &SideResult{Metrics: map[Metric]float64{}}
				}
				res.Service, res.StartedAt = s, started
				if err != nil {
					res.Error = err.Error()
				}
				round.Sides[s] = res
			}
			p.Rounds = append(p.Rounds, round)
		}
	}
	return ctx.Err()
}

// Summarize fills p.Metrics from its rounds: for every metric any side
// reported, each side's median and range across rounds, and the A/B ratio
// of every round (A = p.Sides[0], B = p.Sides[1]).
func Summarize(p *Point) {
	names := map[Metric]bool{}
	for _, r := range p.Rounds {
		for _, s := range r.Sides {
			for n := range s.Metrics {
				names[n] = true
			}
		}
	}
	p.Metrics = p.Metrics[:0]
	for _, n := range slices.Sorted(func(yield func(Metric) bool) {
		for k := range names {
			if !yield(k) {
				return
			}
		}
	}) {
		m := MetricSummary{Name: n, Sides: map[string]Agg{}, Ratios: []*float64{}}
		for _, side := range p.Sides {
			var vs []float64
			for _, r := range p.Rounds {
				if s := r.Sides[side]; s != nil && s.Error == "" && s.Precondition == "" {
					if v, ok := s.Metrics[n]; ok {
						vs = append(vs, v)
					}
				}
			}
			switch {
			case len(vs) > 0 && offeredRates[n]:
				m.Sides[side] = RateAgg(vs)
			case len(vs) > 0:
				m.Sides[side] = Aggregate(vs)
			}
		}
		if len(p.Sides) >= 2 {
			var rs []float64
			for _, r := range p.Rounds {
				a, b := r.Sides[p.Sides[0]], r.Sides[p.Sides[1]]
				var ratio *float64
				if a != nil && b != nil && a.Error == "" && b.Error == "" && a.Precondition == "" && b.Precondition == "" {
					va, okA := a.Metrics[n]
					vb, okB := b.Metrics[n]
					if okA && okB && vb != 0 {
						x := round3(va / vb)
						ratio = &x
						rs = append(rs, x)
					}
				}
				m.Ratios = append(m.Ratios, ratio)
			}
			if len(rs) > 0 {
				x := Median(rs)
				m.Ratio = &x
			}
		}
		p.Metrics = append(p.Metrics, m)
	}
}

// offeredRates are the metrics MarkOfferedRate named.
var offeredRates = map[Metric]bool{}

// MarkOfferedRate declares metric a rate that every round's search
// offered and passed (a sustainable rate): Summarize then publishes, as
// its median, the rate a majority of rounds passed (RateAgg), always a
// rate that was offered, never the mean of two rounds. Call it from an
// init function, before any point is summarized.
func MarkOfferedRate(metric Metric) { offeredRates[metric] = true }

// Find returns the metric named name, or nil.
func (p *Point) Find(name Metric) *MetricSummary {
	for i := range p.Metrics {
		if p.Metrics[i].Name == name {
			return &p.Metrics[i]
		}
	}
	return nil
}

// Aggregate returns the median, min and max of vs (not empty).
func Aggregate(vs []float64) Agg {
	s := slices.Clone(vs)
	sort.Float64s(s)
	return Agg{Median: Median(s), Min: s[0], Max: s[len(s)-1], N: len(s)}
}

// PassedInMost is the highest rate a majority of searches passed, from
// each search's highest passing rate: the (n/2+1)-th highest, so the
// middle one of 3 (2 of 3 passed it), the lower of 2. Unlike a median
// of an even count it is always a rate that was offered. 0 for none.
func PassedInMost(rates []float64) float64 {
	if len(rates) == 0 {
		return 0
	}
	s := slices.Clone(rates)
	sort.Sort(sort.Reverse(sort.Float64Slice(s)))
	return s[len(s)/2]
}

// RateAgg is the range of searches' highest passing rates with Median
// set to PassedInMost: the published rate is one that was offered and
// passed in a majority of the searches.
func RateAgg(rates []float64) Agg {
	a := Aggregate(rates)
	a.Median = PassedInMost(rates)
	return a
}

// Median returns the median of vs (the mean of the middle two for an even
// count), rounded to 3 decimals; 0 for none.
func Median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Clone(vs)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return round3(s[n/2])
	}
	return round3((s[n/2-1] + s[n/2]) / 2)
}

// FlattenClient adds a ClientResult's numbers to m under prefix
// (ClientMetrics, ClientRewrite or ClientPatch).
func FlattenClient(m map[Metric]float64, prefix PhaseMetrics, c ClientResult) {
	m[prefix.Key(SuffixP50)] = c.Latency.P50MS
	m[prefix.Key(SuffixP95)] = c.Latency.P95MS
	m[prefix.Key(SuffixP99)] = c.Latency.P99MS
	m[prefix.Key(SuffixMax)] = c.Latency.MaxMS
	m[prefix.Key(SuffixErrors)] = float64(c.Errors)
	m[prefix.Key(SuffixShed)] = float64(c.Shed)
	m[prefix.Key(SuffixSentRate)] = c.SentRate
	m[prefix.Key(SuffixOKRate)] = c.Throughput
}

// FlattenServer adds every latency of a /stats body to m as
// "server.<name>.p50_ms" etc.; latencies with no observation are left out.
func FlattenServer(m map[Metric]float64, s *ServerStats) {
	if s == nil {
		return
	}
	for n, l := range s.Latencies {
		if l.Count == 0 {
			continue
		}
		m[ServerLatency(n, SuffixCount)] = float64(l.Count)
		m[ServerLatency(n, SuffixP50)] = l.P50MS
		m[ServerLatency(n, SuffixP95)] = l.P95MS
		m[ServerLatency(n, SuffixP99)] = l.P99MS
		m[ServerLatency(n, SuffixMax)] = l.MaxMS
	}
}

// Ratio returns a/b rounded, or NaN when b is 0.
func Ratio(a, b float64) float64 {
	if b == 0 {
		return math.NaN()
	}
	return round3(a / b)
}

// Label formats a rate as a point name: "1000/s".
func Label(rate float64) string { return fmt.Sprintf("%g/s", rate) }
