package report

import (
	"image/color"
	"math"
	"slices"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// palette colours the series of the charts with more than two series;
// the first two are sideColors.
var palette = []color.Color{
	sideColors[0], sideColors[1],
	color.RGBA{R: 0x22, G: 0x99, B: 0x55, A: 0xff},
	color.RGBA{R: 0x99, G: 0x44, B: 0xaa, A: 0xff},
	color.RGBA{R: 0x77, G: 0x77, B: 0x77, A: 0xff},
	color.RGBA{R: 0x00, G: 0x99, B: 0xaa, A: 0xff},
}

// sloColor draws the SLO and TTL lines.
var sloColor = color.RGBA{R: 0xcc, G: 0x22, B: 0x22, A: 0xff}

// markColor is the colour a failed value's mark is drawn in: the
// series' colour darkened, so that the mark says which series it is and
// never has the colour of a drawn value (the PNG test counts those).
func markColor(c color.Color) color.Color {
	r, g, b, _ := c.RGBA()
	return color.RGBA{R: uint8(r >> 8 * 6 / 10), G: uint8(g >> 8 * 6 / 10), B: uint8(b >> 8 * 6 / 10), A: 0xff}
}

// xy is one value of a series: the median of the rounds with their
// min–max, or why there is none (failed non-empty: the chart marks a
// gap, never a value).
type xy struct {
	x, y, lo, hi float64
	failed       string
}

// series is one line (or one bar per group) of a panel.
type series struct {
	label  string
	color  color.Color
	dashed bool
	// box draws square glyphs instead of round ones.
	box bool
	pts []xy
}

// valid reports whether v can be drawn on the panel's axis.
func (v xy) valid(logY bool) bool {
	return v.failed == "" && !math.IsNaN(v.y) && !math.IsInf(v.y, 0) && (!logY || v.y > 0)
}

// hline is a horizontal reference line (an SLO, a TTL).
type hline struct {
	y     float64
	label string
}

// vline is a vertical marker (a side's knee) in a series' colour.
type vline struct {
	x     float64
	color color.Color
	label string
}

// lineSpec is one panel of a line chart.
type lineSpec struct {
	title          string
	xlabel, ylabel string
	logX, logY     bool
	// xticks, when set, are the x axis' labelled ticks.
	xticks []plot.Tick
	series []series
	slo    *hline
	knees  []vline
	// yMin, when positive, is the lowest y the axis shows.
	yMin float64
}

// whiskers draws min–max whiskers of a series' valid values.
type whiskers struct {
	pts   []xy
	color color.Color
	logY  bool
	// dx shifts every whisker horizontally (bars of a group).
	dx float64
}

// Plot implements plot.Plotter.
func (w whiskers) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	sty := draw.LineStyle{Color: w.color, Width: vg.Points(1)}
	cap := vg.Points(3)
	for _, v := range w.pts {
		if !v.valid(w.logY) || v.hi <= v.lo || (w.logY && v.lo <= 0) {
			continue
		}
		x := trX(v.x + w.dx)
		lo, hi := trY(math.Max(v.lo, p.Y.Min)), trY(math.Min(v.hi, p.Y.Max))
		c.StrokeLines(sty, c.ClipLinesY([]vg.Point{{X: x, Y: lo}, {X: x, Y: hi}})...)
		for _, y := range []vg.Length{lo, hi} {
			c.StrokeLine2(sty, x-cap, y, x+cap, y)
		}
	}
}

// bars draws one series' bars of a grouped bar panel, from zero, in data
// coordinates (group i's bar at x = i + dx, width w).
type bars struct {
	pts   []xy
	color color.Color
	dx, w float64
}

// Plot implements plot.Plotter.
func (b bars) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	for _, v := range b.pts {
		if !v.valid(false) {
			continue
		}
		x0, x1 := trX(v.x+b.dx-b.w/2), trX(v.x+b.dx+b.w/2)
		y0, y1 := trY(math.Max(0, p.Y.Min)), trY(math.Min(v.y, p.Y.Max))
		c.FillPolygon(b.color, c.ClipPolygonY([]vg.Point{{X: x0, Y: y0}, {X: x1, Y: y0}, {X: x1, Y: y1}, {X: x0, Y: y1}}))
	}
}

