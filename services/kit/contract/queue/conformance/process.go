// An instance of a service in a process of its own, for RunScaleOut:
// StartProcess starts the test binary again as the service
// (kittest.ServeChild).

package conformance

import (
	"maps"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// Process is one instance of a service in a process of its own: the test
// binary started again as the service (kittest.ServeChild), so that a
// test can kill it with SIGKILL as kill -9 would.
type Process = kittest.Child

// StartProcess starts an instance of the service whose test binary this
// is, with env on top of the test's environment, on a free loopback port,
// and waits until its /readyz answers 200 (kittest.StartChild). The
// instance is stopped gracefully (SIGTERM) when the test ends; its output
// is logged if the test failed.
func StartProcess(t testing.TB, env map[string]string) *Process {
	t.Helper()
	addr := kittest.ClosedAddr(t)
	all := map[string]string{"ADDR": addr, "SHUTDOWN_TIMEOUT": "10s"}
	maps.Copy(all, env)
	return kittest.StartChild(t, kittest.ChildCommand(all), "http://"+addr)
}
