package report

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/eventstore"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/raw"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/scenario"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// The file names of the charts this file draws, by key; the pairs'
// cards (Pair.card) are <pair>-card.svg.
const (
	throughputFile  = "throughput-batch.svg"
	cpuFile         = "cpu-per-1k.svg"
	queueRateFile   = "queue-latency-rate.svg"
	logRateFile     = "log-latency-rate.svg"
	notifyFile      = "notify-committers.svg"
	toastFile       = "documents-toast.svg"
	stalenessFile   = "cache-staleness.svg"
	eventStoreFile  = "eventstore.svg"
	tallChartHeight = 14 * vg.Centimeter
)

// CardFile is the file name of pair's headline chart.
func CardFile(pair string) string { return pair + "-card.svg" }

// pairSides are the rate pairs' sides, Postgres first, and the
// server-side latency their ceilings judge.
var pairSides = map[string]struct {
	sides   [2]string
	latency string
}{
	pairs.Queue: {[2]string{pairs.NoRabbitMQ, pairs.RabbitMQ}, "processing"},
	pairs.Log:   {[2]string{pairs.NoKafka, pairs.Kafka}, "delivery"},
}

// sideXY is one side's metric of p at x: the median of the rounds with
// their min–max, or a gap saying why there is none.
func sideXY(p *driver.Point, metric driver.Metric, side string, x float64) xy {
	if st := p.SideStatus(side); !st.OK() {
		return xy{x: x, failed: failedMark}
	}
	m := p.Find(metric)
	if m == nil {
		return xy{x: x, failed: notRecorded}
	}
	a, ok := m.Sides[side]
	if !ok {
		return xy{x: x, failed: notRecorded}
	}
	return xy{x: x, y: a.Median, lo: a.Min, hi: a.Max}
}

// recorded reports whether any of ps has metric for side.
func recorded(ps []*driver.Point, metric driver.Metric, side string) bool {
	for _, p := range ps {
		if m := p.Find(metric); m != nil {
			if _, ok := m.Sides[side]; ok {
				return true
			}
		}
	}
	return false
}

// batchX is a throughput point's batch size as an x value.
func batchX(p *driver.Point) float64 { return float64(batchOf(p)) }

// throughputChart draws accepted and processed items/s against batch
// size, one panel per pair of pairs, both sides in each.
func throughputChart(r *driver.Run, pairs []string, path string) (bool, error) {
	var plots []*plot.Plot
	var legend []legendEntry
	for _, pair := range pairs {
		ps := throughputPoints(r, pair)
		if len(ps) == 0 {
			continue
		}
		sides := pairSides[pair].sides
		var ss []series
		for i, side := range sides {
			who := "Postgres side"
			switch {
			case len(pairs) == 1:
				who = SideLabel(r, side)
			case i == 1:
				who = "RabbitMQ / Kafka side"
			}
			acc := series{label: who + ": accepted/s", color: sideColors[i]}
			proc := series{label: who + ": processed/s", color: sideColors[i], dashed: true, box: true}
			for _, p := range ps {
				acc.pts = append(acc.pts, sideXY(p, scenario.MetricAccepted, side, batchX(p)))
				proc.pts = append(proc.pts, sideXY(p, scenario.MetricEndToEnd, side, batchX(p)))
			}
			ss = append(ss, acc, proc)
		}
		p, lg, err := linePanel(lineSpec{
			title: fmt.Sprintf("%s: %s vs %s", pair, sides[0], sides[1]), xlabel: "items per batch request", ylabel: "items/s",
			logX: true, logY: true, series: ss,
		})
		if err != nil || p == nil {
			return false, err
		}
		plots, legend = append(plots, p), lg
	}
	if len(plots) == 0 {
		return false, nil
	}
	title := "throughput against batch size (closed loop, log scales)"
	if len(pairs) == 1 {
		title = pairs[0] + ": " + title
	}
	return true, renderPanels(title, legend, plots, panelGrid{rows: 1, cols: len(plots), height: chartHeight}, path)
}

