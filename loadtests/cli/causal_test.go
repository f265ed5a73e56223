package cli

import (
	"strings"
	"testing"
)

// TestCausalCommandLine: `eventstore causal -h` prints its flags and
// exits 0, a bad flag or a setting that cannot run exits 2, all without
// starting anything.
func TestCausalCommandLine(t *testing.T) {
	t.Parallel()
	var out, errOut strings.Builder
	if code := Run([]string{"eventstore", causalScenario, "-h"}, &out, &errOut); code != 0 || !strings.Contains(out.String()+errOut.String(), "\n  -causal-max") {
		t.Errorf("eventstore causal -h: exit %d, output %q", code, out.String()+errOut.String())
	}
	for _, args := range [][]string{{"-no-such-flag"}, {"-causal-max", "10"}, {"-causal-streams", "20000"}, {"-causal-sizes", "x"}} {
		out.Reset()
		errOut.Reset()
		if code := Run(append([]string{"eventstore", causalScenario}, args...), &out, &errOut); code != 2 {
			t.Errorf("eventstore causal %v: exit %d, want 2 (%s)", args, code, errOut.String())
		}
	}
}
