package main

import (
	"net"
	"net/http"
	"os/exec"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/cache/conformance"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service/servicetest"
)

// TestLockHolderProcess is the holder process TestLockHolderKilled
// starts and kills; it skips in an ordinary run.
func TestLockHolderProcess(t *testing.T) { conformance.LockHolderProcess(t) }

// TestLockHolderKilled: a process holding a lock with a 1.5 s lease is
// killed; the key's PX frees it when the lease ends, the successor's
// token is higher and the dead holder's token is refused.
func TestLockHolderKilled(t *testing.T) {
	t.Parallel()
	tg := startPair(t, testConfig(t))
	conformance.KillLockHolder(t, "TestLockHolderProcess", tg.URL(), tg.PeerURL(), 1500*time.Millisecond)
}

// privateRedis starts a redis-server of the test's own (its port and
// directory, no persistence: a restart loses everything) and returns
// its address and a function that starts it again after a kill.
func privateRedis(t *testing.T) (addr string, start func() *exec.Cmd) {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("no redis-server on PATH: the private server this test stops cannot start")
	}
	addr = kittest.ClosedAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	dir := t.TempDir()
	start = func() *exec.Cmd {
		cmd := exec.Command(bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		kittest.Eventually(t, 10*time.Second, "the private redis-server to listen", func() bool {
			c, err := net.Dial("tcp", addr)
			if err == nil {
				_ = c.Close()
			}
			return err == nil
		})
		return cmd
	}
	return addr, start
}

// TestRedisRestartRoles: what a Redis restart (a private redis-server
// killed and started again, without persistence) does to the roles.
// While it is down: a subscription ends with "end" (reason "lost"), and
// publishing, subscribing, acquiring and taking are 503s. After it: the
// lock is lost (another owner gets it at once, long before the lease
// ended), but its token is still above the lost holder's (the counter
// is seeded from the server's clock), and the lost holder's token is
// refused; the rate-limit window is lost (a full window again);
// subscriptions work again and get what is published after them.
func TestRedisRestartRoles(t *testing.T) {
	t.Parallel()
	addr, start := privateRedis(t)
	srv := start()
	base := servicetest.Start(t, build, testConfig(t, map[string]string{"REDIS_URL": "redis://" + addr + "/0"})).URL()
	o := conformance.StartOutage(t, base)

	_ = srv.Process.Kill()
	_ = srv.Wait()
	o.Down(t, "Redis")

	start()
	after := o.Reopen(t, 30*time.Second)
	st, fresh, _ := conformance.Acquire(t, base, o.Name, "after", time.Minute)
	if st != http.StatusCreated {
		t.Fatalf("acquire after the restart, %v before the lost lease would end: %d, want 201 (the lock was lost)", time.Until(o.Held.ExpiresAt).Round(time.Second), st)
	}
	if fresh.Token <= o.Held.Token {
		t.Errorf("token after the restart %d, want above the lost holder's %d (the counter seeded from the clock)", fresh.Token, o.Held.Token)
	}
	if st := conformance.Release(t, base, o.Name, "before", o.Held.Token); st != http.StatusConflict {
		t.Errorf("the lost holder's release: %d, want 409", st)
	}
	o.After(t, after, "the restart")
}
