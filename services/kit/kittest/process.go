// A service in a process of its own: the test binary started again as
// the service (ServeChild, ChildCommand, StartChild), and the pieces such
// a test needs (ClosedAddr, BusyAddr, LogBuffer).

package kittest

import (
	"bytes"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/localport"
)

// childEnv marks a test binary started by ChildCommand: it runs the
// service instead of its tests (ServeChild).
const childEnv = "WPE_CONFORMANCE_CHILD"

// ServeChild runs main, the service's own main, instead of the tests when
// this test binary was started by ChildCommand, and exits when it
// returns. A service whose tests start processes calls it first in its
// TestMain; otherwise it returns at once.
func ServeChild(main func()) {
	if os.Getenv(childEnv) == "" {
		return
	}
	main()
	os.Exit(0)
}

// Main is the TestMain of a service whose tests start it as a process
// (ChildCommand): the service's main when this binary is such a process
// (ServeChild), else the tests.
func Main(m *testing.M, main func()) {
	ServeChild(main)
	os.Exit(m.Run())
}

// ChildCommand is this test binary started again as the service
// (ServeChild), with env on top of the test's environment (the last
// value of a name wins).
func ChildCommand(env map[string]string) *exec.Cmd {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"=1")
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	return cmd
}

// Child is one instance of a service in a process of its own, so that a
// test can kill it with SIGKILL as kill -9 would, or read its resources
// from /proc.
type Child struct {
	url  string
	cmd  *exec.Cmd
	done chan struct{}
	out  *LogBuffer
}

// StartChild starts cmd, the service listening at url (its base URL), with
// its output collected, and waits until its /readyz answers 200, for a
// minute at the most. The instance is stopped gracefully (SIGTERM, then
// SIGKILL after 20 s) when the test ends; the end of its output is logged
// if the test failed.
func StartChild(t testing.TB, cmd *exec.Cmd, url string) *Child {
	t.Helper()
	out := new(LogBuffer)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start an instance: %v", err)
	}
	c := &Child{url: url, cmd: cmd, done: make(chan struct{}), out: out}
	go func() { _ = cmd.Wait(); close(c.done) }()
	t.Cleanup(func() {
		c.stop()
		if t.Failed() {
			t.Logf("output of the instance on %s:\n%s", c.url, c.out.Tail(4000))
		}
	})
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(time.Minute)
	for {
		select {
		case <-c.done:
			t.Fatalf("the instance on %s exited before it was ready:\n%s", c.url, c.out.Tail(4000))
		default:
		}
		if resp, err := client.Get(c.url + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return c
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the instance on %s was not ready within a minute:\n%s", c.url, c.out.Tail(4000))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// URL is the instance's base URL.
func (c *Child) URL() string { return c.url }

// Pid is the instance's process id.
func (c *Child) Pid() int { return c.cmd.Process.Pid }

// Kill ends the instance with SIGKILL, as kill -9 would: nothing of it
// runs afterwards (no drain, no acknowledgement, no release), and the
// kernel closes its sockets. It returns once the process is gone.
func (c *Child) Kill(t testing.TB) {
	t.Helper()
	if err := c.cmd.Process.Kill(); err != nil {
		t.Fatalf("kill -9 the instance on %s: %v", c.url, err)
	}
	<-c.done
}

// stop stops the instance with SIGTERM, then SIGKILL after 20 s.
func (c *Child) stop() {
	select {
	case <-c.done:
		return
	default:
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(20 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

// ClosedAddr returns a loopback address (host:port) nothing listens on at
// the moment: a port for a child to bind, or one a client finds closed.
// It comes from localport, outside the kernel's ephemeral range, so no
// outgoing connection takes it before the child binds it.
func ClosedAddr(t testing.TB) string {
	t.Helper()
	addr, err := localport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// BusyAddr returns a loopback address (host:port) something listens on
// until the test ends: a port a service cannot bind.
func BusyAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	return ln.Addr().String()
}

// LogBuffer collects a process's or a service's output, written by
// several goroutines (exec's copiers, the service's) and read by the
// test.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written.
func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Tail returns the last n bytes written, after "…" when there were more.
func (b *LogBuffer) Tail(n int) string {
	s := b.String()
	if len(s) > n {
		s = "…" + s[len(s)-n:]
	}
	return s
}
