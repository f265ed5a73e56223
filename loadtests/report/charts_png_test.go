package report

import (
	"context"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
)

// rsvg finds rsvg-convert (Debian package librsvg2-bin, which `make
// deps` installs) or skips the test.
func rsvg(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("rsvg-convert")
	if err != nil {
		t.Skip("rsvg-convert not found (Debian package librsvg2-bin, installed by `make deps`): the charts are not rendered to PNG")
	}
	return path
}

// renderPNG renders the SVG at svg with rsvg-convert and decodes it.
func renderPNG(t *testing.T, bin, svg string) image.Image {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out := filepath.Join(t.TempDir(), filepath.Base(svg)+".png")
	if b, err := exec.CommandContext(ctx, bin, "-f", "png", "-o", out, svg).CombinedOutput(); err != nil {
		t.Fatalf("rsvg-convert %s: %v: %s", svg, err, b)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	return img
}

var svgSizeRE = regexp.MustCompile(`<svg[^>]*\bwidth="([0-9.]+)pt"[^>]*\bheight="([0-9.]+)pt"`)

// svgSizePx is the SVG's declared size in pixels at librsvg's 96 dpi.
func svgSizePx(t *testing.T, path string) (w, h float64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := svgSizeRE.FindSubmatch(b)
	if m == nil {
		t.Fatalf("%s: no width and height in pt", path)
	}
	w, _ = strconv.ParseFloat(string(m[1]), 64)
	h, _ = strconv.ParseFloat(string(m[2]), 64)
	return w * 96 / 72, h * 96 / 72
}

// ink is a pixel's darkness, 0 (white or transparent) to 1 (black,
// opaque): what a reader sees on a white page.
func ink(c color.Color) float64 {
	r, g, b, a := c.RGBA() // premultiplied: a transparent pixel is 0, 0, 0, 0
	white := 0xffff - a    // the page shows through
	lum := (0.299*float64(r+white) + 0.587*float64(g+white) + 0.114*float64(b+white)) / 0xffff
	return 1 - lum
}

// pngProblems checks a rendered chart: its size is the SVG's, it is not
// blank (the darkness of its pixels varies and enough of them are
// drawn), and nothing is drawn on its outermost pixels (a label cut off
// at the canvas' edge leaves ink there).
func pngProblems(img image.Image, wantW, wantH float64) []string {
	var out []string
	b := img.Bounds()
	if math.Abs(float64(b.Dx())-wantW) > 2 || math.Abs(float64(b.Dy())-wantH) > 2 {
		out = append(out, "size "+strconv.Itoa(b.Dx())+"×"+strconv.Itoa(b.Dy())+", want the SVG's "+strconv.Itoa(int(wantW))+"×"+strconv.Itoa(int(wantH)))
	}
	if b.Dx() < 400 || b.Dy() < 200 {
		out = append(out, "smaller than 400×200 px: unreadable")
	}
	var sum, sum2 float64
	drawn, edge := 0, 0
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			v := ink(img.At(x, y))
			sum, sum2 = sum+v, sum2+v*v
			if v > 0.2 {
				drawn++
				if x == b.Min.X || y == b.Min.Y || x == b.Max.X-1 || y == b.Max.Y-1 {
					edge++
				}
			}
		}
	}
	n := float64(b.Dx() * b.Dy())
	if sd := math.Sqrt(sum2/n - (sum/n)*(sum/n)); sd < 0.05 {
		out = append(out, "blank: the pixels' darkness varies by "+strconv.FormatFloat(sd, 'f', 3, 64))
	}
	if float64(drawn) < 0.01*n {
		out = append(out, "blank: "+strconv.Itoa(drawn)+" pixels drawn")
	}
	if edge > 0 {
		out = append(out, strconv.Itoa(edge)+" pixels drawn on the canvas' edge: something runs off it")
	}
	return out
}

// TestChartsRenderToPNG renders every chart of every input set with
// librsvg and checks the picture.
func TestChartsRenderToPNG(t *testing.T) {
	bin := rsvg(t)
	drawChartSets(t, func(t *testing.T, _ chartInputs, charts map[string]string) {
		for k, path := range charts {
			w, h := svgSizePx(t, path)
			for _, p := range pngProblems(renderPNG(t, bin, path), w, h) {
				t.Errorf("%s: %s", k, p)
			}
		}
	})
}

