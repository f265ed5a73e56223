package main

import (
	"errors"
	"net"
	"net/http"
	"os/exec"
	"strings"
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
	addr = closedPort(t)
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
	name, key, ch := kittest.UniqueName(t, "lock"), kittest.UniqueName(t, "rl"), kittest.UniqueName(t, "ch")
	held := conformance.MustAcquire(t, base, name, "before", time.Minute)
	for i := range 4 {
		st, _, _ := conformance.TakeOnce(t, base, key, 3, time.Minute)
		if want := map[bool]int{true: 200, false: 429}[i < 3]; st != want {
			t.Fatalf("take %d: %d, want %d", i+1, st, want)
		}
	}
	sub := conformance.Subscribe(t, base, ch)
	conformance.Publish(t, base, ch, `{"n":1}`)
	sub.Messages(t, 1, 10*time.Second)

	_ = srv.Process.Kill()
	_ = srv.Wait()
	ev, err := sub.Next(30 * time.Second)
	if err != nil || ev.Name != "end" || !strings.Contains(ev.Data, `"reason":"lost"`) {
		t.Fatalf("the subscriber when Redis died: %+v, %v; want an end event of reason lost", ev, err)
	}
	if _, err := sub.Next(5 * time.Second); !errors.Is(err, conformance.ErrStreamEnded) {
		t.Errorf("after the end event: %v, want the stream closed", err)
	}
	downStatus(t, base, name, key, ch)

	start()
	var after *conformance.Subscription
	kittest.Eventually(t, 30*time.Second, "subscriptions to work again", func() bool {
		s, err := conformance.Open(t, kittest.Client, base, ch)
		after = s
		return err == nil
	})
	st, fresh, _ := conformance.Acquire(t, base, name, "after", time.Minute)
	if st != http.StatusCreated {
		t.Fatalf("acquire after the restart, %v before the lost lease would end: %d, want 201 (the lock was lost)", time.Until(held.ExpiresAt).Round(time.Second), st)
	}
	if fresh.Token <= held.Token {
		t.Errorf("token after the restart %d, want above the lost holder's %d (the counter seeded from the clock)", fresh.Token, held.Token)
	}
	if st := conformance.Release(t, base, name, "before", held.Token); st != http.StatusConflict {
		t.Errorf("the lost holder's release: %d, want 409", st)
	}
	if st, tk, _ := conformance.TakeOnce(t, base, key, 3, time.Minute); st != http.StatusOK || tk.Remaining != 2 {
		t.Errorf("take after the restart: %d %+v, want 200 with 2 remaining (the window was lost)", st, tk)
	}
	conformance.Publish(t, base, ch, `{"n":2}`)
	if got := after.Messages(t, 1, 10*time.Second)[0]; got != `{"n":2}` {
		t.Errorf("after the restart a subscriber got %s", got)
	}
}

// downStatus checks that every role answers 503 while its server is down.
func downStatus(t *testing.T, base, name, key, ch string) {
	t.Helper()
	if st, _, _ := conformance.Acquire(t, base, name, "other", time.Second); st != http.StatusServiceUnavailable {
		t.Errorf("acquire while the server is down: %d, want 503", st)
	}
	if st, _, _ := conformance.TakeOnce(t, base, key, 3, time.Minute); st != http.StatusServiceUnavailable {
		t.Errorf("take while the server is down: %d, want 503", st)
	}
	if st, _ := kittest.Do(t, http.MethodPost, conformance.MessagesURL(base, ch), `{"n":0}`, nil); st != http.StatusServiceUnavailable {
		t.Errorf("publish while the server is down: %d, want 503", st)
	}
	_, err := conformance.Open(t, kittest.Client, base, ch)
	var re *conformance.RefusedError
	if !errors.As(err, &re) || re.Status != http.StatusServiceUnavailable || re.RetryAfter == "" {
		t.Errorf("subscribe while the server is down: %v, want 503 with Retry-After", err)
	}
}
