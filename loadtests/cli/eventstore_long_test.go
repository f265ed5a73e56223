package cli

import (
	"strings"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/eventstore"
)

// TestEventStoreExtraCommands: eventstore-long and eventstore-cleanup
// answer -h and --help with their flags (exit 0, no server touched), and
// a bad flag or an impossible setting with exit 2 before connecting
// anything.
func TestEventStoreExtraCommands(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{eventstore.LongCommand, eventstore.CleanupCommand} {
		for _, h := range []string{"-h", "--help"} {
			var out, errOut strings.Builder
			code := Run([]string{cmd, h}, &out, &errOut)
			if all := out.String() + errOut.String(); code != 0 || !strings.Contains(all, "\n  -targets") {
				t.Errorf("loadtests %s %s: exit %d (want 0) and flags printed; got:\n%s", cmd, h, code, all)
			}
		}
		var out, errOut strings.Builder
		if code := Run([]string{cmd, "-no-such-flag"}, &out, &errOut); code != 2 {
			t.Errorf("loadtests %s -no-such-flag: exit %d, want 2", cmd, code)
		}
	}
	var out, errOut strings.Builder
	if code := Run([]string{eventstore.LongCommand, "-sizes", "500", "-targets", "no-kurrentdb=http://127.0.0.1:1"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "sizes") {
		t.Errorf("a stream no longer than -snapshot-every: exit %d (want 2), stderr %q", code, errOut.String())
	}
}
