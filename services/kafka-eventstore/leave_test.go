package main

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/eventstore/conformance"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/service/servicetest"
)

// TestSubscribersLeaveNothingBehind is issue 26's finding: after
// thousands of subscribers left, kafka-eventstore held their descriptors
// and goroutines for about 35 s, each subscription blocked in a Kafka
// fetch that watched no context until the fetch's own deadline. Here the
// broker's long poll (KAFKA_FETCH_MAX_WAIT) is 8 s: N caught-up
// subscribers leave, and within leaveBound (3 s, well under the 8 s a
// fetch the broker holds would take) every subscription has ended (its
// handler and its backend subscription returned, as /stats counts them)
// and the process's goroutines and descriptors are back near what they
// were before the subscribers came.
//
// The test does not call t.Parallel: it counts the whole process's
// goroutines and descriptors, and the package's parallel tests start
// services of their own (listeners, Kafka connections, subscriptions)
// in the same process. Run beside them, it once failed in a fresh-clone
// CI run (19 goroutines and 17 descriptors over the baseline 3 s after
// the subscribers left) and locally took up to a second for its counts
// to fall back: the counts were the other tests', taken while they
// started. Go runs a package's sequential tests before releasing its
// parallel ones, so here only this test's service and clients are in
// the process. On failure it logs every goroutine's stack and every
// descriptor, so that a leak names itself.
func TestSubscribersLeaveNothingBehind(t *testing.T) {
	cfg := testConfig(t)
	cfg.LongPoll = 8 * time.Second
	cfg.BackendTimeout = 20 * time.Second
	r := servicetest.Start(t, build, cfg)
	stream := "tank-" + kittest.UniqueName(t, "s")
	if s, b := kittest.Do(t, "POST", r.URL()+"/streams/"+stream+"/events",
		map[string]any{"events": []map[string]any{{"type": "TankRegistered", "data": map[string]any{"capacity_liters": 1000}}}}, nil); s != http.StatusCreated {
		t.Fatalf("append: %d %s", s, b)
	}
	time.Sleep(100 * time.Millisecond)
	before := kittest.SelfUsage(t)

	const n = 100
	leave := conformance.HoldSubscribers(t, r.URL(), n, nil)
	// Every subscription is now in a live fetch the broker holds for 8 s.
	time.Sleep(500 * time.Millisecond)
	during := runtime.NumGoroutine()
	left := time.Now()
	leave()
	held := func() int64 {
		c := kittest.Counters(t, r.URL())
		return c["subscriptions"] - c["subscriptions_ended"]
	}
	after, over := kittest.UsageBack(t, kittest.Wait{Deadline: time.Now().Add(leaveBound), Every: 20 * time.Millisecond, Base: before,
		Slack: kittest.Usage{FDs: 10, Goroutines: 10}, Sample: func() kittest.Usage { return kittest.SelfUsage(t) }, Done: func() bool { return held() == 0 }})
	if len(over) > 0 {
		var buf bytes.Buffer
		_ = pprof.Lookup("goroutine").WriteTo(&buf, 1)
		t.Logf("goroutines:\n%s\ndescriptors:\n%s", buf.String(), describeFDs())
		t.Fatalf("%v after %d subscribers left: %d subscriptions still held; %s (%d goroutines while they were here)",
			leaveBound, n, held(), strings.Join(over, "; "), during)
	}
	t.Logf("%d subscribers gone: goroutines %d -> %d -> %d, descriptors back to %d (from %d) within %v",
		n, before.Goroutines, during, after.Goroutines, after.FDs, before.FDs, time.Since(left).Round(time.Millisecond))
}

// leaveBound is how long after its subscribers leave the service may
// take to end their subscriptions and be back at its baseline of
// goroutines and descriptors: less than half the broker's 8 s long poll,
// so that one fetch not cut when its subscriber left fails the test.
const leaveBound = 3 * time.Second

// describeFDs lists this process's descriptors, a socket with its
// addresses (from /proc/self/net/tcp and tcp6).
func describeFDs() string {
	socks := map[string]string{}
	for _, f := range []string{"/proc/self/net/tcp", "/proc/self/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fs := strings.Fields(line)
			if len(fs) > 9 {
				socks["socket:["+fs[9]+"]"] = fs[1] + " -> " + fs[2] + " st " + fs[3]
			}
		}
	}
	ents, _ := os.ReadDir("/proc/self/fd")
	var out strings.Builder
	for _, e := range ents {
		l, _ := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		fmt.Fprintf(&out, "%s %s %s\n", e.Name(), l, socks[l])
	}
	return out.String()
}
