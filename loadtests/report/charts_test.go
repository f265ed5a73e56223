package report

import (
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/eventstore"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/raw"
)

// chartInputs are one set of inputs of Charts.
type chartInputs struct {
	runs []*driver.Run
	es   eventstore.Results
	src  Sources
	// want are keys Charts must return for these inputs.
	want []string
}

// chartSets are the inputs the charts tests draw: the synthetic
// fixture, the fixture with failed points, and the committed results.
func chartSets(t *testing.T) map[string]chartInputs {
	t.Helper()
	_, es := fixtureInputs(t)
	failedRuns, failedES := failedFixture()
	sets := map[string]chartInputs{
		"fixture": {runs: append(fixture(), throughputFixture(), scaleOutFixture()), es: es, src: Sources{Raw: notifyFixture()},
			want: []string{"queue", "log", "documents", "ceilings", "queue-rate", "toast", "staleness", "throughput", "cpu", "notify", "eventstore",
				"queue-card", "log-card", "documents-card", "eventstore-card", "cache-card", "scaleout"}},
		"failed fixture": {runs: failedRuns, es: failedES, want: []string{"queue", "documents", "eventstore"}},
	}
	root := filepath.Join("..", "..", "results")
	if runs := readRuns(t, root, "cache", "throughput", "scaleout"); len(runs) > 0 {
		es, err := eventstore.Load(root)
		if err != nil {
			t.Fatal(err)
		}
		rr, err := raw.Load(root)
		if err != nil {
			t.Fatal(err)
		}
		sets["committed results"] = chartInputs{runs: runs, es: es, src: Sources{Raw: rr}, want: []string{
			"queue", "log", "documents", "ceilings", "queue-rate", "log-rate", "toast", "staleness", "throughput", "cpu", "notify", "eventstore",
			"queue-card", "log-card", "documents-card", "eventstore-card", "cache-card", "scaleout"}}
	}
	return sets
}

// TestChartTextFitsAndDoesNotOverlap renders every chart, from the
// synthetic fixtures and from the committed results files, and fails when
// a text's box (estimated from its position, font size, anchor and
// length, transforms applied) leaves the canvas or overlaps another
// text's box: a title running off the canvas, a legend over the tick
// labels, tick labels running into each other.
func TestChartTextFitsAndDoesNotOverlap(t *testing.T) {
	drawChartSets(t, func(t *testing.T, in chartInputs, charts map[string]string) {
		for _, k := range in.want {
			if _, ok := charts[k]; !ok {
				t.Errorf("no %s chart; got %v", k, charts)
			}
		}
		for k, path := range charts {
			for _, p := range textProblems(t, path) {
				t.Errorf("%s: %s", k, p)
			}
		}
	})
}

// drawChartSets draws every chart of every input set of chartSets into a
// directory of the set's subtest and calls check there with the set and
// the charts drawn, by key, each with the path of its file.
func drawChartSets(t *testing.T, check func(t *testing.T, in chartInputs, charts map[string]string)) {
	for name, in := range chartSets(t) {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			charts, err := Charts(withES(in.runs, in.es), in.src, dir)
			if err != nil {
				t.Fatal(err)
			}
			paths := map[string]string{}
			for k, f := range charts {
				paths[k] = filepath.Join(dir, f)
			}
			check(t, in, paths)
		})
	}
}

// TestTextProblemsCatchesOverflowAndOverlap checks the checker on a
// hand-written SVG: a title wider than the canvas, two overlapping
// labels, a rotated label inside the canvas and one pushed out of it.
func TestTextProblemsCatchesOverflowAndOverlap(t *testing.T) {
	svg := `<svg width="200pt" height="100pt" viewBox="0 0 200 100">
<g transform="scale(1, -1) translate(0, -100)">
<text x="10" y="-90" transform="scale(1, -1)" style="font-size:12px">a title far too long for this small canvas</text>
<text x="20" y="-40" transform="scale(1, -1)" style="font-size:10px">left</text>
<text x="30" y="-42" transform="scale(1, -1)" style="font-size:10px">right</text>
<text x="150" y="-10" transform="scale(1, -1)" style="font-size:10px">alone</text>
<g transform="rotate(90)"><text x="30" y="9" transform="scale(1, -1)" style="font-size:10px">rotated</text></g>
<g transform="rotate(90)"><text x="30" y="-195" transform="scale(1, -1)" style="font-size:10px">pushed</text></g>
</g></svg>`
	path := filepath.Join(t.TempDir(), "c.svg")
	if err := os.WriteFile(path, []byte(svg), 0o644); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(textProblems(t, path), "\n")
	wantContains(t, "problems", got, `"a title far too long for this small canvas" leaves the canvas`, `"left" overlaps "right"`, `"pushed" leaves the canvas`)
	for _, ok := range []string{`"alone"`, `"rotated"`} {
		if strings.Contains(got, ok) {
			t.Errorf("%s reported, but it fits:\n%s", ok, got)
		}
	}
}

// affine is the 2D transform [a c e; b d f].
type affine struct{ a, b, c, d, e, f float64 }

var identity = affine{a: 1, d: 1}

// then returns the transform applying o first, then m (SVG nesting: the
// outer group's transform is m).
func (m affine) then(o affine) affine {
	return affine{
		a: m.a*o.a + m.c*o.b, b: m.b*o.a + m.d*o.b,
		c: m.a*o.c + m.c*o.d, d: m.b*o.c + m.d*o.d,
		e: m.a*o.e + m.c*o.f + m.e, f: m.b*o.e + m.d*o.f + m.f,
	}
}

func (m affine) apply(x, y float64) (float64, float64) {
	return m.a*x + m.c*y + m.e, m.b*x + m.d*y + m.f
}

