package launchtest

import (
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/launch"
)

// stopWithin is how long the processes a test started get to stop when
// it ends.
const stopWithin = 20 * time.Second

// New returns a Launcher of the repository's services whose builds and
// logs go to a directory of t's: every process it starts is stopped when
// t ends, and a failure to stop fails t.
func New(t testing.TB) *launch.Launcher {
	t.Helper()
	root, err := launch.Root()
	if err != nil {
		t.Fatal(err)
	}
	l, err := launch.New(root, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.StopAll(stopWithin); err != nil {
			t.Error(err)
		}
	})
	return l
}
