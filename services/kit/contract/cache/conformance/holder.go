// The lock holder kill test, shared by both services' tests: a process
// acquires a lock and is killed; another holder gets the lock once the
// lease ends, with a higher token, and the dead holder's token is
// refused.

package conformance

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
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