// Thumbnail implements plot.Thumbnailer.
func (b bars) Thumbnail(c *draw.Canvas) {
	c.FillPolygon(b.color, []vg.Point{{X: c.Min.X, Y: c.Min.Y}, {X: c.Max.X, Y: c.Min.Y}, {X: c.Max.X, Y: c.Max.Y}, {X: c.Min.X, Y: c.Max.Y}})
}

// yRange returns the y range of the panel's valid values (whiskers
// included) and reference lines, and whether there is any value.
func yRange(ss []series, logY bool, ref ...float64) (lo, hi float64, any bool) {
	lo, hi = math.Inf(1), math.Inf(-1)
	add := func(v float64) {
		if logY && v <= 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return
		}
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	for _, s := range ss {
		for _, v := range s.pts {
			if !v.valid(logY) {
				continue
			}
			any = true
			add(v.y)
			if v.hi > v.lo {
				add(v.lo)
				add(v.hi)
			}
		}
	}
	for _, r := range ref {
		add(r)
	}
	return lo, hi, any
}

// markShare is the height of one row of failed-value marks, as a share
// of a panel's y range.
const markShare = 0.07

// marked returns the indexes of the series that have a failed value.
func marked(ss []series) []int {
	var out []int
	for k, s := range ss {
		for _, v := range s.pts {
			if v.failed != "" {
				out = append(out, k)
				break
			}
		}
	}
	return out
}

// failMarks writes each failed value's reason at the bottom of p at its
// x, in its series' mark colour, each marked series a row above the
// previous one so that the marks of one x do not overprint.
func failMarks(p *plot.Plot, ss []series, logY bool, dx func(k int) float64) error {
	var xys plotter.XYLabels
	var colors []color.Color
	for row, k := range marked(ss) {
		for _, v := range ss[k].pts {
			if v.failed == "" {
				continue
			}
			step := float64(row) + 0.6
			var y float64
			if logY {
				y = p.Y.Min * math.Pow(p.Y.Max/p.Y.Min, markShare*step)
			} else {
				y = p.Y.Min + (p.Y.Max-p.Y.Min)*markShare*step
			}
			xys.XYs = append(xys.XYs, plotter.XY{X: v.x + dx(k), Y: y})
			xys.Labels = append(xys.Labels, v.failed)
			colors = append(colors, markColor(ss[k].color))
		}
	}
	if len(xys.XYs) == 0 {
		return nil
	}
	labels, err := plotter.NewLabels(xys)
	if err != nil {
		return err
	}
	for j := range labels.TextStyle {
		labels.TextStyle[j].XAlign = draw.XCenter
		labels.TextStyle[j].Font.Size = vg.Points(8)
		labels.TextStyle[j].Color = colors[j]
	}
	p.Add(labels)
	return nil
}

// newPanel returns a plot with the panel's title and axis labels.
func newPanel(title, xlabel, ylabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font.Size = vg.Points(11)
	p.X.Label.Text = xlabel
	p.Y.Label.Text = ylabel
	p.Add(plotter.NewGrid())
	return p
}

// linePanel draws spec: a line per series through its valid values, the
// values' whiskers, failed values as marks, the SLO and the knees. It
// returns nil when no series has a value, and the legend entries of the
// series (and of the SLO) in order.
func linePanel(spec lineSpec) (*plot.Plot, []legendEntry, error) {
	var ref []float64
	if spec.slo != nil {
		ref = append(ref, spec.slo.y)
	}
	lo, hi, any := yRange(spec.series, spec.logY, ref...)
	if !any {
		return nil, nil, nil
	}
	p := newPanel(spec.title, spec.xlabel, spec.ylabel)
	lineXAxis(p, spec)
	lineYAxis(p, spec, lo, hi)
	legend, err := lineSeries(p, spec)
	if err != nil {
		return nil, nil, err
	}
	if legend, err = lineReferences(p, spec, legend); err != nil {
		return nil, nil, err
	}
	if err := failMarks(p, spec.series, spec.logY, func(int) float64 { return 0 }); err != nil {
		return nil, nil, err
	}
	return p, legend, nil
}

