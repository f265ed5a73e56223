package cost

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ClockTick is the unit of /proc/<pid>/stat's CPU times: USER_HZ, fixed
// at 100 per second by the Linux ABI on every architecture Go supports
// (sysconf(_SC_CLK_TCK) returns it; Go cannot call sysconf without cgo).
const ClockTick = 100

// procRoot is /proc; tests may point it elsewhere.
var procRoot = "/proc"

// Stat is the part of /proc/<pid>/stat this package reads.
type Stat struct {
	// PID and PPID are the process and its parent.
	PID, PPID int
	// Comm is the command name (at most 15 bytes, as the kernel keeps it).
	Comm string
	// User and System are the process's own CPU times (utime, stime);
	// Children those of its reaped children (cutime + cstime).
	User, System, Children time.Duration
}

// Self is the process's own CPU time, utime+stime.
func (s Stat) Self() time.Duration { return s.User + s.System }

// ErrNoProcess is returned for a pid that does not exist (any more).
var ErrNoProcess = errors.New("no such process")

// ReadStat reads /proc/<pid>/stat.
func ReadStat(pid int) (Stat, error) {
	b, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "stat"))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return Stat{}, fmt.Errorf("pid %d: %w", pid, ErrNoProcess)
		}
		return Stat{}, err
	}
	return parseStat(string(b))
}

// parseStat parses one /proc/<pid>/stat line. The command name is in
// parentheses and may hold spaces and parentheses itself, so the fields
// are counted from the last ')'.
func parseStat(s string) (Stat, error) {
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return Stat{}, fmt.Errorf("unreadable stat line %q", s)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(s[:open]))
	if err != nil {
		return Stat{}, fmt.Errorf("unreadable stat line %q", s)
	}
	f := strings.Fields(s[end+1:])
	// f[0] is field 3 (state): ppid is field 4, utime..cstime 14..17.
	if len(f) < 15 {
		return Stat{}, fmt.Errorf("short stat line %q", s)
	}
	var n [5]int64
	for i, idx := range []int{1, 11, 12, 13, 14} {
		if n[i], err = strconv.ParseInt(f[idx], 10, 64); err != nil {
			return Stat{}, fmt.Errorf("stat field %d: %w", idx+3, err)
		}
	}
	tick := func(v int64) time.Duration { return time.Duration(v) * time.Second / ClockTick }
	return Stat{PID: pid, PPID: int(n[0]), Comm: s[open+1 : end], User: tick(n[1]), System: tick(n[2]), Children: tick(n[3] + n[4])}, nil
}

// All reads the stat of every process, by pid. Processes that exit while
// it reads are left out.
func All() (map[int]Stat, error) {
	ents, err := os.ReadDir(procRoot)
	if err != nil {
		return nil, err
	}
	out := make(map[int]Stat, len(ents))
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := ReadStat(pid); err == nil {
			out[pid] = st
		}
	}
	return out, nil
}

// Cmdline returns the process's command line, arguments joined by spaces.
func Cmdline(pid int) string {
	b, _ := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "cmdline"))
	return strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
}

// Alive reports whether pid exists.
func Alive(pid int) bool {
	_, err := ReadStat(pid)
	return err == nil
}

// ReadPIDFile returns the pid on the first line of path (a postmaster.pid
// holds more lines after it) when that process is alive, else 0.
func ReadPIDFile(path string) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(sc.Text()))
	if err != nil || pid <= 0 || !Alive(pid) {
		return 0
	}
	return pid
}

// MachineBusy returns the CPU time every core of the machine has spent
// busy since boot (the first line of /proc/stat, less idle and iowait):
// the difference of two readings over the wall time between them is the
// cores the whole machine used, this measurement's processes and
// everybody else's.
func MachineBusy() (time.Duration, error) {
	b, err := os.ReadFile(filepath.Join(procRoot, "stat"))
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	fs := strings.Fields(line)
	if len(fs) < 6 || fs[0] != "cpu" {
		return 0, fmt.Errorf("%s/stat: unexpected first line %q", procRoot, line)
	}
	var busy int64
	// user nice system idle iowait irq softirq steal (guest time is
	// already in user).
	for i, f := range fs[1:min(len(fs), 9)] {
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s/stat: %q: %w", procRoot, f, err)
		}
		if i != 3 && i != 4 {
			busy += v
		}
	}
	return time.Duration(busy) * time.Second / ClockTick, nil
}
