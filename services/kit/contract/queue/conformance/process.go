// An instance of a service in a process of its own, for RunScaleOut:
// StartProcess starts the test binary again as the service (ServeChild).

package conformance

import (
	"bytes"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// childEnv marks a test binary started by StartProcess: it runs the
// service instead of its tests (ServeChild).
const childEnv = "WPE_CONFORMANCE_CHILD"

// ServeChild runs main, the service's own main, instead of the tests when
// this test binary was started by StartProcess, and exits when it
// returns. A service whose tests start processes calls it first in its
// TestMain; otherwise it returns at once.
func ServeChild(main func()) {
	if os.Getenv(childEnv) == "" {
		return
	}
	main()
	os.Exit(0)
}

// Process is one instance of a service in a process of its own: the test
// binary started again as the service (ServeChild), so that a test can
// kill it with SIGKILL as kill -9 would.
type Process struct {
	url  string
	cmd  *exec.Cmd
	done chan struct{}
	out  *lockedBuffer
}

// URL is the instance's base URL.
func (p *Process) URL() string { return p.url }

// StartProcess starts an instance of the service whose test binary this
// is, with env on top of the test's environment, on a free loopback port,
// and waits until its /readyz answers 200. The instance is stopped
// gracefully (SIGTERM) when the test ends; its output is logged if the
// test failed.
func StartProcess(t testing.TB, env map[string]string) *Process {
	t.Helper()
	port := freePort(t)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"=1", "ADDR=127.0.0.1:"+port, "SHUTDOWN_TIMEOUT=10s")
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v) // the last value of a name wins
	}
	out := new(lockedBuffer)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start an instance: %v", err)
	}
	p := &Process{url: "http://127.0.0.1:" + port, cmd: cmd, done: make(chan struct{}), out: out}
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("output of the instance on %s:\n%s", p.url, p.out.tail(4000))
		}
	})
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(time.Minute)
	for {
		select {
		case <-p.done:
			t.Fatalf("the instance on %s exited before it was ready:\n%s", p.url, p.out.tail(4000))
		default:
		}
		if resp, err := client.Get(p.url + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the instance on %s was not ready within a minute:\n%s", p.url, p.out.tail(4000))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Kill ends the instance with SIGKILL, as kill -9 would: nothing of it
// runs afterwards (no drain, no acknowledgement, no release), and the
// kernel closes its sockets. It returns once the process is gone.
func (p *Process) Kill(t testing.TB) {
	t.Helper()
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatalf("kill -9 the instance on %s: %v", p.url, err)
	}
	<-p.done
}

// stop stops the instance with SIGTERM, then SIGKILL after 20 s.
func (p *Process) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// freePort returns a loopback port nothing listened on a moment ago.
func freePort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// lockedBuffer is a process's output, written by exec's copiers and read
// by the test.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// tail returns the last n bytes written.
func (b *lockedBuffer) tail(n int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.buf.String()
	if len(s) > n {
		s = "…" + s[len(s)-n:]
	}
	return s
}