// lineXAxis sets p's x axis over every series' points and knee of spec.
func lineXAxis(p *plot.Plot, spec lineSpec) {
	xlo, xhi := math.Inf(1), math.Inf(-1)
	for _, s := range spec.series {
		for _, v := range s.pts {
			xlo, xhi = math.Min(xlo, v.x), math.Max(xhi, v.x)
		}
	}
	for _, k := range spec.knees {
		xlo, xhi = math.Min(xlo, k.x), math.Max(xhi, k.x)
	}
	if spec.logX {
		p.X.Scale = plot.LogScale{}
		p.X.Min, p.X.Max = xlo/1.4, xhi*1.4
		p.X.Tick.Marker = logTicks{}
	} else {
		pad := math.Max((xhi-xlo)*0.08, 0.5)
		p.X.Min, p.X.Max = xlo-pad, xhi+pad
		p.X.Tick.Marker = plainTicks{}
	}
	if spec.xticks != nil {
		p.X.Tick.Marker = plot.ConstantTicks(spec.xticks)
	}
}

// lineYAxis sets p's y axis from lo to hi (spec.yMin lower on a log
// scale, with a band under the values for the marks of failed values).
func lineYAxis(p *plot.Plot, spec lineSpec, lo, hi float64) {
	if spec.logY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = logTicks{}
		if spec.yMin > 0 {
			lo = math.Min(lo, spec.yMin)
		}
		if m := len(marked(spec.series)); m > 0 {
			// A band under the values for the marks of failed values.
			f := markShare * (float64(m) + 0.5)
			span := math.Log10(hi / lo)
			lo /= math.Pow(10, math.Max(span, 1)*f/(1-f))
		}
		p.Y.Min = math.Pow(10, math.Floor(math.Log10(lo)))
		p.Y.Max = math.Max(math.Pow(10, math.Ceil(math.Log10(hi))), p.Y.Min*10)
	} else {
		p.Y.Tick.Marker = plainTicks{}
		p.Y.Min, p.Y.Max = 0, hi*1.15
	}
}

// lineSeries adds spec's series to p and returns their legend entries.
func lineSeries(p *plot.Plot, spec lineSpec) ([]legendEntry, error) {
	var legend []legendEntry
	for _, s := range spec.series {
		var xys plotter.XYs
		for _, v := range s.pts {
			if v.valid(spec.logY) {
				xys = append(xys, plotter.XY{X: v.x, Y: v.y})
			}
		}
		l, err := plotter.NewLine(plotter.XYs{{X: p.X.Min, Y: p.Y.Min}})
		if err != nil {
			return nil, err
		}
		l.Color, l.Width = s.color, vg.Points(1.5)
		if s.dashed {
			l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		}
		sc, err := plotter.NewScatter(plotter.XYs{{X: p.X.Min, Y: p.Y.Min}})
		if err != nil {
			return nil, err
		}
		sc.Color = s.color
		if s.box {
			sc.Shape = draw.BoxGlyph{}
		}
		legend = append(legend, legendEntry{s.label, []plot.Thumbnailer{l, sc}})
		if len(xys) == 0 {
			continue // a series of failed values only: its marks say so
		}
		l.XYs, sc.XYs = xys, xys
		if len(xys) > 1 {
			p.Add(l)
		}
		p.Add(sc, whiskers{pts: s.pts, color: s.color, logY: spec.logY})
	}
	return legend, nil
}

// lineReferences adds spec's SLO line and knees to p and their entries to
// legend.
func lineReferences(p *plot.Plot, spec lineSpec, legend []legendEntry) ([]legendEntry, error) {
	if spec.slo != nil {
		y := spec.slo.y
		l, err := plotter.NewLine(plotter.XYs{{X: p.X.Min, Y: y}, {X: p.X.Max, Y: y}})
		if err != nil {
			return nil, err
		}
		l.Color, l.Width, l.Dashes = sloColor, vg.Points(1), []vg.Length{vg.Points(2), vg.Points(2)}
		p.Add(l)
		legend = append(legend, legendEntry{spec.slo.label, []plot.Thumbnailer{l}})
	}
	for _, k := range spec.knees {
		l, err := plotter.NewLine(plotter.XYs{{X: k.x, Y: p.Y.Min}, {X: k.x, Y: p.Y.Max}})
		if err != nil {
			return nil, err
		}
		l.Color, l.Width, l.Dashes = k.color, vg.Points(1.5), []vg.Length{vg.Points(1), vg.Points(3)}
		p.Add(l)
		if k.label != "" {
			legend = append(legend, legendEntry{k.label, []plot.Thumbnailer{l}})
		}
	}
	return legend, nil
}

