package report

import (
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/scenario"
)

// scaleOutFile is the scale-out run's chart: its figures against the
// number of readers (subscribers, groups).
const scaleOutFile = "scaleout.svg"

// scaleOutPanel is one panel of the scale-out chart: a metric of the
// points of scenario against their number of readers.
type scaleOutPanel struct {
	scenario      driver.ScenarioName
	metric        driver.Metric
	title, xlabel string
	ylabel        string
	// scale multiplies every value (bytes to MB).
	scale float64
}

// scaleOutPanels are the chart's panels, in its order: what a reader
// costs and what each side keeps serving as readers are added.
var scaleOutPanels = []scaleOutPanel{
	{scenario.ScaleOutFanoutSustain, scenario.MetricSustainable, "fan-out: sustainable rate", "subscribers", "published tasks/s", 1},
	{scenario.ScaleOutFanout, scenario.MetricFanoutWAL, "fan-out: WAL per task", "subscribers", "Postgres WAL bytes", 1},
	{scenario.ScaleOutGroups, scenario.MetricGroupDelivered, "groups: rate per group", "groups", "events/s", 1},
	{scenario.ScaleOutGroups, scenario.MetricGroupsSlotBytes, "groups: slot WAL", "groups", "MB", 1e-6},
}

// readersRE finds a point's number of readers in its name ("200/s → 8
// subscribers", "1 subscriber", "500/s → 4 groups").
var readersRE = regexp.MustCompile(`(\d+) (?:subscribers?|groups?)\b`)

// readersOf is the number of readers of p, from its name (0: none).
func readersOf(p *driver.Point) float64 {
	m := readersRE.FindStringSubmatch(p.Name)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return float64(n)
}

// scaleOutChart draws the scale-out run's panels (scaleOutPanels), one
// line per side and design (a second design's points are named
// "<point>, <design>"), both axes logarithmic; a side whose point failed
// is marked, never drawn.
func scaleOutChart(r *driver.Run, path string) (bool, error) {
	var set panelSet
	// One colour per side and design across the panels, so that one
	// legend serves them all.
	colors := map[string]int{}
	for _, pn := range scaleOutPanels {
		var labels []string
		bySeries := map[string]*series{}
		for i := range r.Points {
			p := &r.Points[i]
			n := readersOf(p)
			if p.Scenario != pn.scenario || n <= 0 {
				continue
			}
			_, design, _ := strings.Cut(p.Name, ", ")
			for _, side := range p.Sides {
				label := SideLabel(r, side)
				if design != "" {
					label += ", " + design
				}
				s, ok := bySeries[label]
				if !ok {
					if !recorded([]*driver.Point{p}, pn.metric, side) && p.SideStatus(side).OK() {
						continue // a metric the side does not have (Kafka's slots)
					}
					labels = append(labels, label)
					s = &series{label: label}
					bySeries[label] = s
				}
				v := sideXY(p, pn.metric, side, n)
				v.y, v.lo, v.hi = v.y*pn.scale, v.lo*pn.scale, v.hi*pn.scale
				s.pts = append(s.pts, v)
			}
		}
		var ss []series
		for _, label := range labels {
			s := *bySeries[label]
			if _, ok := colors[label]; !ok {
				colors[label] = len(colors)
			}
			s.color = palette[colors[label]%len(palette)]
			s.dashed = strings.Contains(label, ", ")
			slices.SortFunc(s.pts, func(a, b xy) int { return int(a.x - b.x) })
			ss = append(ss, s)
		}
		p, lg, err := linePanel(lineSpec{title: pn.title, xlabel: pn.xlabel, ylabel: pn.ylabel, logX: true, logY: true, series: ss,
			xticks: readerTicks(ss)})
		if err != nil {
			return false, err
		}
		set.add(p, lg)
	}
	if len(set.plots) == 0 {
		return false, nil
	}
	rows := (len(set.plots) + 1) / 2
	return true, renderPanels("scale-out: against the number of readers (log scales)", set.legend, set.plots, panelGrid{rows: rows, cols: min(len(set.plots), 2), height: tallChartHeight}, path)
}

// readerTicks labels each number of readers the series have.
func readerTicks(ss []series) []plot.Tick {
	var xs []float64
	for _, s := range ss {
		for _, v := range s.pts {
			if !slices.Contains(xs, v.x) {
				xs = append(xs, v.x)
			}
		}
	}
	slices.Sort(xs)
	ticks := make([]plot.Tick, 0, len(xs))
	for _, x := range xs {
		ticks = append(ticks, plot.Tick{Value: x, Label: num(x)})
	}
	return ticks
}
