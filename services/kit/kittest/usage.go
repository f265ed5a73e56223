package kittest

import (
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"
)

// Usage is what a test reads of a process to see it back at a baseline
// once its clients left (issue 26's "nothing left behind"). A field the
// sample does not read is zero, in the baseline and in every sample.
type Usage struct {
	// FDs is how many descriptors the process holds open.
	FDs int
	// Goroutines is how many goroutines it runs.
	Goroutines int
	// Heap is its live heap in bytes (after a GC).
	Heap int64
	// RSS is its resident set in bytes.
	RSS int64
}

// String shows the fields as a log line.
func (u Usage) String() string {
	return fmt.Sprintf("RSS %d MiB, live heap %d MiB, %d descriptors, %d goroutines", u.RSS>>20, u.Heap>>20, u.FDs, u.Goroutines)
}

// Over names each field of u that is more than slack's above base, with
// the figures; none when u is back within slack of base.
func (u Usage) Over(base, slack Usage) []string {
	var over []string
	if u.FDs > base.FDs+slack.FDs {
		over = append(over, fmt.Sprintf("%d descriptors, baseline %d (slack %d)", u.FDs, base.FDs, slack.FDs))
	}
	if u.Goroutines > base.Goroutines+slack.Goroutines {
		over = append(over, fmt.Sprintf("%d goroutines, baseline %d (slack %d)", u.Goroutines, base.Goroutines, slack.Goroutines))
	}
	if u.Heap > base.Heap+slack.Heap {
		over = append(over, fmt.Sprintf("live heap %d MiB, baseline %d MiB (slack %d MiB)", u.Heap>>20, base.Heap>>20, slack.Heap>>20))
	}
	if u.RSS > base.RSS+slack.RSS {
		over = append(over, fmt.Sprintf("RSS %d MiB, baseline %d MiB (slack %d MiB)", u.RSS>>20, base.RSS>>20, slack.RSS>>20))
	}
	return over
}

// SelfUsage reads the test process's own descriptors (/proc/self/fd; the
// test is skipped without /proc) and goroutines. It counts the whole
// process: a test that compares it with a baseline must not run in
// parallel with tests that start goroutines or open descriptors.
func SelfUsage(t testing.TB) Usage {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot count descriptors: %v", err)
	}
	return Usage{FDs: len(ents), Goroutines: runtime.NumGoroutine()}
}

// Wait is how UsageBack waits for a usage to come back.
type Wait struct {
	// Deadline ends the wait; Every is the interval between samples.
	Deadline time.Time
	Every    time.Duration
	// Base is the usage to come back to, within Slack.
	Base, Slack Usage
	// Sample measures the usage now; Done (nil: always true) must hold
	// too.
	Sample func() Usage
	Done   func() bool
}

// UsageBack samples every w.Every until the sample is back within
// w.Slack of w.Base and w.Done holds, or until w.Deadline, and returns
// the last sample and what is still not back: the fields Over names, and
// "not done" when Done does not hold.
func UsageBack(t testing.TB, w Wait) (Usage, []string) {
	t.Helper()
	for {
		u := w.Sample()
		over := u.Over(w.Base, w.Slack)
		if w.Done != nil && !w.Done() {
			over = append(over, "not done")
		}
		if len(over) == 0 || time.Now().After(w.Deadline) {
			return u, over
		}
		time.Sleep(w.Every)
	}
}