// cpuChart draws CPU-seconds per 1,000 items against batch size, one
// panel per side of each pair, one line per process group on that
// pair's path.
func cpuChart(r *driver.Run, path string) (bool, error) {
	groups := map[string][]string{pairs.Queue: {"service", "postgres", "rabbitmq", "total"}, pairs.Log: {"service", "postgres", "kafka", "total"}}
	colors := map[string]int{"service": 2, "postgres": 0, "rabbitmq": 1, "kafka": 1, "total": 4}
	var set panelSet
	for _, pair := range []string{pairs.Queue, pairs.Log} {
		ps := throughputPoints(r, pair)
		if len(ps) == 0 {
			continue
		}
		for _, side := range pairSides[pair].sides {
			var ss []series
			for _, g := range groups[pair] {
				s := series{label: costLabels[g], color: palette[colors[g]], dashed: g == "total", box: g == "total"}
				if !recorded(ps, scenario.MetricCPUPerThousand(g), side) {
					continue // that process was not counted in this run
				}
				for _, p := range ps {
					v := sideXY(p, scenario.MetricCPUPerThousand(g), side, batchX(p))
					if v.failed == "" && v.y <= 0 {
						continue // no CPU measured in that process: nothing to draw on a log axis
					}
					s.pts = append(s.pts, v)
				}
				ss = append(ss, s)
			}
			p, lg, err := linePanel(lineSpec{title: pair + ": " + SideLabel(r, side), xlabel: "items per batch", ylabel: "CPU-s / 1,000 items", logX: true, logY: true, series: ss})
			if err != nil {
				return false, err
			}
			set.add(p, lg)
		}
	}
	if len(set.plots) == 0 {
		return false, nil
	}
	return true, renderPanels("CPU-seconds per 1,000 items by batch size, per process", set.legend, set.plots, panelGrid{rows: 2, cols: 2, height: tallChartHeight}, path)
}

// sloRE reads a ceiling criteria's latency limit ("... p99 < 100ms"),
// for files written before the criteria's figures were recorded.
var sloRE = regexp.MustCompile(`p99 < (\S+)$`)

// ceilingSLO is the p99 bound c's steps were judged by, and whether it is
// known.
func ceilingSLO(c *driver.Ceiling) (float64, bool) {
	if c.Spec != nil && c.Spec.P99MS > 0 {
		return c.Spec.P99MS, true
	}
	if m := sloRE.FindStringSubmatch(c.Criteria); m != nil {
		if d, err := time.ParseDuration(m[1]); err == nil {
			return float64(d) / float64(time.Millisecond), true
		}
	}
	return 0, false
}

// rateLatencyChart draws a rate pair's server-side p50 and p99 against
// the offered rate from every step of its ceiling searches (the
// conditions the knees were found under), up to and past each side's
// knee: the p99 bound the steps were judged by, and each side's median
// knee as a dotted line labelled with what bound it. A rate at which a
// step's measurement failed is marked, never drawn; a side whose knee is
// no figure (not reached, set by the admission limit, failed) has no knee
// line, its series' label says why.
func rateLatencyChart(r *driver.Run, pair, path string) (bool, error) {
	ps, lat := pairSides[pair].sides, pairSides[pair].latency
	var slo *hline
	var knees []vline
	var ss []series
	for i, side := range ps {
		var c *driver.Ceiling
		for j := range r.Ceilings {
			if r.Ceilings[j].Service == side {
				c = &r.Ceilings[j]
			}
		}
		if c == nil {
			continue
		}
		l := kneeLatency(c, lat)
		if v, ok := ceilingSLO(c); ok && slo == nil {
			slo = &hline{y: v, label: fmt.Sprintf("bound: %s p99 < %s", l, ms(v))}
		}
		k := kneeOf(c)
		label, suffix := SideLabel(r, side), ""
		if v, why := k.value(); why == "" {
			kl := fmt.Sprintf("%s ceiling %s/s", label, num(v))
			if b := k.bindShort(); b != "" {
				kl += " (" + b + ")"
			}
			knees = append(knees, vline{x: v, color: sideColors[i], label: kl})
		} else {
			suffix = " (ceiling " + k.mark() + ")"
		}
		curve := kneeCurve(c, l)
		for _, q := range []string{"p99", "p50"} {
			s := series{label: fmt.Sprintf("%s %s", label, q), color: sideColors[i], dashed: q == "p50", box: i == 1}
			if q == "p99" {
				s.label += suffix
			}
			for _, cp := range curve {
				v := cp.p99
				if q == "p50" {
					v = cp.p50
					if cp.invalid != "" {
						continue // one mark per rate, on the p99 series
					}
				}
				s.pts = append(s.pts, v)
			}
			ss = append(ss, s)
		}
	}
	p, legend, err := linePanel(lineSpec{
		title: fmt.Sprintf("server-side %s latency, ceiling steps", lat), xlabel: "offered rate (requests/s)", ylabel: "ms",
		logX: true, logY: true, series: ss, slo: slo, knees: knees,
	})
	if err != nil || p == nil {
		return false, err
	}
	return true, renderPanels(pair+": latency against offered rate (log scales)", legend, []*plot.Plot{p}, panelGrid{rows: 1, cols: 1, height: chartHeight}, path)
}

