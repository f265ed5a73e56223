package main

import (
	"bufio"
	"bytes"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/eventstore/conformance"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// TestMain makes the test binary run the service's main when
// TestClientsLeaveNothingBehind starts it as a process of its own
// (kittest.StartChild), whose memory and descriptors it reads from
// /proc, without a build step.
func TestMain(m *testing.M) { kittest.Main(m, main) }

// The bounds TestClientsLeaveNothingBehind holds the service to.
const (
	// leaveSubscribers is how many subscribers come and leave at once.
	leaveSubscribers = 400
	// leaveWithin is how soon after they left the process must be back.
	leaveWithin = 5 * time.Second
	// leaveSlack is how many descriptors and goroutines above the
	// baseline still count as back: the pools' connections, a listener
	// reconnect, the shared poll ending.
	leaveSlack = 10
	// leaveLiveHeap bounds the live heap above the baseline once they
	// left, after a forced GC (go_memstats_heap_inuse_bytes): what the
	// subscribers left referenced.
	leaveLiveHeap = 16 << 20
	// leavePeakRSS bounds the process's RSS above the baseline while they
	// are all caught up, and after they left: each subscriber costs its
	// goroutines, its connection's buffers and at most one catch-up page
	// (eventstore.MaxSubscribePageBytes); 2,000 subscribers once took
	// this service from 20 MB to 6.3 GB, never given back.
	leavePeakRSS = 256 << 20
)

// TestClientsLeaveNothingBehind is issue 26's "memory and descriptors go
// back to the baseline within a few seconds after clients leave". The
// service runs as a subprocess on the stack's Postgres with a backlog of
// 32 events of 8 KiB; leaveSubscribers subscribers read it to
// caught-up, hold their streams, and leave together. Within leaveWithin
// its descriptors (/proc/<pid>/fd) and goroutines (/metrics
// go_goroutines) are back within leaveSlack of the baseline, its live
// heap after a GC within leaveLiveHeap, and its RSS stays within
// leavePeakRSS of the baseline throughout.
//
// RSS is what the kernel charges, not what the heap holds: Go frees
// memory to the OS only when its scavenger gets to it, so RSS is bounded
// (leavePeakRSS) rather than required back at the baseline, and the live
// heap is read after a GC forced through the profiling listener
// (/debug/pprof/heap?gc=1), which does not depend on debug.FreeOSMemory.
// GODEBUG=madvdontneed=1 (Linux's default since Go 1.16, set to be
// explicit) makes released pages leave RSS at once, instead of when the
// kernel needs them (MADV_FREE).
func TestClientsLeaveNothingBehind(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the service as a process on the stack's Postgres")
	}
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skipf("needs /proc: %v", err)
	}
	url := kittest.PostgresURL(t)
	schema := kittest.Schema(t, url)
	addr, debug := kittest.ClosedAddr(t), kittest.ClosedAddr(t)
	base := "http://" + addr
	p := &process{kittest.StartChild(t, kittest.ChildCommand(map[string]string{
		"DATABASE_URL": url, "DATABASE_SCHEMA": schema, "DATABASE_MAX_CONNS": "8", "ADDR": addr, "DEBUG_ADDR": debug,
		"GODEBUG": "madvdontneed=1", "LOG_LEVEL": "warn",
	}), base)}

	stream := "tank-" + kittest.UniqueName(t, "leave")
	pad := strings.Repeat("x", 8<<10)
	for i := range 32 {
		if s, b := kittest.Do(t, http.MethodPost, base+"/streams/"+stream+"/events",
			map[string]any{"events": []map[string]any{{"type": "OxygenAdded", "data": map[string]any{"liters": i, "pad": pad}}}}, nil); s != http.StatusCreated {
			t.Fatalf("append: %d %s", s, b)
		}
	}
	// Warm up: 16 subscribers read the backlog and leave, so that the
	// baseline holds the pool's connections (DATABASE_MAX_CONNS 8, kept
	// open while idle) and the buffers the first subscriptions make.
	conformance.HoldSubscribers(t, base, 16, nil)()
	time.Sleep(500 * time.Millisecond)
	before := p.sample(t, debug)
	t.Logf("baseline: %v", before)

	leave := conformance.HoldSubscribers(t, base, leaveSubscribers, nil)
	held := p.sample(t, debug)
	t.Logf("%d subscribers caught up: %v", leaveSubscribers, held)
	if held.RSS-before.RSS > leavePeakRSS {
		t.Errorf("RSS %d MiB with %d subscribers, %d MiB above the baseline; the bound is %d MiB",
			held.RSS>>20, leaveSubscribers, (held.RSS-before.RSS)>>20, leavePeakRSS>>20)
	}
	if held.FDs < before.FDs+leaveSubscribers {
		t.Errorf("only %d descriptors with %d subscribers open (baseline %d): the subscribers were not all held", held.FDs, leaveSubscribers, before.FDs)
	}
	leave()

	left := time.Now()
	after, over := kittest.UsageBack(t, kittest.Wait{Deadline: left.Add(leaveWithin), Every: 200 * time.Millisecond, Base: before,
		Slack:  kittest.Usage{FDs: leaveSlack, Goroutines: leaveSlack, Heap: leaveLiveHeap, RSS: leavePeakRSS},
		Sample: func() kittest.Usage { return p.sample(t, debug) }})
	t.Logf("%v after they left: %v", time.Since(left).Round(time.Millisecond), after)
	for _, o := range over {
		t.Errorf("%v after the subscribers left: %s", leaveWithin, o)
	}
}

// process is the service running as a subprocess of the test.
type process struct{ *kittest.Child }

// sample reads the process's RSS and descriptors from /proc, runs a GC
// through the profiling listener at debug, then reads its goroutines and
// heap in use from /metrics.
func (p *process) sample(t testing.TB, debug string) kittest.Usage {
	t.Helper()
	var u kittest.Usage
	status, err := os.ReadFile("/proc/" + strconv.Itoa(p.Pid()) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS %q: %v", rest, err)
			}
			u.RSS = kb << 10
		}
	}
	fds, err := os.ReadDir("/proc/" + strconv.Itoa(p.Pid()) + "/fd")
	if err != nil {
		t.Fatal(err)
	}
	u.FDs = len(fds)
	if s, b := kittest.Do(t, http.MethodGet, "http://"+debug+"/debug/pprof/heap?gc=1", nil, nil); s != http.StatusOK {
		t.Fatalf("forcing a GC: %d %.200s", s, b)
	}
	_, metrics := kittest.Do(t, http.MethodGet, p.URL()+"/metrics", nil, nil)
	u.Goroutines = int(metric(t, metrics, "go_goroutines"))
	u.Heap = int64(metric(t, metrics, "go_memstats_heap_inuse_bytes"))
	return u
}

// metric returns the value of the unlabelled sample name in a Prometheus
// text exposition.
func metric(t testing.TB, exposition []byte, name string) float64 {
	t.Helper()
	sc := bufio.NewScanner(bytes.NewReader(exposition))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil {
				t.Fatalf("%s %q: %v", name, rest, err)
			}
			return v
		}
	}
	t.Fatalf("/metrics has no %s", name)
	return 0
}
