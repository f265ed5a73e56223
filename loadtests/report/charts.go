package report

import (
	"fmt"
	"image/color"
	"path/filepath"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
)

var sideColors = []color.Color{color.RGBA{R: 0x33, G: 0x66, B: 0xcc, A: 0xff}, color.RGBA{R: 0xdd, G: 0x66, B: 0x22, A: 0xff}}

// series is one line: a metric of one side over the points' rates.
type series struct {
	side, metric, label string
	dashed              bool
	color               int
}

// latencyChart draws median latencies per rate, one line per side and
// metric, with the min–max of the rounds as error bars omitted for
// legibility (the tables give them).
func latencyChart(run *driver.Run, scenario, title string, ss []series, path string) (bool, error) {
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
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "arrival rate (per second)"
	p.Y.Label.Text = "milliseconds (median of rounds)"
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	drawn := false
	for _, s := range ss {
		var xys plotter.XYs
		for _, pt := range pts {
			if v, ok := median(pt, s.metric, s.side); ok {
				xys = append(xys, plotter.XY{X: pt.Rate, Y: v})
			}
		}
		if len(xys) == 0 {
			continue
		}
		l, sc, err := plotter.NewLinePoints(xys)
		if err != nil {
			return false, err
		}
		l.Color, sc.Color = sideColors[s.color], sideColors[s.color]
		if s.dashed {
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
			sc.Shape = draw.BoxGlyph{}
		}
		p.Add(l, sc)
		p.Legend.Add(SideLabel(run, s.side)+" "+s.label, l, sc)
		drawn = true
	}
	if !drawn {
		return false, nil
	}
	return true, p.Save(16*vg.Centimeter, 10*vg.Centimeter, path)
}

// bar is one bar group entry.
type bar struct {
	group string
	vals  [2]float64
}

// barChart draws grouped bars, one bar per side in each group.
func barChart(title, ylabel string, sides [2]string, bars []bar, path string) (bool, error) {
	if len(bars) == 0 {
		return false, nil
	}
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = ylabel
	p.Legend.Top = true
	w := vg.Points(18)
	var names []string
	for _, b := range bars {
		names = append(names, b.group)
	}
	for i := range 2 {
		var vs plotter.Values
		for _, b := range bars {
			vs = append(vs, b.vals[i])
		}
		bc, err := plotter.NewBarChart(vs, w)
		if err != nil {
			return false, err
		}
		bc.Color = sideColors[i]
		bc.LineStyle.Width = 0
		bc.Offset = vg.Length(float64(i)-0.5) * w
		p.Add(bc)
		p.Legend.Add(sides[i], bc)
	}
	p.NominalX(names...)
	return true, p.Save(16*vg.Centimeter, 10*vg.Centimeter, path)
}

// Charts draws the SVG charts of the runs into dir and returns their
// file names by key (queue, log, ceilings, documents).
func Charts(all []*driver.Run, dir string) (map[string]string, error) {
	out := map[string]string{}
	for _, run := range all {
		switch run.Command {
		case "queue":
			ok, err := latencyChart(run, "queue.rate", "queue: send→processed and delivery p99 per rate", []series{
				{"no-rabbitmq", "server.processing.p99_ms", "send→processed p99", false, 0},
				{"rabbitmq", "server.processing.p99_ms", "send→processed p99", false, 1},
				{"no-rabbitmq", "server.delivery.p99_ms", "delivery p99", true, 0},
				{"rabbitmq", "server.delivery.p99_ms", "delivery p99", true, 1},
			}, filepath.Join(dir, "queue-latency.svg"))
			if err != nil {
				return nil, err
			}
			if ok {
				out["queue"] = "queue-latency.svg"
			}
		case "log":
			ok, err := latencyChart(run, "log.rate", "log: delivery p95 and write p99 per rate", []series{
				{"no-kafka", "server.delivery.p95_ms", "delivery p95", false, 0},
				{"kafka", "server.delivery.p95_ms", "delivery p95", false, 1},
				{"no-kafka", "server.write.p99_ms", "write p99", true, 0},
				{"kafka", "server.write.p99_ms", "write p99", true, 1},
			}, filepath.Join(dir, "log-latency.svg"))
			if err != nil {
				return nil, err
			}
			if ok {
				out["log"] = "log-latency.svg"
			}
		case "documents":
			var bars []bar
			for i := range run.Points {
				p := &run.Points[i]
				if p.Scenario != "documents.rewrite" {
					continue
				}
				a, _ := median(p, "cost_ratio.p50", p.Sides[0])
				b, _ := median(p, "cost_ratio.p50", p.Sides[1])
				bars = append(bars, bar{p.Name, [2]float64{a, b}})
			}
			ok, err := barChart("documents: rewrite ÷ neighbour patch (p50)", "cost ratio (×)",
				[2]string{SideLabel(run, "no-mongodb"), SideLabel(run, "mongodb")}, bars, filepath.Join(dir, "documents-cost-ratio.svg"))
			if err != nil {
				return nil, err
			}
			if ok {
				out["documents"] = "documents-cost-ratio.svg"
			}
		}
	}
	// Ceilings of every pair in one chart.
	var bars []bar
	for _, run := range all {
		if len(run.Ceilings) < 2 {
			continue
		}
		var v [2]float64
		for _, c := range run.Ceilings {
			if c.Service == "no-rabbitmq" || c.Service == "no-kafka" {
				v[0] = c.Rate.Median
			} else {
				v[1] = c.Rate.Median
			}
		}
		bars = append(bars, bar{run.Command, v})
	}
	ok, err := barChart("ceilings: highest rate with a flat backlog and p99 under the limit", "per second (median of rounds)",
		[2]string{"Postgres side", "RabbitMQ / Kafka side"}, bars, filepath.Join(dir, "ceilings.svg"))
	if err != nil {
		return nil, fmt.Errorf("ceilings chart: %w", err)
	}
	if ok {
		out["ceilings"] = "ceilings.svg"
	}
	return out, nil
}
