package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// runMainEnv makes the test binary run the service's main instead of its
// tests (TestMain): TestClientsLeaveNothingBehind starts the service as
// a process of its own, whose memory and descriptors it reads from
// /proc, without a build step.
const runMainEnv = "NO_KURRENTDB_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

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
	addr, debug := freeAddr(t), freeAddr(t)
	p := startProcess(t, map[string]string{
		"DATABASE_URL": url, "DATABASE_SCHEMA": schema, "DATABASE_MAX_CONNS": "8", "ADDR": addr, "DEBUG_ADDR": debug,
		"GODEBUG": "madvdontneed=1", "LOG_LEVEL": "warn",
	})
	base := "http://" + addr

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
	subscribe(t, base, 16)()
	time.Sleep(500 * time.Millisecond)
	before := p.sample(t, debug)
	t.Logf("baseline: %v", before)

	leave := subscribe(t, base, leaveSubscribers)
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

// freeAddr returns a loopback address with a port free at the moment.
func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// process is the service running as a subprocess of the test.
type process struct {
	pid  int
	addr string // its ADDR
}

// startProcess runs this test binary as the service (runMainEnv) with
// env added to the test's environment, waits until /readyz answers 200,
// and stops it with SIGTERM when the test ends. Its log is shown if the
// test fails.
func startProcess(t testing.TB, env map[string]string) *process {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var logs syncBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("service log:\n%s", logs.String())
		}
	})
	ready := "http://" + env["ADDR"] + "/readyz"
	for deadline := time.Now().Add(30 * time.Second); ; {
		select {
		case err := <-done:
			t.Fatalf("the service exited before it was ready (%v):\n%s", err, logs.String())
		default:
		}
		resp, err := http.Get(ready)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return &process{pid: cmd.Process.Pid, addr: env["ADDR"]}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the service was not ready within 30 s (%v):\n%s", err, logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// sample reads the process's RSS and descriptors from /proc, runs a GC
// through the profiling listener at debug, then reads its goroutines and
// heap in use from /metrics.
func (p *process) sample(t testing.TB, debug string) kittest.Usage {
	t.Helper()
	var u kittest.Usage
	status, err := os.ReadFile("/proc/" + strconv.Itoa(p.pid) + "/status")
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
	fds, err := os.ReadDir("/proc/" + strconv.Itoa(p.pid) + "/fd")
	if err != nil {
		t.Fatal(err)
	}
	u.FDs = len(fds)
	if s, b := kittest.Do(t, http.MethodGet, "http://"+debug+"/debug/pprof/heap?gc=1", nil, nil); s != http.StatusOK {
		t.Fatalf("forcing a GC: %d %.200s", s, b)
	}
	_, metrics := kittest.Do(t, http.MethodGet, "http://"+p.addr+"/metrics", nil, nil)
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

// subscribe opens n subscriptions from the start at base, each on its own
// connection, waits until every one has received caught-up, and returns
// the function that makes them all leave (closing their connections) and
// waits until their readers ended.
func subscribe(t testing.TB, base string, n int) (leave func()) {
	t.Helper()
	tr := &http.Transport{DisableKeepAlives: true}
	client := &http.Client{Transport: tr}
	ctx, cancel := context.WithCancel(context.Background())
	caughtUp := make(chan error, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/subscribe", nil)
			resp, err := client.Do(req)
			if err != nil {
				caughtUp <- err
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
				caughtUp <- fmt.Errorf("status %d: %s", resp.StatusCode, b)
				return
			}
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			found := false
			for !found && sc.Scan() {
				found = strings.HasPrefix(sc.Text(), "event: caught-up")
			}
			if !found {
				caughtUp <- fmt.Errorf("stream ended before caught-up: %v", sc.Err())
				return
			}
			caughtUp <- nil
			for sc.Scan() { // hold the stream until the test leaves
			}
		})
	}
	leave = func() {
		cancel()
		wg.Wait()
		tr.CloseIdleConnections()
	}
	t.Cleanup(leave)
	timeout := time.After(60 * time.Second)
	for range n {
		select {
		case err := <-caughtUp:
			if err != nil {
				leave()
				t.Fatalf("a subscriber: %v", err)
			}
		case <-timeout:
			leave()
			t.Fatalf("%d subscribers did not all catch up within 60 s", n)
		}
	}
	return leave
}

// syncBuffer is a bytes.Buffer safe for the process's two writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
