package kittest

import (
	"strings"
	"testing"
	"time"
)

// TestUsageBack: a sample above its slack is named by Over and waited
// for; one back within it, with done holding, ends the wait.
func TestUsageBack(t *testing.T) {
	t.Parallel()
	base, slack := Usage{FDs: 10, Goroutines: 5, Heap: 1 << 20}, Usage{FDs: 2, Goroutines: 2, Heap: 1 << 20}
	if over := (Usage{FDs: 12, Goroutines: 7, Heap: 2 << 20}).Over(base, slack); len(over) != 0 {
		t.Errorf("a usage at base+slack is over: %v", over)
	}
	over := Usage{FDs: 13, Goroutines: 7, Heap: 3 << 20}.Over(base, slack)
	if len(over) != 2 || !strings.Contains(over[0], "13 descriptors") || !strings.Contains(over[1], "live heap 3 MiB") {
		t.Errorf("Over = %q, want the descriptors and the heap named", over)
	}
	samples := []Usage{{FDs: 20}, {FDs: 11}, {FDs: 11}}
	i := 0
	sample := func() Usage { u := samples[min(i, len(samples)-1)]; i++; return u }
	u, over := UsageBack(t, Wait{Deadline: time.Now().Add(5 * time.Second), Every: time.Millisecond, Base: base, Slack: slack, Sample: sample, Done: func() bool { return i >= 3 }})
	if len(over) != 0 || u.FDs != 11 || i != 3 {
		t.Errorf("UsageBack = %v %q after %d samples, want back at the third", u, over, i)
	}
	i = 0
	_, over = UsageBack(t, Wait{Deadline: time.Now().Add(20 * time.Millisecond), Every: time.Millisecond, Base: base, Slack: slack, Sample: func() Usage { return Usage{FDs: 20} }})
	if len(over) != 1 {
		t.Errorf("UsageBack of a usage that stays over: %q, want the descriptors named", over)
	}
}