// modeName is an append row's mode ("read-then-append" for the older
// files' rows, which name none).
func modeName(r eventstore.AppendRow) string {
	m, _ := eventstore.ModeOf(r.Mode)
	if m.Name == "" {
		return r.Mode
	}
	return m.Name
}

func slicesIndex(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// notifyChart draws commits/s against committers for each NOTIFY mode,
// from the raw loops' NOTIFY series (one measurement per point: no
// whiskers).
func notifyChart(s *raw.NotifySeries, path string) (bool, error) {
	if s == nil || len(s.Points) == 0 {
		return false, nil
	}
	labels := map[string]string{raw.NotifyNone: "INSERT + COMMIT (no NOTIFY)", raw.NotifyInTx: "pg_notify in the transaction", raw.NotifyDebounced: "debounced NOTIFY"}
	var ss []series
	for i, mode := range raw.NotifyModes {
		sr := series{label: labels[mode], color: palette[[]int{4, 1, 0}[i]], box: i == 1, dashed: i == 0}
		for _, p := range s.Points {
			if p.Mode != mode {
				continue
			}
			v := xy{x: float64(p.Committers), y: p.TPS, lo: p.TPS, hi: p.TPS}
			if p.Error != "" || p.TPS <= 0 {
				v = xy{x: float64(p.Committers), failed: failedMark}
			}
			sr.pts = append(sr.pts, v)
		}
		ss = append(ss, sr)
	}
	var ticks []plot.Tick
	for _, n := range raw.NotifyCommitters {
		ticks = append(ticks, plot.Tick{Value: float64(n), Label: strconv.Itoa(n)})
	}
	p, legend, err := linePanel(lineSpec{title: "one logged table, one LISTENer, " + num(s.PointSeconds) + " s per point", xlabel: "concurrent committers", ylabel: "commits/s",
		logX: true, series: ss, xticks: ticks})
	if err != nil || p == nil {
		return false, err
	}
	return true, renderPanels("NOTIFY: commits/s against committers (raw loops)", legend, []*plot.Plot{p}, panelGrid{rows: 1, cols: 1, height: chartHeight}, path)
}

// toastChart draws the documents pair's rewrite of a large profile
// against its size, pglz vs lz4 on the Postgres side, against the
// neighbour-column patch; a second panel the WAL per operation.
func toastChart(r *driver.Run, path string) (bool, error) {
	pointsOf := func(sc driver.ScenarioName) []*driver.Point {
		var out []*driver.Point
		for i := range r.Points {
			if r.Points[i].Scenario == sc {
				out = append(out, &r.Points[i])
			}
		}
		sort.Slice(out, func(i, j int) bool { return sizeBytes(out[i].Name) < sizeBytes(out[j].Name) })
		return out
	}
	pglz, lz4 := pointsOf(scenario.PairScenarioName(pairs.Documents, scenario.KindRewrite)), pointsOf(scenario.PairScenarioName(pairs.Documents, scenario.KindRewriteLZ4))
	if len(pglz)+len(lz4) == 0 {
		return false, nil
	}
	// A variant that did not run has its points marked at the other's
	// sizes, not left out.
	lz4Ran := len(lz4) > 0
	if !lz4Ran {
		lz4 = pglz
	}
	kb := func(p *driver.Point) float64 { return float64(sizeBytes(p.Name)) / 1024 }
	var ticks []plot.Tick
	for _, p := range pglz {
		ticks = append(ticks, plot.Tick{Value: kb(p), Label: p.Name})
	}
	mk := func(label string, c int, dashed, box bool, ps []*driver.Point, metric driver.Metric, side string, scale float64) series {
		s := series{label: label, color: palette[c], dashed: dashed, box: box}
		for _, p := range ps {
			v := sideXY(p, metric, side, kb(p))
			if !lz4Ran && strings.Contains(label, "lz4") {
				v = xy{x: kb(p), failed: "not run"}
			}
			v.y, v.lo, v.hi = v.y*scale, v.lo*scale, v.hi*scale
			s.pts = append(s.pts, v)
		}
		return s
	}
	mongo := SideLabel(r, pairs.MongoDB)
	timeSeries := []series{
		mk("Postgres rewrite, pglz", 0, false, false, pglz, driver.ClientRewrite.P50(), pairs.NoMongoDB, 1),
		mk("Postgres rewrite, lz4", 2, false, true, lz4, driver.ClientRewrite.P50(), pairs.NoMongoDB, 1),
		mk("Postgres neighbour patch", 0, true, false, pglz, driver.ClientPatch.P50(), pairs.NoMongoDB, 1),
		mk(mongo+" rewrite", 1, false, true, pglz, driver.ClientRewrite.P50(), pairs.MongoDB, 1),
		mk(mongo+" neighbour patch", 1, true, true, pglz, driver.ClientPatch.P50(), pairs.MongoDB, 1),
	}
	tp, legend, err := linePanel(lineSpec{title: "request p50 (round trip)", xlabel: "profile size", ylabel: "ms", logX: true, logY: true, series: timeSeries, xticks: ticks})
	if err != nil || tp == nil {
		return false, err
	}
	walSeries := []series{
		mk("Postgres rewrite, pglz", 0, false, false, pglz, scenario.MetricWALPerRewrite, pairs.NoMongoDB, 1.0/1024),
		mk("Postgres rewrite, lz4", 2, false, true, lz4, scenario.MetricWALPerRewrite, pairs.NoMongoDB, 1.0/1024),
		mk("Postgres neighbour patch", 0, true, false, pglz, scenario.MetricWALPerPatch, pairs.NoMongoDB, 1.0/1024),
	}
	plots := []*plot.Plot{tp}
	if wp, _, err := linePanel(lineSpec{title: "Postgres WAL per operation", xlabel: "profile size", ylabel: "KiB", logX: true, logY: true, series: walSeries, xticks: ticks}); err != nil {
		return false, err
	} else if wp != nil {
		plots = append(plots, wp)
	}
	return true, renderPanels("documents: rewrite vs neighbour patch by profile size", legend, plots, panelGrid{rows: 1, cols: len(plots), height: chartHeight}, path)
}

// stalenessChart draws the cache pair's staleness window per mode after
// an out-of-band UPDATE, with the TTL as the reference line.
func stalenessChart(r *driver.Run, path string) (bool, error) {
	var p *driver.Point
	for i := range r.Points {
		if r.Points[i].Scenario == scenario.CacheStalenessScenario {
			p = &r.Points[i]
		}
	}
	if p == nil {
		return false, nil
	}
	s := series{label: "ms until every instance serves the new value", color: palette[0]}
	var ref *hline
	for i, mode := range p.Sides {
		s.pts = append(s.pts, sideXY(p, scenario.MetricStaleMS, mode, float64(i)))
		if ttl, ok := median(p, scenario.MetricStaleTTLMS, mode); ok && ref == nil {
			ref = &hline{y: ttl, label: fmt.Sprintf("PRODUCT_TTL (%s ms)", num(ttl))}
		}
	}
	bp, legend, err := barPanel(barSpec{title: "after an out-of-band UPDATE of 10 rows", ylabel: "ms", groups: p.Sides, series: []series{s}, ref: ref})
	if err != nil || bp == nil {
		return false, err
	}
	return true, renderPanels("cache: staleness window per mode", legend, []*plot.Plot{bp}, panelGrid{rows: 1, cols: 1, height: chartHeight}, path)
}

// eventStoreChart draws the event store's append rate per mode and
// engine (every round of both series), and the point read's time per
// engine at the stream length measured.
func eventStoreChart(es eventstore.Results, path string) (bool, error) {
	if es.Append == nil {
		return false, nil
	}
	engines := eventStoreEngines
	var modes []string
	for _, row := range es.Append.Rows {
		if m := modeName(row); slicesIndex(modes, m) < 0 {
			modes = append(modes, m)
		}
	}
	var ss []series
	for i, eng := range engines {
		s := series{label: eng, color: palette[[]int{0, 3, 1}[i]]}
		for j, mode := range modes {
			var vs []float64
			why, any := "", false
			for _, row := range es.Append.Rows {
				if row.Engine != eng || modeName(row) != mode {
					continue
				}
				any = true
				if st := appendStatus(row); !st.OK() {
					if why == "" {
						why = map[bool]string{true: "not run", false: failedMark}[st.State == driver.StateNotRun]
					}
					continue
				}
				vs = append(vs, row.OpsPerSec)
			}
			v, ok := agg(vs)
			switch {
			case !any:
				v = xy{failed: "not run"}
			case !ok:
				v = xy{failed: why}
			}
			v.x = float64(j)
			s.pts = append(s.pts, v)
		}
		ss = append(ss, s)
	}
	ap, legend, err := barPanel(barSpec{title: "append rate (all rounds)", ylabel: "appends/s", groups: modes, series: ss})
	if err != nil || ap == nil {
		return false, err
	}
	plots := []*plot.Plot{ap}
	if pr := es.PointRead; pr != nil {
		var rs []series
		group := "stream read in full"
		for i, eng := range engines {
			s := series{label: eng, color: palette[[]int{0, 3, 1}[i]]}
			v := xy{failed: "not run"}
			for _, row := range pr.Rows {
				if row.Engine != eng {
					continue
				}
				if st := pointReadStatus(row); !st.OK() {
					v = xy{failed: map[bool]string{true: "not run", false: failedMark}[st.State == driver.StateNotRun]}
					continue
				}
				v = xy{y: row.MedianMS, lo: row.MedianMS, hi: row.MedianMS}
				group = fmt.Sprintf("stream of %d events", row.Matched)
			}
			rs = append(rs, s)
			rs[len(rs)-1].pts = []xy{v}
		}
		if rp, _, err := barPanel(barSpec{title: "point read, median", ylabel: "ms", groups: []string{group}, series: rs}); err != nil {
			return false, err
		} else if rp != nil {
			plots = append(plots, rp)
		}
	}
	return true, renderPanels("event store: append rate by mode, and point-read time", legend, plots, panelGrid{rows: 1, cols: len(plots), height: chartHeight}, path)
}

// pairCharts draws the charts of issue 22's list that the runs, the
// raw loops and the event-store bench hold data for, and each pair's
// card; it returns the file names by key.
func pairCharts(all []*driver.Run, es eventstore.Results, src Sources, dir string, out map[string]string) error {
	add := func(key, file string, ok bool, err error) error {
		if err != nil {
			return fmt.Errorf("%s chart: %w", key, err)
		}
		if ok {
			out[key] = file
		}
		return nil
	}
	var errs []error
	for _, r := range all {
		switch r.Command {
		case "throughput":
			ok, err := throughputChart(r, []string{pairs.Queue, pairs.Log}, filepath.Join(dir, throughputFile))
			errs = append(errs, add("throughput", throughputFile, ok, err))
			ok, err = cpuChart(r, filepath.Join(dir, cpuFile))
			errs = append(errs, add("cpu", cpuFile, ok, err))
			ok, err = throughputChart(r, []string{pairs.Log}, filepath.Join(dir, CardFile(pairs.Log)))
			errs = append(errs, add("log-card", CardFile(pairs.Log), ok, err))
		case "scaleout":
			ok, err := scaleOutChart(r, filepath.Join(dir, scaleOutFile))
			errs = append(errs, add("scaleout", scaleOutFile, ok, err))
		default:
			if p, ok := reportOf(r.Command); ok && p.chart != nil {
				ok, err := p.chart.draw(r, filepath.Join(dir, p.chart.file))
				errs = append(errs, add(p.chart.key, p.chart.file, ok, err))
			}
		}
	}
	ok, err := notifyChart(src.Raw.Notify, filepath.Join(dir, notifyFile))
	errs = append(errs, add("notify", notifyFile, ok, err))
	ok, err = eventStoreChart(es, filepath.Join(dir, eventStoreFile))
	errs = append(errs, add(pairs.EventStore, eventStoreFile, ok, err))
	ok, err = failoverChart(src.FailoverParts, filepath.Join(dir, failoverFile))
	errs = append(errs, add("failover", failoverFile, ok, err))
	// The cards: a copy of the chart that best answers "should I replace
	// X with Postgres" (the log's is drawn above, its panel alone).
	for _, p := range pairReports() {
		pair, key := p.Name, p.card
		f, ok := out[key]
		if key == "" || !ok {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, CardFile(pair)), b, 0o644)
		}
		errs = append(errs, add(pair+"-card", CardFile(pair), err == nil, err))
	}
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// chartCaptions are the one-line captions RESULTS.md prints under the
// charts of pairCharts, by key. They say what to read, and what the
// chart does not show because it is not measured yet.
var chartCaptions = map[string]string{
	"failover": "Lower is better. Per fault of the cluster experiments, seconds from the fault to the first write sent after it that was acknowledged (and, for Kafka, found in the log afterwards); one bar per side and setting: the median of its runs, the whisker from the fastest to the slowest run (none for a fault run once). " +
		"What was lost is in the table above and on the README's cards, not on this chart. A failed experiment is marked \"failed\", writes not back within the run \"not back\", never a bar.",
	"scaleout": "One round per point, both axes logarithmic; dashed: the Postgres sides' second designs (\", cursors\"). " +
		"Top: the fan-out search's sustainable published tasks/s (higher is better; a side whose cost is all per copy falls as 1/N; a search that passed its ladder's top is drawn at the top, a lower bound: the table says \"≥\") and Postgres WAL per published task (lower is better). " +
		"Bottom: what each consumer group received per second at the groups points' fixed rate (flat is every group served) and the WAL no-kafka's slots retained at the attack's end (lower is better; Kafka has no slots). " +
		"A point whose measurement failed is marked \"failed\", never drawn.",
	"throughput": "Higher is better. Solid: items/s the batch endpoint accepted; dashed: items/s the service processed or delivered; whiskers: min–max of the rounds; both axes logarithmic. " +
		"A closed loop finds a maximum, not a sustainable rate: where processed/s is under accepted/s a backlog grew (the table says where it was only draining). Sustainable throughput at a stated p99 is not measured yet.",
	"cpu": "Lower is better: CPU-seconds (utime+stime) per 1,000 items of each process group, median of the rounds with min–max, both axes logarithmic; total is dashed. " +
		"A process with no CPU measured at a batch size has no point there (a log axis has no zero). The Postgres figure counts every process of the server; a broker off a side's path shows its idle cost.",
	"queue-rate": kneeCaption("processing"),
	"log-rate":   kneeCaption("delivery"),
	"notify": "Higher is better: commits/s of one-row INSERT transactions against concurrent committers, with pg_notify in each transaction, debounced outside them, or none. " +
		"One measurement per point (the raw loops run no rounds, so there are no whiskers).",
	"toast": "Lower is better: request p50 (round trip) of rewriting the whole profile against patching a neighbour column, Postgres with pglz (default) and lz4 TOAST compression; right: Postgres WAL per operation; both axes logarithmic, whiskers min–max of the rounds. " +
		"\"failed\" and \"not run\" mark points this run has no valid figure for (the table above says why).",
	"staleness": "Lower is better: milliseconds from an out-of-band UPDATE until both instances of a mode serve the new value, median of the rounds with min–max. " +
		"A bar at the red TTL line means the mode waits out its TTL; a bar well under it means the mode was invalidated.",
	pairs.EventStore: "Left, higher is better: appends/s per mode and engine, median of every round of both series with min–max. Right: time to read one stream in full. " +
		"\"not run\" is KurrentDB, which cannot be installed here. Point-read time against stream length and topic size is not measured yet: the bench reads one stream of one length.",
}

// kneeCaption is the caption of a rate pair's latency-against-rate chart.
func kneeCaption(latency string) string {
	return "Lower is better. Server-side " + latency + " p99 (solid) and p50 (dashed) per offered rate, from every step of the ceiling searches (median with min–max where a rate was tried more than once), both axes logarithmic; " +
		"red: the p99 bound the steps were judged by; vertical dotted: each side's ceiling, the rate a majority of its searches passed, labelled with the criterion that most often failed first above it. " +
		"Points right of a ceiling failed a criterion but were measured, so the curve shows what lies past it; a rate whose measurement failed (errors, nothing accepted, a backlog that did not drain) is marked \"failed\", not drawn. " +
		"The searches ran with the in-flight bound the section above states; fixed-rate points, which keep the services' own bound, are in the chart above."
}

// chartLine is the Markdown of the chart of key, with its caption; ""
// when the chart was not drawn.
func chartLine(charts map[string]string, key, chartsRel string) string {
	f, ok := charts[key]
	if !ok {
		return ""
	}
	return fmt.Sprintf("![%s](%s/%s)\n\n*%s*\n\n", key, chartsRel, f, chartCaptions[key])
}