// barSpec is one panel of grouped bars: one bar per series in each
// group, with whiskers, failed values as marks, and a reference line.
type barSpec struct {
	title, ylabel string
	groups        []string
	series        []series
	ref           *hline
}

// barPanel draws spec (linear y from zero); nil when no value is valid.
func barPanel(spec barSpec) (*plot.Plot, []legendEntry, error) {
	var ref []float64
	if spec.ref != nil {
		ref = append(ref, spec.ref.y)
	}
	_, hi, any := yRange(spec.series, false, ref...)
	if !any {
		return nil, nil, nil
	}
	p := plot.New()
	p.Title.Text = spec.title
	p.Title.TextStyle.Font.Size = vg.Points(11)
	p.Y.Label.Text = spec.ylabel
	grid := plotter.NewGrid()
	grid.Vertical.Color = nil // no lines through the bars
	p.Add(grid)
	n := float64(len(spec.series))
	w := 0.8 / n
	dx := func(k int) float64 { return (float64(k) - (n-1)/2) * w }
	p.Y.Tick.Marker = plainTicks{}
	p.Y.Min, p.Y.Max = 0, hi*1.15
	var legend []legendEntry
	for k, s := range spec.series {
		b := bars{pts: s.pts, color: s.color, dx: dx(k), w: w * 0.9}
		p.Add(b, whiskers{pts: s.pts, color: color.Black, dx: dx(k)})
		legend = append(legend, legendEntry{s.label, []plot.Thumbnailer{b}})
	}
	if spec.ref != nil {
		l, err := plotter.NewLine(plotter.XYs{{X: -0.5, Y: spec.ref.y}, {X: float64(len(spec.groups)) - 0.5, Y: spec.ref.y}})
		if err != nil {
			return nil, nil, err
		}
		l.Color, l.Width, l.Dashes = sloColor, vg.Points(1), []vg.Length{vg.Points(2), vg.Points(2)}
		p.Add(l)
		legend = append(legend, legendEntry{spec.ref.label, []plot.Thumbnailer{l}})
	}
	p.NominalX(spec.groups...)
	p.X.Min, p.X.Max = -0.5, float64(len(spec.groups))-0.5
	if err := failMarks(p, spec.series, false, dx); err != nil {
		return nil, nil, err
	}
	return p, legend, nil
}

// panelGrid is how a chart lays its panels out: rows × cols of them,
// the whole height tall.
type panelGrid struct {
	rows, cols int
	height     vg.Length
}

// renderPanels draws plots into a frame with title and legend, laid out
// as g, and saves it to path.
func renderPanels(title string, legend []legendEntry, plots []*plot.Plot, g panelGrid, path string) error {
	rows, cols, height := g.rows, g.cols, g.height
	f := newFrameSized(title, legend, chartWidth, height)
	grid := make([][]*plot.Plot, rows)
	for r := range rows {
		grid[r] = make([]*plot.Plot, cols)
		for c := range cols {
			if i := r*cols + c; i < len(plots) {
				grid[r][c] = plots[i]
			}
		}
	}
	tiles := draw.Tiles{Rows: rows, Cols: cols, PadX: vg.Points(14), PadY: vg.Points(10)}
	canvases := plot.Align(grid, tiles, f.body)
	for r := range rows {
		for c := range cols {
			if grid[r][c] != nil {
				grid[r][c].Draw(canvases[r][c])
			}
		}
	}
	return f.save(path)
}

// agg is the median, min and max of vs; ok false when vs is empty.
func agg(vs []float64) (xy, bool) {
	if len(vs) == 0 {
		return xy{}, false
	}
	s := append([]float64(nil), vs...)
	sort.Float64s(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return xy{y: m, lo: s[0], hi: s[len(s)-1]}, true
}

// panelSet gathers a chart's panels and one legend for them all (each
// label once, in the order first seen).
type panelSet struct {
	plots  []*plot.Plot
	legend []legendEntry
}

// add keeps panel p (nil: nothing to draw, skipped) and its legend's new
// labels.
func (s *panelSet) add(p *plot.Plot, lg []legendEntry) {
	if p == nil {
		return
	}
	s.plots = append(s.plots, p)
	for _, e := range lg {
		if !slices.ContainsFunc(s.legend, func(o legendEntry) bool { return o.label == e.label }) {
			s.legend = append(s.legend, e)
		}
	}
}
