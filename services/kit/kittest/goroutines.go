package kittest

import (
	"bytes"
	"context"
	"fmt"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

// ownerLabel is the pprof label OwnGoroutines marks a test's goroutines
// with.
const ownerLabel = "kittest_owner"

var owners atomic.Int64

// OwnGoroutines marks the calling test's goroutine with a pprof label of
// its own and returns a function that counts the goroutines carrying it:
// the test's goroutine and every goroutine started from it from now on,
// and from those in turn (a goroutine inherits its creator's labels), such
// as an HTTP server the test starts, the goroutine serving each of its
// connections and whatever the handlers start. Goroutines of the tests
// running in parallel in the same process are not counted, so a test can
// assert that what it started ended without counting the whole process
// (runtime.NumGoroutine). Call it on the test's goroutine, before starting
// what is to be counted; goroutines started earlier, and those a shared
// pool started for another test, are not the test's.
func OwnGoroutines(t testing.TB) (count func() int) {
	t.Helper()
	id := "t" + strconv.FormatInt(owners.Add(1), 10)
	pprof.SetGoroutineLabels(pprof.WithLabels(context.Background(), pprof.Labels(ownerLabel, id)))
	mark := fmt.Sprintf("%q:%q", ownerLabel, id)
	return func() int {
		var buf bytes.Buffer
		if err := pprof.Lookup("goroutine").WriteTo(&buf, 1); err != nil {
			t.Fatalf("goroutine profile: %v", err)
		}
		return countLabelled(buf.String(), mark)
	}
}

// countLabelled sums the counts of the records of a goroutine profile
// written with debug=1 whose labels hold mark. Each record is a line
// "N @ pc...", then "# labels: {...}" when the goroutines have labels,
// then its frames; records are separated by blank lines, after a first
// line "goroutine profile: total N".
func countLabelled(profile, mark string) int {
	n := 0
	if first, rest, ok := strings.Cut(profile, "\n"); ok && strings.HasPrefix(first, "goroutine profile:") {
		profile = rest
	}
	for _, rec := range strings.Split(profile, "\n\n") {
		head, rest, _ := strings.Cut(strings.TrimLeft(rec, "\n"), "\n")
		labels, _, _ := strings.Cut(rest, "\n")
		if !strings.HasPrefix(labels, "# labels: ") || !strings.Contains(labels, mark) {
			continue
		}
		c, _, ok := strings.Cut(head, " @ ")
		if !ok {
			continue
		}
		if k, err := strconv.Atoi(c); err == nil {
			n += k
		}
	}
	return n
}
