package scenario

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
)

// AtThroughputOptions parameterize the log pair's points at fractions of
// each side's batch throughput.
type AtThroughputOptions struct {
	// Batch is the events per POST /events/batch.
	Batch int
	// Senders are the closed-loop senders that measure the batch
	// throughput, for Measure.
	Senders int
	Measure time.Duration
	// Fractions of the batch throughput offered open-loop (0.25, 0.5,
	// 0.75), each for Duration, Rounds rounds.
	Fractions []float64
	Duration  time.Duration
	Rounds    int
}

// The batch throughput point's metrics, per side: the events accepted
// and delivered per second over the closed loop (MetricAcceptedRate),
// and its batch throughput, the lower of the two. The points at a
// fraction of it record that batch throughput too, and the events per
// second they offered.
const (
	MetricDeliveredRate   driver.Metric = "delivered_rate"
	MetricBatchThroughput driver.Metric = "batch_throughput"
	MetricOfferedEvents   driver.Metric = "offered_events"
)

// DefaultAtThroughput measures the batch throughput with 4 senders of
// 100-event batches for 3 s, then offers 25%, 50% and 75% of it for 3 s
// each, one round.
var DefaultAtThroughput = AtThroughputOptions{Batch: 100, Senders: 4, Measure: 3 * time.Second,
	Fractions: []float64{0.25, 0.5, 0.75}, Duration: 3 * time.Second, Rounds: 1}

// Estimate returns the expected duration of the points, when each settle
// wait is bounded by settle.
func (o AtThroughputOptions) Estimate(settle time.Duration) Estimate {
	e := attacks(2, o.Measure, settle)
	return e.Add(attacks(len(o.Fractions)*o.Rounds*2, o.Duration, settle))
}

// batchLoad is s's load sent as batches of n events to /events/batch.
func (s RateScenario) batchLoad(n int) Load {
	return Load{Phase: s.Load.Phase + "_batch", Path: s.Load.Path + "/batch", Body: func(i uint64) []byte {
		var b bytes.Buffer
		b.WriteString(`{"events":[`)
		for k := range n {
			if k > 0 {
				b.WriteByte(',')
			}
			b.Write(s.Load.Body(i*uint64(n) + uint64(k)))
		}
		b.WriteString(`]}`)
		return b.Bytes()
	}}
}

// AtThroughput measures each side's batch throughput (events per second
// written through POST <path>/batch by o.Senders closed-loop senders and
// delivered during the same o.Measure: the lower of the two) as the point
// <pair>.batch_throughput, then offers each side open-loop batches at
// o.Fractions of its own throughput, one point <pair>.at_throughput per
// fraction, whose delivery percentiles show the latency cost of each
// side's delivery path near its ceiling. It is meant for the log pair,
// whose load is an event and whose batch endpoint takes {"events":[...]}.
func (s RateScenario) AtThroughput(ctx context.Context, e *Env, run *driver.Run, o AtThroughputOptions) error {
	run.Settings["at_throughput_batch"] = o.Batch
	run.Settings["at_throughput_senders"] = o.Senders
	run.Settings["at_throughput_measure_s"] = o.Measure.Seconds()
	run.Settings["at_throughput_fractions"] = o.Fractions
	run.Settings["at_throughput_duration_s"] = o.Duration.Seconds()
	if err := e.Ensure(ctx, s.Pair.Services(), nil, nil); err != nil {
		return err
	}
	s.warmup(ctx, e)
	bs := s
	bs.Load = s.batchLoad(o.Batch)
	e.logf("%s batch throughput: %d senders × %d-event batches for %s", s.Pair.Name, o.Senders, o.Batch, o.Measure)
	tp := driver.Point{Scenario: PairScenarioName(s.Pair.Name, KindBatchThroughput), Name: fmt.Sprintf("%d senders × %d", o.Senders, o.Batch), DurationS: o.Measure.Seconds(), Sides: s.Pair.Sides()}
	through := map[string]float64{}
	err := driver.RunPoint(ctx, &tp, 1, func(ctx context.Context, svc string, _ int) (*driver.SideResult, error) {
		res, err := bs.closedLoop(ctx, e, svc, o)
		if res != nil {
			through[svc] = res.Metrics[MetricBatchThroughput]
		}
		return res, err
	})
	run.Points = append(run.Points, tp)
	if err != nil {
		return err
	}
	for _, f := range o.Fractions {
		p := driver.Point{Scenario: PairScenarioName(s.Pair.Name, KindAtThroughput), Name: fmt.Sprintf("%.0f%%", 100*f), DurationS: o.Duration.Seconds(), Sides: s.Pair.Sides()}
		e.logf("%s at %.0f%% of each side's batch throughput for %s", s.Pair.Name, 100*f, o.Duration)
		err := driver.RunPoint(ctx, &p, o.Rounds, func(ctx context.Context, svc string, _ int) (*driver.SideResult, error) {
			if through[svc] <= 0 {
				return nil, fmt.Errorf("no batch throughput measured")
			}
			events := math.Round(f * through[svc])
			res, err := bs.side(ctx, e, rateAttack{svc: svc, rate: events / float64(o.Batch), dur: o.Duration, settle: e.settle()})
			if res != nil {
				res.Metrics[MetricOfferedEvents] = events
				res.Metrics[MetricBatchThroughput] = through[svc]
			}
			return res, err
		})
		run.Points = append(run.Points, p)
		if err != nil {
			return err
		}
	}
	return nil
}

// closedLoop measures one side's batch throughput: o.Senders senders
// post batches back to back for o.Measure; accepted_rate is events
// answered 2xx per second, delivered_rate events delivered per second in
// the same window, batch_throughput the lower of the two.
func (s RateScenario) closedLoop(ctx context.Context, e *Env, svc string, o AtThroughputOptions) (*driver.SideResult, error) {
	base := e.URL(svc)
	res := &driver.SideResult{Metrics: map[driver.Metric]float64{}}
	if err := driver.ResetStats(ctx, base); err != nil {
		return res, err
	}
	url := base + s.Load.Path
	c := driver.Loop(ctx, driver.LoopSpec{
		Name: fmt.Sprintf("%-12s batch throughput", svc), Workers: o.Senders, Duration: o.Measure, Progress: e.Progress,
		Op: func(ctx context.Context, w int, n uint64) (int, error) {
			code, _, err := driver.Do(ctx, http.MethodPost, url, s.Load.Body(uint64(w)<<32|n))
			return code, err
		},
	})
	res.Phases = append(res.Phases, driver.Phase{Name: s.Load.Phase, Client: c})
	driver.FlattenClient(res.Metrics, driver.ClientPrefix, c)
	st, err := driver.GetStats(ctx, base)
	if err != nil {
		return res, err
	}
	accepted := float64(c.OK*int64(o.Batch)) / c.DurationS
	delivered := float64(counterSum(st, s.Pair.Out)) / c.DurationS
	res.Metrics[MetricAcceptedRate] = math.Round(accepted)
	res.Metrics[MetricDeliveredRate] = math.Round(delivered)
	res.Metrics[MetricBatchThroughput] = math.Round(min(accepted, delivered))
	// Let the backlog drain before the next side or point.
	t0 := time.Now()
	for time.Since(t0) < e.settle() {
		if st, err = driver.GetStats(ctx, base); err != nil {
			return res, err
		}
		if s.Pair.backlog(st) <= 0 {
			break
		}
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	res.Metrics[MetricSettle] = math.Round(time.Since(t0).Seconds()*100) / 100
	res.Stats = st
	return res, nil
}
