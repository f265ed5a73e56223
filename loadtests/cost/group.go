package cost

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Group is a set of processes whose CPU time is counted together: its
// Roots and all their descendants.
type Group struct {
	// Name labels the group ("postgres", "beam.smp", "java", "service").
	Name string `json:"name"`
	// Roots are the root processes; none when the group was not found.
	Roots []int `json:"pids"`
	// Source says how the roots were found ("pid file .stack/pg/postmaster.pid",
	// "/proc scan for comm beam.smp", "listener on :8082") or why not.
	Source string `json:"source"`
	// Own counts the roots' own CPU only: neither their living
	// descendants nor their reaped children. The load driver is such a
	// group: the services it starts are its children, and their CPU is
	// theirs.
	Own bool `json:"own,omitempty"`
}

// Self is a group of this process alone (Own): the load driver's CPU.
func Self(name string) Group {
	return Group{Name: name, Roots: []int{os.Getpid()}, Source: "this process (/proc/self), without its children", Own: true}
}

// Found reports whether the group has a root process.
func (g Group) Found() bool { return len(g.Roots) > 0 }

// Set is the groups measured together.
type Set []Group

// Sample is the CPU time used so far by each group of a Set, by name.
// Groups without a root are absent.
type Sample map[string]time.Duration

// Sample reads /proc once and returns every group's CPU time so far.
func (s Set) Sample() Sample {
	procs, err := All()
	out := Sample{}
	if err != nil {
		return out
	}
	children := map[int][]int{}
	for pid, st := range procs {
		children[st.PPID] = append(children[st.PPID], pid)
	}
	for _, g := range s {
		if !g.Found() {
			continue
		}
		var total time.Duration
		seen := map[int]bool{}
		var walk func(pid int, root bool)
		walk = func(pid int, root bool) {
			if seen[pid] {
				return
			}
			seen[pid] = true
			st, ok := procs[pid]
			if !ok {
				return
			}
			total += st.Self()
			if g.Own {
				return
			}
			if root {
				// Reaped children's CPU lands here.
				total += st.Children
			}
			for _, c := range children[pid] {
				walk(c, false)
			}
		}
		for _, r := range g.Roots {
			walk(r, true)
		}
		out[g.Name] = total
	}
	return out
}

// Sub returns the CPU-seconds each group used between before and s, for
// the groups present in both. A group's sample can shrink: a descendant
// that exited between the samples and has not been reaped by a root yet
// (a Postgres backend the postmaster has not waited for) counts in
// neither the living processes nor the roots' reaped children. Such a
// group used at least nothing: its figure is 0, not negative (a negative
// Postgres figure made the total lower than the service's own in a test
// run while other tests opened and closed connections).
func (s Sample) Sub(before Sample) map[string]float64 {
	out := map[string]float64{}
	for name, after := range s {
		if b, ok := before[name]; ok {
			out[name] = math.Round(max(after-b, 0).Seconds()*1000) / 1000
		}
	}
	return out
}

// Processes lists the pid of every process of the group (roots and living
// descendants) with its command name, for a report that says what was
// counted.
func (g Group) Processes() []string {
	procs, err := All()
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for pid, st := range procs {
		children[st.PPID] = append(children[st.PPID], pid)
	}
	var out []string
	var walk func(int)
	walk = func(pid int) {
		st, ok := procs[pid]
		if !ok {
			return
		}
		out = append(out, fmt.Sprintf("%d %s", pid, st.Comm))
		for _, c := range children[pid] {
			walk(c)
		}
	}
	for _, r := range g.Roots {
		walk(r)
	}
	return out
}

// FindRoots scans /proc for processes whose command name is comm and
// whose command line contains every word of want, keeping only the roots
// (those whose parent has another command name): a postmaster, not its
// backends.
func FindRoots(comm string, want ...string) []int {
	procs, err := All()
	if err != nil {
		return nil
	}
	var out []int
	for pid, st := range procs {
		if st.Comm != comm {
			continue
		}
		if p, ok := procs[st.PPID]; ok && p.Comm == comm {
			continue
		}
		cl := Cmdline(pid)
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(cl, w)
		}
		if ok {
			out = append(out, pid)
		}
	}
	slices.Sort(out)
	return out
}

