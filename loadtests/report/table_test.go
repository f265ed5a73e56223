package report

import (
	"strings"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
)

// TestNumNeverRoundsAMeasuredValueToZero: a small valid figure (a ratio
// of 2.30 ms to 1232 ms) keeps two significant digits instead of printing
// as 0.00, and zero stays 0.
func TestNumNeverRoundsAMeasuredValueToZero(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		v    float64
		want string
	}{
		{0, "0"}, {2.30 / 1232, "0.0019"}, {0.05, "0.050"}, {-0.004, "-0.0040"}, {0.25, "0.25"},
		{3.14159, "3.14"}, {17.64, "17.6"}, {1232.4, "1232"}, {1e-12, "1e-12"}, {0.000012, "0.000012"},
	} {
		if got := num(tc.v); got != tc.want {
			t.Errorf("num(%g) = %q, want %q", tc.v, got, tc.want)
		}
	}
}

// TestTablesTakeAOneSidePoint: a point measured on one side only (a
// Postgres side's second design) prints in Table and Demo with its one
// figure and "(one side)" where the other side would be, and no ratio.
func TestTablesTakeAOneSidePoint(t *testing.T) {
	t.Parallel()
	sides := []string{"no-kafka"}
	p := driver.Point{Scenario: "scaleout.groups", Name: "500/s → 1 group, cursors", Rate: 500, DurationS: 6, Sides: sides,
		Rounds: []driver.Round{{Order: sides, Sides: map[string]*driver.SideResult{
			"no-kafka": {Service: "no-kafka", Metrics: map[driver.Metric]float64{driver.ClientP99: 5.2, driver.ClientErrors: 0}}}}}}
	driver.Summarize(&p)
	run := &driver.Run{Command: "scaleout", Points: []driver.Point{p}, Settings: map[string]any{}}
	var b strings.Builder
	Table(&b, run)
	Demo(&b, run)
	out := b.String()
	if !strings.Contains(out, "5.2") || !strings.Contains(out, oneSide) || strings.Contains(out, "×") {
		t.Errorf("one-side point:\n%s", out)
	}
}
