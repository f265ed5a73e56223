package report

import (
	"image/color"
	"slices"
	"strings"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/experiments"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// failoverFile is the failover chart's file name in the charts directory.
const failoverFile = "failover.svg"

// failoverPanels are the failover chart's panels: the pairs with
// failover experiments, with their titles.
var failoverPanels = []struct{ pair, title string }{
	{pairs.Queue, "queue: writes back after the fault"},
	{pairs.Log, "log: writes back after the fault"},
}

// failoverChart draws, per pair, when writes came back after each fault
// of the cluster experiments' parts: one group per fault, one bar per
// side. A failed experiment, or writes not back within the run, is a
// mark, never a bar. false when no value is valid.
func failoverChart(parts []experiments.ClusterPart, path string) (bool, error) {
	var set panelSet
	colors := map[string]color.Color{}
	for _, pn := range failoverPanels {
		cs := failCasesOf(pn.pair, parts)
		var groups, sides []string
		for _, c := range cs {
			if !slices.Contains(groups, c.label) {
				groups = append(groups, c.label)
			}
			if !slices.Contains(sides, c.side) {
				sides = append(sides, c.side)
			}
		}
		var ss []series
		for _, side := range sides {
			s := series{label: side, color: failoverColor(colors, side)}
			for x, g := range groups {
				var runs []failCase
				for _, c := range cs {
					if c.side == side && c.label == g {
						runs = append(runs, c)
					}
				}
				if len(runs) > 0 {
					s.pts = append(s.pts, failXY(runs, x))
				}
			}
			ss = append(ss, s)
		}
		p, lg, err := barPanel(barSpec{title: pn.title, ylabel: "seconds", groups: wrapLabels(groups, 11), series: ss})
		if err != nil {
			return false, err
		}
		set.add(p, lg)
	}
	if len(set.plots) == 0 {
		return false, nil
	}
	return true, renderPanels("failover: the first acknowledged write after the fault (3-node clusters)", set.legend, set.plots, panelGrid{rows: len(set.plots), cols: 1, height: tallChartHeight}, path)
}

// wrapLabels breaks each label into lines of about width characters at
// its spaces, so that the long fault names ("primary killed, synchronous
// standby promoted") do not run into each other under their bars.
func wrapLabels(labels []string, width int) []string {
	out := make([]string, len(labels))
	for i, l := range labels {
		var lines []string
		line := ""
		for _, w := range strings.Fields(l) {
			if line != "" && len(line)+1+len(w) > width {
				lines = append(lines, line)
				line = w
				continue
			}
			if line != "" {
				line += " "
			}
			line += w
		}
		out[i] = strings.Join(append(lines, line), "\n")
	}
	return out
}

// failXY is the bar in group x of one side's runs of a fault: the
// median time until writes came back, its whiskers the fastest and the
// slowest run; or the mark saying why there is none (no run measured, or
// writes came back in none). A run that failed or where writes did not
// come back is left out of the median, and the card says so.
func failXY(runs []failCase, x int) xy {
	var backs []float64
	failed := 0
	for _, c := range runs {
		switch {
		case c.failed != "":
			failed++
		case c.back:
			backs = append(backs, c.backS)
		}
	}
	v := xy{x: float64(x)}
	switch {
	case failed == len(runs):
		v.failed = failedMark
	case len(backs) == 0:
		v.failed = "not back"
	default:
		slices.Sort(backs)
		v.y, v.lo, v.hi = driver.Median(backs), backs[0], backs[len(backs)-1]
	}
	return v
}

// failoverColor is side's colour, the same in every panel: the Postgres
// sides take the palette's even places (the first is the Postgres side's
// colour of every chart), the specialists the odd ones.
func failoverColor(colors map[string]color.Color, side string) color.Color {
	if c, ok := colors[side]; ok {
		return c
	}
	pg := strings.HasPrefix(side, "Postgres")
	n := 0
	for s := range colors {
		if strings.HasPrefix(s, "Postgres") == pg {
			n++
		}
	}
	i := 2 * n
	if !pg {
		i++
	}
	colors[side] = palette[i%len(palette)]
	return colors[side]
}
