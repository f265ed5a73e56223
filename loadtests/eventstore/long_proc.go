package eventstore

import (
	"bufio"
	"errors"
	"fmt"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// procMem is one process's memory as /proc/<pid>/status reports it.
type procMem struct {
	// RSS is VmRSS, HWM is VmHWM (the peak RSS since the process started
	// or since resetPeak), both in bytes.
	RSS, HWM int64
}

// readProcMem reads VmRSS and VmHWM of pid ("self" for the bench).
func readProcMem(pid string) (procMem, error) {
	f, err := os.Open(filepath.Join("/proc", pid, "status"))
	if err != nil {
		return procMem{}, err
	}
	defer f.Close()
	var m procMem
	found := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || (k != "VmRSS" && k != "VmHWM") {
			continue
		}
		fs := strings.Fields(v) // "123456 kB"
		if len(fs) != 2 || fs[1] != "kB" {
			return procMem{}, fmt.Errorf("/proc/%s/status: %s: %q", pid, k, v)
		}
		n, err := strconv.ParseInt(fs[0], 10, 64)
		if err != nil {
			return procMem{}, fmt.Errorf("/proc/%s/status: %s: %w", pid, k, err)
		}
		if k == "VmRSS" {
			m.RSS = n << 10
		} else {
			m.HWM = n << 10
		}
		found++
	}
	if err := sc.Err(); err != nil {
		return procMem{}, err
	}
	if found != 2 {
		return procMem{}, fmt.Errorf("/proc/%s/status has no VmRSS or VmHWM", pid)
	}
	return m, nil
}

// resetPeak resets pid's VmHWM to its current RSS (writing 5 to
// /proc/<pid>/clear_refs, Linux 4.0+), so that the VmHWM read after an
// operation is that operation's peak.
func resetPeak(pid string) error {
	return os.WriteFile(filepath.Join("/proc", pid, "clear_refs"), []byte("5"), 0)
}

// pidOfPort finds the process listening on TCP port on this machine:
// the socket's inode from /proc/net/tcp and tcp6 (state 0A, LISTEN),
// then the process holding it among /proc/<pid>/fd. It fails for a
// process of another user, or a port served from another machine.
func pidOfPort(port int) (string, error) {
	want := fmt.Sprintf(":%04X", port)
	var inodes []string
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(table)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fs := strings.Fields(line)
			if len(fs) > 9 && strings.HasSuffix(fs[1], want) && fs[3] == "0A" {
				inodes = append(inodes, "socket:["+fs[9]+"]")
			}
		}
	}
	if len(inodes) == 0 {
		return "", fmt.Errorf("no socket listens on port %d on this machine", port)
	}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return "", err
	}
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err != nil {
			continue
		}
		fds, err := os.ReadDir(filepath.Join("/proc", p.Name(), "fd"))
		if err != nil {
			continue // another user's process, or gone
		}
		for _, fd := range fds {
			link, err := os.Readlink(filepath.Join("/proc", p.Name(), "fd", fd.Name()))
			if err == nil && (link == inodes[0] || (len(inodes) > 1 && link == inodes[1])) {
				return p.Name(), nil
			}
		}
	}
	return "", fmt.Errorf("the process listening on port %d is not readable here (another user's?)", port)
}

// servicePID is the pid of the service at base URL u, found by its
// port.
func servicePID(u string) (string, error) {
	pu, err := url.Parse(u)
	if err != nil {
		return "", err
	}
	port, err := strconv.Atoi(pu.Port())
	if err != nil {
		return "", fmt.Errorf("%s names no port", u)
	}
	if h := pu.Hostname(); h != "localhost" && h != "127.0.0.1" && h != "::1" {
		return "", fmt.Errorf("%s is not on this machine: its memory is not readable here", u)
	}
	return pidOfPort(port)
}

// memProbe measures one operation's memory: the service's RSS before and
// after and its peak (VmHWM after a reset), and the bench's own peak RSS
// and bytes allocated.
type memProbe struct {
	pid        string
	before     procMem
	alloc      uint64
	serviceErr error
	selfErr    error
}

// startMem resets the peaks and takes the "before" readings; pid "" (or
// pidErr) means the service's memory is not measured.
func startMem(pid string, pidErr error) *memProbe {
	m := &memProbe{pid: pid, serviceErr: pidErr}
	if pid == "" && pidErr == nil {
		m.serviceErr = errors.New("no service process")
	}
	if m.serviceErr == nil {
		if m.serviceErr = resetPeak(pid); m.serviceErr == nil {
			m.before, m.serviceErr = readProcMem(pid)
		}
	}
	m.selfErr = resetPeak("self")
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m.alloc = ms.TotalAlloc
	return m
}

// finish writes the readings into metrics (MB): service_rss_before_mb,
// service_rss_after_mb, service_rss_peak_mb, bench_rss_peak_mb and
// bench_alloc_mb; a reading that failed is left out, and its reason
// returned for the run's notes.
func (m *memProbe) finish(metrics map[driver.Metric]float64) []string {
	var why []string
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	metrics[MetricBenchAllocMB] = bytesMB(int64(ms.TotalAlloc - m.alloc))
	if m.serviceErr == nil {
		after, err := readProcMem(m.pid)
		if err != nil {
			m.serviceErr = err
		} else {
			metrics[MetricServiceRSSBeforeMB] = bytesMB(m.before.RSS)
			metrics[MetricServiceRSSAfterMB] = bytesMB(after.RSS)
			metrics[MetricServiceRSSPeakMB] = bytesMB(after.HWM)
		}
	}
	if m.serviceErr != nil {
		why = append(why, "service memory not measured: "+m.serviceErr.Error())
	}
	if m.selfErr == nil {
		if self, err := readProcMem("self"); err == nil {
			metrics[MetricBenchRSSPeakMB] = bytesMB(self.HWM)
		} else {
			m.selfErr = err
		}
	}
	if m.selfErr != nil {
		why = append(why, "bench peak memory not measured: "+m.selfErr.Error())
	}
	return why
}

func bytesMB(b int64) float64 { return round2(float64(b) / (1 << 20)) }
