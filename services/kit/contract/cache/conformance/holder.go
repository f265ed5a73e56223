// The lock holder kill test, shared by both services' tests: a process
// acquires a lock and is killed; another holder gets the lock once the
// lease ends, with a higher token, and the dead holder's token is
// refused. And a server outage's effect on the roles (Outage): the
// server behind them (Redis, Postgres) goes down and comes back, and
// each side checks what its roles kept.

package conformance

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/cache"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// The environment of a lock holder process (LockHolderProcess).
const (
	holderURL   = "CACHE_LOCK_HOLDER_URL"
	holderName  = "CACHE_LOCK_HOLDER_NAME"
	holderLease = "CACHE_LOCK_HOLDER_LEASE_MS"
)

// LockHolderProcess is the body of a service test named by the
// service's KillLockHolder call (TestLockHolderProcess): run by the test
// binary that KillLockHolder starts, it acquires the lock its environment
// names, prints the lock as one JSON line and waits to be killed; run
// as an ordinary test, it skips.
func LockHolderProcess(t *testing.T) {
	base := os.Getenv(holderURL)
	if base == "" {
		t.Skip("the lock holder process of KillLockHolder; nothing to do in an ordinary run")
	}
	ms, _ := strconv.Atoi(os.Getenv(holderLease))
	l := MustAcquire(t, base, os.Getenv(holderName), "doomed", time.Duration(ms)*time.Millisecond)
	b, _ := json.Marshal(l)
	fmt.Printf("%s\n", b)
	time.Sleep(time.Hour) // until killed
}

// KillLockHolder starts a holder process (the test binary running
// holderTest, which calls LockHolderProcess), which acquires a lock
// through base with lease, and kills it (SIGKILL) once it holds it.
// Then another holder polls the lock through peer every 10 ms. It
// checks that the lock is not granted before the dead holder's lease
// ends, that it is within two seconds after, with a higher token, and
// that the dead holder's token is refused: extend and release 409 while
// the new holder holds it, 404 once it released it. It returns how long
// after the kill the new holder got the lock.
func KillLockHolder(t *testing.T, holderTest, base, peer string, lease time.Duration) time.Duration {
	t.Helper()
	name := kittest.UniqueName(t, "holder")
	cmd := exec.Command(os.Args[0], "-test.run=^"+holderTest+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), holderURL+"="+base, holderName+"="+name, holderLease+"="+strconv.FormatInt(lease.Milliseconds(), 10))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var old cache.Lock
	got := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if json.Unmarshal(sc.Bytes(), &old) == nil && old.Token > 0 {
				got <- nil
				return
			}
		}
		got <- fmt.Errorf("the holder process printed no lock (%v)", sc.Err())
	}()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the holder process did not acquire the lock within 60s")
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	killed := time.Now()
	var fresh cache.Lock
	for {
		st, l, _ := Acquire(t, peer, name, "successor", 30*time.Second)
		if st == http.StatusCreated {
			fresh = l
			break
		}
		if st != http.StatusConflict {
			t.Fatalf("acquire after the holder was killed: %d, want 409 until the lease ends, then 201", st)
		}
		if time.Since(killed) > lease+10*time.Second {
			t.Fatalf("the dead holder's lock was not free %v after the kill (lease %v)", time.Since(killed), lease)
		}
		time.Sleep(10 * time.Millisecond)
	}
	handover := time.Since(killed)
	t.Logf("lease %v: another holder got the lock %v after its holder was killed (%v after the lease's end)", lease, handover.Round(time.Millisecond),
		time.Since(old.ExpiresAt).Round(time.Millisecond))
	if time.Now().Before(old.ExpiresAt.Add(-50*time.Millisecond)) || time.Since(old.ExpiresAt) > 2*time.Second {
		t.Errorf("granted at %v; the dead holder's lease ended at %v: want within 2 s after", time.Now().UTC(), old.ExpiresAt)
	}
	if fresh.Token <= old.Token {
		t.Errorf("the successor's token %d, want above the dead holder's %d", fresh.Token, old.Token)
	}
	if st, _ := Extend(t, base, name, "doomed", old.Token, time.Minute); st != http.StatusConflict {
		t.Errorf("the dead holder's extend: %d, want 409", st)
	}
	if st := Release(t, base, name, "doomed", old.Token); st != http.StatusConflict {
		t.Errorf("the dead holder's release: %d, want 409", st)
	}
	if st := Release(t, peer, name, "successor", fresh.Token); st != http.StatusNoContent {
		t.Errorf("the successor's release: %d, want 204", st)
	}
	if st := Release(t, base, name, "doomed", old.Token); st != http.StatusNotFound {
		t.Errorf("the dead holder's release once nobody holds the lock: %d, want 404", st)
	}
	return handover
}