// TestPNGProblemsCatchesBlankAndCutOff checks the checker: a blank
// canvas and ink on the edge are reported, a drawn chart is not.
func TestPNGProblemsCatchesBlankAndCutOff(t *testing.T) {
	blank := image.NewRGBA(image.Rect(0, 0, 600, 300))
	if got := pngProblems(blank, 600, 300); len(got) != 2 {
		t.Errorf("blank canvas: %q, want the two blank problems", got)
	}
	drawn := image.NewRGBA(image.Rect(0, 0, 600, 300))
	for y := 50; y < 250; y++ {
		for x := 50; x < 550; x += 3 {
			drawn.Set(x, y, color.Black)
		}
	}
	if got := pngProblems(drawn, 600, 300); len(got) != 0 {
		t.Errorf("drawn canvas: %q, want none", got)
	}
	drawn.Set(599, 10, color.Black)
	if got := pngProblems(drawn, 640, 300); len(got) != 2 {
		t.Errorf("ink on the edge and a wrong size: %q, want both", got)
	}
}

// colorPixels counts the opaque pixels within 12 of c on every channel,
// above the bottom legend rows (which show every series' colour).
func colorPixels(img image.Image, c color.Color, legendPx int) int {
	cr, cg, cb, _ := c.RGBA()
	near := func(a, b uint32) bool { return math.Abs(float64(a>>8)-float64(b>>8)) <= 12 }
	n := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y-legendPx; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, a := img.At(x, y).RGBA()
			if a>>8 > 240 && near(r, cr) && near(g, cg) && near(bl, cb) {
				n++
			}
		}
	}
	return n
}

// TestChartsDrawNothingFromAMissingValue renders a line panel and a bar
// panel where one series has values and the other has none (every value
// failed or not recorded) and counts, on the PNG, the pixels of each
// series' colour outside the legend: the valid series must show, the
// failed one only as its marks, which are drawn in a darker shade.
func TestChartsDrawNothingFromAMissingValue(t *testing.T) {
	bin := rsvg(t)
	ok := series{label: "valid", color: palette[0]}
	bad := series{label: "missing", color: palette[1]}
	for i, v := range []float64{10, 100, 1000} {
		ok.pts = append(ok.pts, xy{x: v, y: v * 2, lo: v, hi: v * 3})
		why := failedMark
		if i == 1 {
			why = notRecorded
		}
		// y holds a value on purpose: a failed value's number must not be drawn.
		bad.pts = append(bad.pts, xy{x: v, y: v * 5, lo: v, hi: v * 9, failed: why})
	}
	dir := t.TempDir()
	lp, legend, err := linePanel(lineSpec{title: "line", xlabel: "x", ylabel: "y", logX: true, logY: true, series: []series{ok, bad}, slo: &hline{y: 50, label: "SLO"}})
	if err != nil || lp == nil {
		t.Fatalf("line panel: %v", err)
	}
	bok, bbad := ok, bad
	bok.pts, bbad.pts = append([]xy(nil), bok.pts...), append([]xy(nil), bbad.pts...)
	for i := range bok.pts {
		bok.pts[i].x, bbad.pts[i].x = float64(i), float64(i)
	}
	bp, blegend, err := barPanel(barSpec{title: "bars", ylabel: "y", groups: []string{"a", "b", "c"}, series: []series{bok, bbad}})
	if err != nil || bp == nil {
		t.Fatalf("bar panel: %v", err)
	}
	legendPx := int(math.Ceil((legendSize*2.5 + 4) * 96 / 72))
	for name, c := range map[string]struct {
		p      *plot.Plot
		legend []legendEntry
	}{"line": {lp, legend}, "bar": {bp, blegend}} {
		path := filepath.Join(dir, name+".svg")
		if err := renderPanels(name, c.legend, []*plot.Plot{c.p}, panelGrid{rows: 1, cols: 1, height: 9 * vg.Centimeter}, path); err != nil {
			t.Fatal(err)
		}
		img := renderPNG(t, bin, path)
		if n := colorPixels(img, ok.color, legendPx); n < 20 {
			t.Errorf("%s: %d pixels of the valid series' colour: its values are not drawn", name, n)
		}
		if n := colorPixels(img, bad.color, legendPx); n > 0 {
			t.Errorf("%s: %d pixels of the missing series' colour outside the legend: a missing value is drawn", name, n)
		}
		for _, p := range textProblems(t, path) {
			t.Errorf("%s: %s", name, p)
		}
	}
}