var transformRE = regexp.MustCompile(`(\w+)\(([^)]*)\)`)

// parseTransform reads an SVG transform list (translate, scale, rotate,
// matrix).
func parseTransform(t testing.TB, s string) affine {
	t.Helper()
	m := identity
	for _, g := range transformRE.FindAllStringSubmatch(s, -1) {
		var v []float64
		for f := range strings.FieldsFuncSeq(g[2], func(r rune) bool { return r == ',' || r == ' ' }) {
			x, err := strconv.ParseFloat(f, 64)
			if err != nil {
				t.Fatalf("transform %q: %v", s, err)
			}
			v = append(v, x)
		}
		arg := func(i int, d float64) float64 {
			if i < len(v) {
				return v[i]
			}
			return d
		}
		var o affine
		switch g[1] {
		case "translate":
			o = affine{a: 1, d: 1, e: arg(0, 0), f: arg(1, 0)}
		case "scale":
			o = affine{a: arg(0, 1), d: arg(1, arg(0, 1))}
		case "rotate":
			if len(v) > 1 {
				t.Fatalf("rotate about a point is not handled: %q", s)
			}
			r := arg(0, 0) * math.Pi / 180
			o = affine{a: math.Cos(r), b: math.Sin(r), c: -math.Sin(r), d: math.Cos(r)}
		case "matrix":
			o = affine{arg(0, 1), arg(1, 0), arg(2, 0), arg(3, 1), arg(4, 0), arg(5, 0)}
		default:
			t.Fatalf("transform %q not handled", g[1])
		}
		m = m.then(o)
	}
	return m
}

// box is a text's extent on the canvas.
type box struct {
	text           string
	x0, y0, x1, y1 float64
}

var fontSizeRE = regexp.MustCompile(`font-size:\s*([0-9.]+)`)
var anchorRE = regexp.MustCompile(`text-anchor:\s*(\w+)`)

// textBoxes reads every <text> of an SVG file and returns its box on the
// canvas, and the canvas's width and height (from the viewBox).
func textBoxes(t testing.TB, path string) (boxes []box, w, h float64) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := xml.NewDecoder(f)
	stack := []affine{identity}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			attr := map[string]string{}
			for _, a := range el.Attr {
				attr[a.Name.Local] = a.Value
			}
			m := stack[len(stack)-1].then(parseTransform(t, attr["transform"]))
			stack = append(stack, m)
			switch el.Name.Local {
			case "svg":
				vb := strings.Fields(attr["viewBox"])
				if len(vb) != 4 {
					t.Fatalf("%s: viewBox %q", path, attr["viewBox"])
				}
				w, _ = strconv.ParseFloat(vb[2], 64)
				h, _ = strconv.ParseFloat(vb[3], 64)
			case "text":
				var s string
				if err := dec.DecodeElement(&s, &el); err != nil {
					t.Fatal(err)
				}
				stack = stack[:len(stack)-1]
				boxes = append(boxes, textBox(t, s, attr, m))
			}
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		}
	}
	return boxes, w, h
}

// textBox estimates one text's box: charWidth per character (the
// advance the charts' layout reserves), 0.8 of the
// font size above the baseline and 0.25 below, moved by the anchor and
// mapped through m.
func textBox(t testing.TB, s string, attr map[string]string, m affine) box {
	t.Helper()
	x, _ := strconv.ParseFloat(attr["x"], 64)
	y, _ := strconv.ParseFloat(attr["y"], 64)
	style := attr["style"]
	fs := 12.0
	if g := fontSizeRE.FindStringSubmatch(style + ";font-size:" + attr["font-size"]); g != nil {
		fs, _ = strconv.ParseFloat(g[1], 64)
	}
	anchor := attr["text-anchor"]
	if g := anchorRE.FindStringSubmatch(style); g != nil {
		anchor = g[1]
	}
	wd := charWidth * fs * float64(utf8.RuneCountInString(s))
	left := x
	switch anchor {
	case "middle":
		left -= wd / 2
	case "end":
		left -= wd
	}
	b := box{text: s, x0: math.Inf(1), y0: math.Inf(1), x1: math.Inf(-1), y1: math.Inf(-1)}
	for _, c := range [][2]float64{{left, y - 0.8*fs}, {left + wd, y - 0.8*fs}, {left, y + 0.25*fs}, {left + wd, y + 0.25*fs}} {
		px, py := m.apply(c[0], c[1])
		b.x0, b.x1 = min(b.x0, px), max(b.x1, px)
		b.y0, b.y1 = min(b.y0, py), max(b.y1, py)
	}
	return b
}

// textProblems returns every text of the SVG at path that leaves the
// canvas or overlaps another.
func textProblems(t testing.TB, path string) []string {
	t.Helper()
	boxes, w, h := textBoxes(t, path)
	if len(boxes) == 0 {
		t.Fatalf("%s: no text", path)
	}
	const slack = 0.5 // points: rounding in the SVG's coordinates
	var out []string
	for i, b := range boxes {
		if strings.TrimSpace(b.text) == "" {
			continue
		}
		if b.x0 < -slack || b.y0 < -slack || b.x1 > w+slack || b.y1 > h+slack {
			out = append(out, fmt.Sprintf("%q leaves the canvas (%.0f,%.0f)–(%.0f,%.0f) of %.0f×%.0f", b.text, b.x0, b.y0, b.x1, b.y1, w, h))
		}
		for _, o := range boxes[i+1:] {
			if strings.TrimSpace(o.text) == "" {
				continue
			}
			if min(b.x1, o.x1)-max(b.x0, o.x0) > slack && min(b.y1, o.y1)-max(b.y0, o.y0) > slack {
				out = append(out, fmt.Sprintf("%q overlaps %q", b.text, o.text))
			}
		}
	}
	return out
}
