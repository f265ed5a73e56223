package report

import (
	"errors"
	"fmt"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/scenario"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"unicode/utf8"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/eventstore"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

var sideColors = []color.Color{color.RGBA{R: 0x33, G: 0x66, B: 0xcc, A: 0xff}, color.RGBA{R: 0xdd, G: 0x66, B: 0x22, A: 0xff}}

// Chart sizes: two panels side by side for the latency charts.
const (
	chartWidth  = 17 * vg.Centimeter
	chartHeight = 9 * vg.Centimeter
	titleSize   = 12
	legendSize  = 11
)

// charWidth is the advance per character, in font sizes, the layout
// reserves: a viewer substituting a wider font than the metrics gonum/plot
// measures with (Liberation) still fits. The charts test checks with it.
const charWidth = 0.6

// frame is a chart's canvas with its title at the top and a one-row
// legend at the bottom; body is what remains for the panels.
type frame struct {
	svg  *vgsvg.Canvas
	body draw.Canvas
}

// legendEntry is one entry of a frame's legend.
type legendEntry struct {
	label  string
	thumbs []plot.Thumbnailer
}

// newFrame draws the title (left-aligned: gonum/plot centres text with
// its own font metrics, so a wider substitute font would push a centred
// title off the right edge) and the legend (one row, centred), and returns
// the frame.
func newFrame(title string, legend []legendEntry) frame {
	return newFrameSized(title, legend, chartWidth, chartHeight)
}

// newFrameSized is newFrame on a width × height canvas; a legend wider
// than the canvas wraps onto more rows, each centred.
func newFrameSized(title string, legend []legendEntry, width, height vg.Length) frame {
	svg := vgsvg.New(width, height)
	dc := draw.New(svg)
	sty := text.Style{Font: font.From(plot.DefaultFont, titleSize), Handler: plot.DefaultTextHandler}
	dc.FillText(sty, vg.Point{X: dc.Min.X + vg.Points(8), Y: dc.Max.Y - vg.Points(titleSize*1.2)}, title)

	// Legend entries: a thumbnail, a space and the label, entries
	// separated by two em; rows fill up to the canvas' width.
	thumbW, gap := vg.Points(20), vg.Points(2*legendSize)
	room := dc.Max.X - dc.Min.X - vg.Points(16)
	widths := make([]vg.Length, len(legend))
	var rows [][]int
	var rowW []vg.Length
	for i, e := range legend {
		widths[i] = thumbW + vg.Points(charWidth*legendSize*float64(utf8.RuneCountInString(" "+e.label)))
		n := len(rows)
		if n == 0 || rowW[n-1]+gap+widths[i] > room {
			rows = append(rows, []int{i})
			rowW = append(rowW, widths[i])
			continue
		}
		rows[n-1] = append(rows[n-1], i)
		rowW[n-1] += gap + widths[i]
	}
	rowH := vg.Points(legendSize * 1.5)
	for r, row := range rows {
		x := (dc.Min.X + dc.Max.X - rowW[r]) / 2
		bottom := dc.Min.Y + vg.Points(4) + vg.Length(len(rows)-1-r)*rowH
		for _, i := range row {
			l := plot.NewLegend()
			l.TextStyle.Font.Size = vg.Points(legendSize)
			l.Left, l.Top = true, false
			l.Add(legend[i].label, legend[i].thumbs...)
			c := draw.Canvas{Canvas: dc.Canvas, Rectangle: vg.Rectangle{Min: vg.Point{X: x, Y: bottom}, Max: vg.Point{X: x + widths[i], Y: bottom + rowH}}}
			l.Draw(c)
			x += widths[i] + gap
		}
	}
	extra := vg.Length(max(len(rows)-1, 0)) * rowH
	body := draw.Crop(dc, vg.Points(4), -vg.Points(8), vg.Points(legendSize*2.5)+extra, -vg.Points(titleSize*2))
	return frame{svg: svg, body: body}
}

// save writes the frame to path.
func (f frame) save(path string) error {
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	_, werr := f.svg.WriteTo(out)
	return errors.Join(werr, out.Close())
}

// panel is one metric of a latency chart.
type panel struct {
	title  string
	metric driver.Metric
}

// latencyChartSpec is a rate pair's latency chart: its title, sides (A
// first), one panel per server-side metric, and file name.
type latencyChartSpec struct {
	title  string
	sides  [2]string
	panels []panel
	file   string
}

// latencyChart draws lc's panels, one per metric, with the median
// latency of the rounds per rate, one line per side, to path. Both axes
// are logarithmic: the low rates, where the two sides are a few
// milliseconds apart, get as much room as the high ones where a backlog
// takes seconds to drain.
func latencyChart(run *driver.Run, scenario driver.ScenarioName, lc latencyChartSpec, path string) (bool, error) {
	title, sides, panels := lc.title, lc.sides, lc.panels
	var pts []*driver.Point
	for i := range run.Points {
		if run.Points[i].Scenario == scenario {
			pts = append(pts, &run.Points[i])
		}
	}
	sort.Slice(pts, func(i, j int) bool { return pts[i].Rate < pts[j].Rate })
	if len(pts) == 0 {
		return false, nil
	}
	var ticks []plot.Tick
	for _, pt := range pts {
		ticks = append(ticks, plot.Tick{Value: pt.Rate, Label: fmt.Sprintf("%g", pt.Rate)})
	}
	var plots []*plot.Plot
	var legend []legendEntry
	for _, pn := range panels {
		p, entries, err := latencyPanel(run, pts, ticks, sides, pn)
		if err != nil {
			return false, err
		}
		if p == nil {
			continue
		}
		if len(plots) == 0 {
			legend = entries // the first panel drawn names the sides
		}
		plots = append(plots, p)
	}
	if len(plots) == 0 {
		return false, nil
	}
	f := newFrame(title, legend)
	tiles := draw.Tiles{Rows: 1, Cols: len(plots), PadX: vg.Points(14)}
	canvases := plot.Align([][]*plot.Plot{plots}, tiles, f.body)
	for i, p := range plots {
		p.Draw(canvases[0][i])
	}
	return true, f.save(path)
}

// latencyPanel draws one panel of latencyChart: pn's metric of each side
// at every rate of pts, a gap where a side is not valid. It returns nil
// when no side has a figure, and the legend entries of the sides drawn.
func latencyPanel(run *driver.Run, pts []*driver.Point, ticks []plot.Tick, sides [2]string, pn panel) (*plot.Plot, []legendEntry, error) {
	p := plot.New()
	p.Title.Text = pn.title
	p.Title.TextStyle.Font.Size = vg.Points(11)
	p.X.Label.Text = "arrival rate (/s)"
	p.Y.Label.Text = "ms"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.Y.Tick.Marker = logTicks{}
	p.Add(plotter.NewGrid())
	lo, hi := math.Inf(1), math.Inf(-1)
	var legend []legendEntry
	var gaps []gap
	for i, side := range sides {
		var xys plotter.XYs
		for _, pt := range pts {
			if st := pt.SideStatus(side); !st.OK() {
				gaps = append(gaps, gap{pt.Rate, i})
				continue
			}
			if v, ok := median(pt, pn.metric, side); ok {
				v = math.Max(v, 0.01) // a log axis has no zero
				xys = append(xys, plotter.XY{X: pt.Rate, Y: v})
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
		if len(xys) == 0 {
			continue
		}
		l, sc, err := plotter.NewLinePoints(xys)
		if err != nil {
			return nil, nil, err
		}
		l.Color, sc.Color = sideColors[i], sideColors[i]
		l.Width = vg.Points(1.5)
		if i == 1 {
			sc.Shape = draw.BoxGlyph{}
		}
		p.Add(l, sc)
		legend = append(legend, legendEntry{SideLabel(run, side), []plot.Thumbnailer{l, sc}})
	}
	if len(legend) == 0 {
		return nil, nil, nil
	}
	// Room around the data: the first and last rate labels stay inside
	// the panel, and the y range spans at least one decade so the log
	// ticks have labels.
	p.X.Min, p.X.Max = pts[0].Rate/1.3, pts[len(pts)-1].Rate*1.3
	p.Y.Min = math.Pow(10, math.Floor(math.Log10(lo)))
	p.Y.Max = math.Max(math.Pow(10, math.Ceil(math.Log10(hi))), p.Y.Min*10)
	if err := markGaps(p, gaps); err != nil {
		return nil, nil, err
	}
	return p, legend, nil
}

// gap is a point a side has no valid figure at: the line skips it and
// the panel marks it.
type gap struct {
	x    float64
	side int
}

// failedMark is the text a chart draws where a value is not valid.
const failedMark = "failed"

// markGaps writes failedMark, in the side's colour, at the bottom of p at
// each gap's x: a marked gap, not a point.
func markGaps(p *plot.Plot, gaps []gap) error {
	if len(gaps) == 0 {
		return nil
	}
	var xys plotter.XYLabels
	for _, g := range gaps {
		// Two sides' marks at one rate are stacked, not overprinted.
		y := p.Y.Min * math.Pow(1.35, float64(g.side+1))
		xys.XYs = append(xys.XYs, plotter.XY{X: g.x, Y: y})
		xys.Labels = append(xys.Labels, failedMark)
	}
	labels, err := plotter.NewLabels(xys)
	if err != nil {
		return err
	}
	for j, g := range gaps {
		labels.TextStyle[j].XAlign = draw.XCenter
		labels.TextStyle[j].Font.Size = vg.Points(8)
		labels.TextStyle[j].Color = sideColors[g.side]
	}
	p.Add(labels)
	return nil
}

// logTicks marks a log axis: 1, 2 and 5 of every decade labelled when the
// axis spans at most two decades, only the powers of ten otherwise, and
// the other integers of each decade as minor ticks.
type logTicks struct{}

// Ticks returns the ticks between lo and hi (both > 0).
func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	labelled := map[int]bool{1: true, 2: true, 5: true}
	if hi/lo > 100 {
		labelled = map[int]bool{1: true}
	}
	var ticks []plot.Tick
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		for i := 1; i < 10; i++ {
			v := float64(i) * math.Pow(10, e)
			if v < lo*(1-1e-9) || v > hi*(1+1e-9) {
				continue
			}
			t := plot.Tick{Value: v}
			if labelled[i] {
				t.Label = strconv.FormatFloat(v, 'g', -1, 64)
			}
			ticks = append(ticks, t)
		}
	}
	return ticks
}

// plainTicks are gonum/plot's default ticks labelled without trailing
// zeros ("50", not "50.00").
type plainTicks struct{}

// Ticks returns the default ticks between lo and hi, relabelled.
func (plainTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ticks {
		if ticks[i].Label != "" {
			ticks[i].Label = strconv.FormatFloat(ticks[i].Value, 'g', -1, 64)
		}
	}
	return ticks
}

// Caption says what to read from the chart of key (queue, log, documents,
// ceilings); RESULTS.md prints it under the chart.
func Caption(key string) string {
	if p, ok := reportOf(key); ok {
		return p.caption
	}
	if key == "ceilings" {
		return "Higher is better: each side's single-request ceiling, the highest offered rate whose step passed every check of the one absolute rule (the criteria and the in-flight bound are in each pair's Ceilings section), the rate a majority of its searches passed. " +
			"A side whose ceiling was not reached, was set by the services' admission limit or whose search failed has no bar, a mark saying why. " +
			"Compare the two bars of a pair, not one pair with another: their requests do different work."
	}
	return ""
}

// bar is one bar group entry.
type bar struct {
	group string
	vals  [2]float64
	// failed holds, per side, why its value is not valid ("" when it
	// is): such a bar is not drawn, its place says failedMark.
	failed [2]string
}

// barChart draws grouped bars, one bar per side in each group, each bar
// labelled with its value.
func barChart(title, ylabel string, sides [2]string, bars []bar, path string) (bool, error) {
	if len(bars) == 0 {
		return false, nil
	}
	p := plot.New()
	p.Y.Label.Text = ylabel
	w := vg.Points(28)
	var names []string
	top := 0.0
	for _, b := range bars {
		names = append(names, b.group)
		for i, v := range b.vals {
			if b.failed[i] == "" {
				top = math.Max(top, v)
			}
		}
	}
	if top <= 0 {
		top = 1 // every bar failed: an empty axis with the marks
	}
	var legend []legendEntry
	for i := range 2 {
		var vs plotter.Values
		for _, b := range bars {
			v := b.vals[i]
			if b.failed[i] != "" {
				v = 0 // no bar: the label below says why
			}
			vs = append(vs, v)
		}
		bc, err := plotter.NewBarChart(vs, w)
		if err != nil {
			return false, err
		}
		bc.Color = sideColors[i]
		bc.LineStyle.Width = 0
		bc.Offset = vg.Length(float64(i)-0.5) * w
		p.Add(bc)
		legend = append(legend, legendEntry{sides[i], []plot.Thumbnailer{bc}})
		// The value above each bar; a failed value's mark instead, the
		// second side's a line higher so that two marks of one group do
		// not overprint.
		var xys, marks plotter.XYLabels
		for j, v := range vs {
			if bars[j].failed[i] != "" {
				marks.XYs = append(marks.XYs, plotter.XY{X: float64(j), Y: 0})
				marks.Labels = append(marks.Labels, bars[j].failed[i])
				continue
			}
			xys.XYs = append(xys.XYs, plotter.XY{X: float64(j), Y: v})
			xys.Labels = append(xys.Labels, num(v))
		}
		for k, l := range []plotter.XYLabels{xys, marks} {
			if len(l.XYs) == 0 {
				continue
			}
			labels, err := plotter.NewLabels(l)
			if err != nil {
				return false, err
			}
			for j := range labels.TextStyle {
				labels.TextStyle[j].XAlign = draw.XCenter
				labels.TextStyle[j].Font.Size = vg.Points(9)
				if k == 1 {
					labels.TextStyle[j].Color = sideColors[i]
				}
			}
			labels.Offset = vg.Point{X: vg.Length(float64(i)-0.5) * w, Y: vg.Points(3 + float64(k*i)*12)}
			p.Add(labels)
		}
	}
	p.NominalX(names...)
	p.X.Min, p.X.Max = -0.6, float64(len(bars))-0.4
	p.Y.Tick.Marker = plainTicks{}
	p.Y.Min, p.Y.Max = 0, top*1.15
	f := newFrame(title, legend)
	p.Draw(f.body)
	return true, f.save(path)
}

// latencyCharts declares the latency chart of each rate pair: its title,
// sides (A first), one panel per server-side metric, and file name.
var latencyCharts = map[string]latencyChartSpec{
	pairs.Queue: {"queue: latency p99 per arrival rate (log scales)", [2]string{pairs.NoRabbitMQ, pairs.RabbitMQ}, []panel{
		{"send → processed p99", driver.ServerProcessingP99},
		{"delivery p99", driver.ServerDeliveryP99},
	}, "queue-latency.svg"},
	pairs.Log: {"log: latency per arrival rate (log scales)", [2]string{pairs.NoKafka, pairs.Kafka}, []panel{
		{"delivery p95", driver.ServerDeliveryP95},
		{"write p99", driver.ServerWriteP99},
	}, "log-latency.svg"},
}

// Charts draws the SVG charts of the runs (the event store's among them),
// the raw loops (src) into dir and returns their file names by key
// (queue, log, ceilings, documents, then pairCharts' keys).
func Charts(all []*driver.Run, src Sources, dir string) (map[string]string, error) {
	all, bench := splitBench(all)
	return drawCharts(all, eventStoreOf(bench), src, dir)
}

// drawCharts is Charts with the event store's results apart.
func drawCharts(all []*driver.Run, es eventstore.Results, src Sources, dir string) (map[string]string, error) {
	validate(all)
	out := map[string]string{}
	for _, run := range all {
		p, ok := reportOf(run.Command)
		if !ok || p.overview == nil {
			continue
		}
		file, ok, err := p.overview(run, dir)
		if err != nil {
			return nil, err
		}
		if ok {
			out[run.Command] = file
		}
	}
	// Ceilings of every pair in one chart.
	var bars []bar
	for _, run := range all {
		if len(run.Ceilings) < 2 {
			continue
		}
		br := bar{group: run.Command}
		for _, c := range run.Ceilings {
			i := 1
			if c.Service == pairs.NoRabbitMQ || c.Service == pairs.NoKafka {
				i = 0
			}
			// A knee that is no figure (failed, not reached, set by the
			// admission limit) is marked, never a bar.
			k := kneeOf(&c)
			if v, why := k.value(); why != "" {
				br.failed[i] = k.mark()
			} else {
				br.vals[i] = v
			}
		}
		bars = append(bars, br)
	}
	ok, err := barChart("ceilings: the highest rate 2 of 3 ceiling searches passed", "per second",
		[2]string{"Postgres side", "RabbitMQ / Kafka side"}, bars, filepath.Join(dir, "ceilings.svg"))
	if err != nil {
		return nil, fmt.Errorf("ceilings chart: %w", err)
	}
	if ok {
		out["ceilings"] = "ceilings.svg"
	}
	if err := pairCharts(all, es, src, dir, out); err != nil {
		return nil, err
	}
	return out, nil
}

// rateOverview is a rate pair's overview chart: its latencyCharts
// entry's panels per arrival rate.
func rateOverview(pair string) func(run *driver.Run, dir string) (string, bool, error) {
	return func(run *driver.Run, dir string) (string, bool, error) {
		lc := latencyCharts[pair]
		ok, err := latencyChart(run, scenario.RateScenarioName(pair), lc, filepath.Join(dir, lc.file))
		return lc.file, ok, err
	}
}

// documentsOverview is the documents pair's overview chart: each side's
// rewrite cost over its neighbour-patch cost, per size.
func documentsOverview(run *driver.Run, dir string) (string, bool, error) {
	var bars []bar
	for i := range run.Points {
		p := &run.Points[i]
		if p.Scenario != scenario.PairScenarioName(pairs.Documents, scenario.KindRewrite) {
			continue
		}
		br := bar{group: p.Name}
		for i, side := range p.Sides[:2] {
			v, ok := median(p, scenario.MetricCostRatioP50, side)
			switch {
			case !p.SideStatus(side).OK():
				br.failed[i] = failedMark
			case !ok:
				br.failed[i] = notRecorded
			}
			br.vals[i] = v
		}
		bars = append(bars, br)
	}
	const file = "documents-cost-ratio.svg"
	ok, err := barChart("documents: rewrite cost ÷ neighbour-patch cost (p50)", "rewrite ÷ patch",
		[2]string{SideLabel(run, pairs.NoMongoDB), SideLabel(run, pairs.MongoDB)}, bars, filepath.Join(dir, file))
	return file, ok, err
}
