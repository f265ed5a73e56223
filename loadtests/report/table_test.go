package report

import "testing"

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