// Outage is the roles' state on one instance before its server goes
// down (StartOutage): a lock held for a minute, a rate-limit window of 3
// spent, and a subscription that got one message.
type Outage struct {
	// Base is the instance's base URL; Name, Key and Channel are the
	// lock's, the window's and the subscription's.
	Base, Name, Key, Channel string
	// Held is the lock, held by the owner "before".
	Held cache.Lock
	// Sub is the subscription open before the outage.
	Sub *Subscription
}

// StartOutage sets up the roles' state on base that an outage test
// takes down: the lock, the window (3 takes admitted, the fourth
// refused) and the subscription.
func StartOutage(t testing.TB, base string) *Outage {
	t.Helper()
	o := &Outage{Base: base, Name: kittest.UniqueName(t, "lock"), Key: kittest.UniqueName(t, "rl"), Channel: kittest.UniqueName(t, "ch")}
	o.Held = MustAcquire(t, base, o.Name, "before", time.Minute)
	for i := range 4 {
		st, _, _ := TakeOnce(t, base, o.Key, 3, time.Minute)
		if want := map[bool]int{true: 200, false: 429}[i < 3]; st != want {
			t.Fatalf("take %d: %d, want %d", i+1, st, want)
		}
	}
	o.Sub = Subscribe(t, base, o.Channel)
	Publish(t, base, o.Channel, `{"n":1}`)
	o.Sub.Messages(t, 1, 10*time.Second)
	return o
}

// Down checks the roles while server (its name, for the messages) is
// down: the subscription ended with "end" of reason "lost", and
// acquiring, taking, publishing and subscribing are 503s.
func (o *Outage) Down(t testing.TB, server string) {
	t.Helper()
	ev, err := o.Sub.Next(30 * time.Second)
	if err != nil || ev.Name != "end" || !strings.Contains(ev.Data, `"reason":"lost"`) {
		t.Fatalf("the subscriber when %s went down: %+v, %v; want an end event of reason lost", server, ev, err)
	}
	if _, err := o.Sub.Next(5 * time.Second); !errors.Is(err, ErrStreamEnded) {
		t.Errorf("after the end event: %v, want the stream closed", err)
	}
	if st, _, _ := Acquire(t, o.Base, o.Name, "other", time.Second); st != http.StatusServiceUnavailable {
		t.Errorf("acquire while %s is down: %d, want 503", server, st)
	}
	if st, _, _ := TakeOnce(t, o.Base, o.Key, 3, time.Minute); st != http.StatusServiceUnavailable {
		t.Errorf("take while %s is down: %d, want 503", server, st)
	}
	if st, _ := kittest.Do(t, http.MethodPost, MessagesURL(o.Base, o.Channel), `{"n":0}`, nil); st != http.StatusServiceUnavailable {
		t.Errorf("publish while %s is down: %d, want 503", server, st)
	}
	_, err = Open(t, kittest.Client, o.Base, o.Channel)
	var re *RefusedError
	if !errors.As(err, &re) || re.Status != http.StatusServiceUnavailable || re.RetryAfter == "" {
		t.Errorf("subscribe while %s is down: %v, want 503 with Retry-After", server, err)
	}
}

// Reopen waits up to d for subscriptions to work again once the server
// is back, and returns the first one that opened.
func (o *Outage) Reopen(t testing.TB, d time.Duration) *Subscription {
	t.Helper()
	var after *Subscription
	kittest.Eventually(t, d, "subscriptions to work again", func() bool {
		s, err := Open(t, kittest.Client, o.Base, o.Channel)
		after = s
		return err == nil
	})
	return after
}

// After checks, once the server is back (after names it in the
// messages: "the crash", "the restart"), that the rate-limit window was
// lost (a take is admitted with 2 remaining) and that sub, opened by
// Reopen, gets what is published now.
func (o *Outage) After(t testing.TB, sub *Subscription, after string) {
	t.Helper()
	if st, tk, _ := TakeOnce(t, o.Base, o.Key, 3, time.Minute); st != http.StatusOK || tk.Remaining != 2 {
		t.Errorf("take after %s: %d %+v, want 200 with 2 remaining (the window was lost)", after, st, tk)
	}
	Publish(t, o.Base, o.Channel, `{"n":2}`)
	if got := sub.Messages(t, 1, 10*time.Second)[0]; got != `{"n":2}` {
		t.Errorf("after %s a subscriber got %s", after, got)
	}
}
