package kittest

import "testing"

// RunParallel runs a suite's table of tests, each a parallel subtest of t
// named Name, in order, calling run with the subtest and its Fn (F is the
// suite's test function type). It takes a *testing.T, not a testing.TB,
// because only a T has subtests.
func RunParallel[F any](t *testing.T, tests []struct {
	Name string
	Fn   F
}, run func(t *testing.T, fn F)) {
	t.Helper()
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			t.Parallel()
			run(t, tc.Fn)
		})
	}
}
