package cli

import (
	"flag"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/scenario"
)

// parseThroughput parses args as cmd's flags: the common ones at the
// throughput scenario's defaults, then the throughput ones, into the
// options of a repository at /repo.
func parseThroughput(t testing.TB, cmd string, args ...string) (scenario.ThroughputOptions, error) {
	t.Helper()
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var c common
	c.register(fs, scenario.ThroughputDefaults.Rounds, scenario.ThroughputDefaults.Duration)
	tf := registerThroughput(fs, cmd)
	if err := fs.Parse(args); err != nil {
		return scenario.ThroughputOptions{}, err
	}
	return tf.options(c, "/repo")
}

// TestThroughputFlags parses the throughput flags of both commands: the
// defaults are the declared scenario's, the throughput command takes
// -duration and -rounds, results its own -throughput-* flags, and bad
// sizes or senders are refused.
func TestThroughputFlags(t *testing.T) {
	d := scenario.ThroughputDefaults
	t.Setenv("STACK_DIR", "")
	o, err := parseThroughput(t, "throughput")
	if err != nil || !slices.Equal(o.Sizes, d.Sizes) || o.Senders != d.Senders || o.Duration != d.Duration || o.Rounds != d.Rounds || o.Drain != d.Drain {
		t.Errorf("defaults: %+v, %v; want %+v", o, err, d)
	}
	if o.StackDir != filepath.Join("/repo", ".stack") {
		t.Errorf("stack dir %q, want the repository's .stack", o.StackDir)
	}
	t.Setenv("STACK_DIR", "/elsewhere")
	if o, _ = parseThroughput(t, "throughput"); o.StackDir != "/elsewhere" {
		t.Errorf("stack dir %q with STACK_DIR=/elsewhere", o.StackDir)
	}
	o, err = parseThroughput(t, "throughput", "-batch-sizes", "5, 50", "-senders", "8", "-duration", "1s", "-rounds", "3")
	if err != nil || !slices.Equal(o.Sizes, []int{5, 50}) || o.Senders != 8 || o.Duration != time.Second || o.Rounds != 3 {
		t.Errorf("throughput flags: %+v, %v", o, err)
	}
	// results: -duration is the rate points', the throughput loops have
	// their own.
	o, err = parseThroughput(t, "results", "-duration", "9s", "-throughput-duration", "2s", "-throughput-rounds", "4", "-throughput-drain", "1m")
	if err != nil || o.Duration != 2*time.Second || o.Rounds != 4 || o.Drain != time.Minute {
		t.Errorf("results flags: %+v, %v", o, err)
	}
	for _, bad := range [][]string{{"-batch-sizes", "0"}, {"-batch-sizes", "1001"}, {"-batch-sizes", "1,x"}, {"-senders", "0"}} {
		if _, err := parseThroughput(t, "throughput", bad...); err == nil || !strings.Contains(err.Error(), strings.TrimPrefix(bad[0], "-")) {
			t.Errorf("%v: %v", bad, err)
		}
	}
}

// TestSustainableFlags parses the sustainable search's flags: on by
// default at its declared size in both commands, the quick size, the
// sustainable command's -closed-loop=false, nothing left to run refused,
// and bad values refused by name.
func TestSustainableFlags(t *testing.T) {
	d := scenario.SustainDefaults
	for _, cmd := range []string{"throughput", "results"} {
		o, err := parseThroughput(t, cmd)
		if err != nil || o.Sustain == nil || o.SkipClosedLoop || o.Sustain.Step != d.Step || o.Sustain.Rounds != d.Rounds || !slices.Equal(o.Sustain.Sizes, d.Sizes) {
			t.Errorf("%s defaults: %+v, %v", cmd, o.Sustain, err)
		}
	}
	o, err := parseThroughput(t, "throughput", sustainableArgs([]string{"-sustainable-rounds", "3", "-sustainable-step", "45s", "-sustainable-sizes", "10,100"})...)
	if err != nil || !o.SkipClosedLoop || o.Sustain == nil || o.Sustain.Rounds != 3 || o.Sustain.Step != 45*time.Second || !slices.Equal(o.Sustain.Sizes, []int{10, 100}) {
		t.Errorf("sustainable command: %+v %+v, %v", o, o.Sustain, err)
	}
	if o, err = parseThroughput(t, "throughput", "-sustainable-quick"); err != nil || o.Sustain == nil || o.Sustain.Step != scenario.SustainQuick.Step {
		t.Errorf("quick: %+v, %v", o.Sustain, err)
	}
	if o, err = parseThroughput(t, "throughput", "-sustainable=false"); err != nil || o.Sustain != nil {
		t.Errorf("-sustainable=false: %+v, %v", o.Sustain, err)
	}
	for _, bad := range [][]string{{"-sustainable-sizes", "0"}, {"-sustainable-step", "2s"}, {"-sustainable-rounds", "0"}, {"-sustainable=false", "-closed-loop=false"}} {
		if _, err := parseThroughput(t, "throughput", bad...); err == nil || !strings.Contains(err.Error(), "sustainable") {
			t.Errorf("%v: %v", bad, err)
		}
	}
}