// server finds a server: the pid file under stackDir first, then a /proc
// scan for comm with the words want in its command line.
func server(name, stackDir, pidFile, comm string, want ...string) Group {
	g := Group{Name: name}
	if stackDir != "" {
		p := filepath.Join(stackDir, pidFile)
		if pid := ReadPIDFile(p); pid > 0 {
			g.Roots, g.Source = []int{pid}, "pid file "+p
			return g
		}
	}
	if pids := FindRoots(comm, want...); len(pids) > 0 {
		g.Roots = pids
		g.Source = "/proc scan for " + comm
		if len(want) > 0 {
			g.Source += " running " + strings.Join(want, " ")
		}
		return g
	}
	g.Source = fmt.Sprintf("not found (no live pid in %s, no %s process)", filepath.Join(stackDir, pidFile), comm)
	return g
}

// Postgres finds the postmaster: the pid file stackDir/pg/postmaster.pid,
// else the postgres process whose parent is not postgres. backend, when
// above 0, is a backend's pid (SELECT pg_backend_pid() on the database
// measured): its parent is the postmaster of that very server, which
// beats both.
func Postgres(stackDir string, backend int) Group {
	if backend > 0 {
		if st, err := ReadStat(backend); err == nil && st.Comm == "postgres" {
			if pm, err := ReadStat(st.PPID); err == nil && pm.Comm == "postgres" {
				return Group{Name: "postgres", Roots: []int{pm.PID}, Source: fmt.Sprintf("parent of backend %d (pg_backend_pid)", backend)}
			}
		}
	}
	return server("postgres", stackDir, filepath.Join("pg", "postmaster.pid"), "postgres")
}

// RabbitMQ finds RabbitMQ's Erlang VM (beam.smp).
func RabbitMQ(stackDir string) Group {
	return server("beam.smp", stackDir, filepath.Join("rabbitmq", "rabbitmq.pid"), "beam.smp", "rabbit")
}

// Kafka finds Kafka's JVM.
func Kafka(stackDir string) Group {
	return server("java", stackDir, filepath.Join("kafka", "kafka.pid"), "java", "kafka.Kafka")
}

// FerretDB finds FerretDB's process (the stack's ferretdb binary, the
// MongoDB stand-in of the native stack), named "ferretdb".
func FerretDB(stackDir string) Group {
	return server("ferretdb", stackDir, filepath.Join("ferretdb", "ferretdb.pid"), "ferretdb")
}

// Redis finds redis-server, named "redis".
func Redis(stackDir string) Group {
	return server("redis", stackDir, filepath.Join("redis", "redis.pid"), "redis-server")
}

// Process is a group of one known process (a service the driver started),
// or the process listening on port when pid is 0.
func Process(name string, pid, port int) Group {
	g := Group{Name: name}
	if pid > 0 && Alive(pid) {
		g.Roots, g.Source = []int{pid}, "started by the driver"
		return g
	}
	if pid := ListenerPID(port); pid > 0 {
		g.Roots, g.Source = []int{pid}, fmt.Sprintf("listener on :%d", port)
		return g
	}
	g.Source = fmt.Sprintf("not found (nothing of ours listens on :%d)", port)
	return g
}

// ListenerPID returns the pid of the process with a TCP socket listening
// on port (IPv4 or IPv6), or 0: the socket's inode from /proc/net/tcp*,
// then the process holding it among /proc/*/fd.
func ListenerPID(port int) int {
	inodes := map[string]bool{}
	for _, f := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile(filepath.Join(procRoot, "net", f))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fs := strings.Fields(line)
			// sl local rem st tx:rx tr:when retrnsmt uid timeout inode
			if len(fs) < 10 || fs[3] != "0A" {
				continue
			}
			_, hexPort, ok := strings.Cut(fs[1], ":")
			if !ok {
				continue
			}
			if p, err := strconv.ParseInt(hexPort, 16, 32); err == nil && int(p) == port {
				inodes["socket:["+fs[9]+"]"] = true
			}
		}
	}
	if len(inodes) == 0 {
		return 0
	}
	ents, err := os.ReadDir(procRoot)
	if err != nil {
		return 0
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		dir := filepath.Join(procRoot, e.Name(), "fd")
		fds, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			if l, err := os.Readlink(filepath.Join(dir, fd.Name())); err == nil && inodes[l] {
				return pid
			}
		}
	}
	return 0
}

// PerThousand returns CPU-seconds per 1,000 items, or NaN for no items.
func PerThousand(cpuSeconds float64, items int64) float64 {
	if items <= 0 {
		return math.NaN()
	}
	return math.Round(cpuSeconds/float64(items)*1000*1e4) / 1e4
}
