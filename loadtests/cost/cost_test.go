package cost

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/versions"
)

func TestParseStat(t *testing.T) {
	// A command name with a space and a parenthesis, as the kernel shows it.
	line := "4612 (post gres) x) S 4611 4611 4611 0 -1 4194368 100 0 0 0 250 75 3 7 20 0 1 0 4567 1000 10 18446744073709551615\n"
	st, err := parseStat(line)
	if err != nil {
		t.Fatal(err)
	}
	want := Stat{PID: 4612, PPID: 4611, Comm: "post gres) x", User: 2500 * time.Millisecond, System: 750 * time.Millisecond, Children: 100 * time.Millisecond}
	if st != want {
		t.Fatalf("parseStat = %+v, want %+v", st, want)
	}
	if _, err := parseStat("garbage"); err == nil {
		t.Fatal("parseStat accepted garbage")
	}
	if _, err := ReadStat(-5); err == nil {
		t.Fatal("ReadStat of a missing pid succeeded")
	}
}

// busy burns CPU for about d.
func busy(d time.Duration) {
	x := 0
	for start := time.Now(); time.Since(start) < d; {
		for i := range 100000 {
			x += i
		}
	}
	_ = x
}

// TestSampleCountsSelfAndReapedChildren checks both halves of a group's
// CPU: the root's own, and a child's once it exited and was reaped.
func TestSampleCountsSelfAndReapedChildren(t *testing.T) {
	set := Set{{Name: "test", Roots: []int{os.Getpid()}}, {Name: "missing"}}
	before := set.Sample()
	if _, ok := before["missing"]; ok {
		t.Fatal("a group without roots was sampled")
	}
	r0 := selfCPU(t)
	busy(300 * time.Millisecond)
	own := selfCPU(t) - r0
	mid := set.Sample()
	// Ticks are 10 ms, and the two readings are not simultaneous.
	if used := mid.Sub(before)["test"]; used < own-0.03 || used <= 0 {
		t.Fatalf("getrusage says this process used %.3f CPU-s, the group gained %.3f", own, used)
	}
	cmd := exec.Command("sh", "-c", "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done")
	if err := cmd.Run(); err != nil {
		t.Skipf("no sh to run a child: %v", err)
	}
	child := (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
	used := set.Sample().Sub(mid)["test"]
	// Ticks are 10 ms; this process's own threads add to the figure.
	if used < child-0.03 {
		t.Fatalf("reaped child used %.3f CPU-s, the group gained only %.3f", child, used)
	}
}

// selfCPU is this process's CPU-seconds per getrusage.
func selfCPU(t testing.TB) float64 {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

func TestListenerPID(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	if got := ListenerPID(port); got != os.Getpid() {
		t.Fatalf("ListenerPID(%d) = %d, want this process %d", port, got, os.Getpid())
	}
	g := Process("svc", 0, port)
	if !g.Found() || g.Roots[0] != os.Getpid() {
		t.Fatalf("Process by port = %+v", g)
	}
	ln.Close()
	if g := Process("svc", 0, port); g.Found() {
		t.Fatalf("a closed port still has a listener: %+v", g)
	}
}

// TestPostgres finds the stack's postmaster from a backend of the real
// server, and by a /proc scan without one; both must agree.
func TestPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: needs the stack's Postgres")
	}
	url := os.Getenv("DATABASE_URL")
	if url == "" {
		url = versions.DefaultPostgresURL
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("no Postgres: set DATABASE_URL, or make up (-short skips this test): %v", err)
	}
	defer conn.Close(ctx)
	var backend int
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&backend); err != nil {
		t.Fatal(err)
	}
	if !Alive(backend) {
		t.Skipf("backend %d is not on this machine (Postgres in a container?)", backend)
	}
	g := Postgres("", backend)
	if !g.Found() {
		t.Fatalf("postmaster not found from backend %d: %s", backend, g.Source)
	}
	scan := Postgres(t.TempDir(), 0)
	if !scan.Found() || !contains(scan.Roots, g.Roots[0]) {
		t.Fatalf("/proc scan found %v (%s), the backend's parent is %v", scan.Roots, scan.Source, g.Roots)
	}
	procs := g.Processes()
	if len(procs) < 2 {
		t.Fatalf("postmaster's tree has %v", procs)
	}
	s := Set{g}.Sample()
	if s["postgres"] <= 0 {
		t.Fatalf("postgres sample %v", s)
	}
}

func contains(a []int, v int) bool {
	for _, x := range a {
		if x == v {
			return true
		}
	}
	return false
}

func TestPerThousand(t *testing.T) {
	if got := PerThousand(2, 4000); got != 0.5 {
		t.Fatalf("PerThousand(2, 4000) = %v", got)
	}
	if got := PerThousand(1, 0); got == got {
		t.Fatalf("PerThousand(1, 0) = %v, want NaN", got)
	}
}

// TestSubNeverNegative: a group whose sample shrank (a descendant exited
// unreaped between the samples) used 0 CPU-seconds, not a negative amount.
func TestSubNeverNegative(t *testing.T) {
	before := Sample{"postgres": 3 * time.Second, "service": time.Second}
	after := Sample{"postgres": 2 * time.Second, "service": 1500 * time.Millisecond}
	got := after.Sub(before)
	if got["postgres"] != 0 || got["service"] != 0.5 {
		t.Errorf("Sub = %v, want postgres 0, service 0.5", got)
	}
}

// TestSelfLeavesChildrenOut: the driver's own group counts this process's
// CPU and not that of a child it started and reaped (a service the
// launcher stopped).
func TestSelfLeavesChildrenOut(t *testing.T) {
	set := Set{Self("driver"), {Name: "tree", Roots: []int{os.Getpid()}}}
	before := set.Sample()
	cmd := exec.Command("sh", "-c", "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done")
	if err := cmd.Run(); err != nil {
		t.Skipf("no sh to run a child: %v", err)
	}
	child := (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
	if child < 0.1 {
		t.Skipf("the child used only %.3f CPU-s: too little to tell apart", child)
	}
	used := set.Sample().Sub(before)
	if used["tree"] < child-0.03 {
		t.Fatalf("the whole tree gained %.3f CPU-s, the child used %.3f", used["tree"], child)
	}
	if used["driver"] > child/2 {
		t.Fatalf("Self gained %.3f CPU-s while only the child (%.3f) worked", used["driver"], child)
	}
}

// TestMachineBusy: the machine's busy time grows at least by what this
// process burns meanwhile.
func TestMachineBusy(t *testing.T) {
	b0, err := MachineBusy()
	if err != nil {
		t.Fatal(err)
	}
	r0 := selfCPU(t)
	busy(200 * time.Millisecond)
	own := selfCPU(t) - r0
	b1, err := MachineBusy()
	if err != nil {
		t.Fatal(err)
	}
	if got := (b1 - b0).Seconds(); got < own-0.03 {
		t.Fatalf("the machine was busy %.3f CPU-s while this process alone used %.3f", got, own)
	}
}

// TestSpecialistFinders: FerretDB and Redis are found by the pid file the
// stack writes under its folder first (here, one naming this process),
// named by their process; without one a /proc scan looks for their
// command, and says what it did or why it found nothing.
func TestSpecialistFinders(t *testing.T) {
	dir := t.TempDir()
	for name, find := range map[string]func(string) Group{"ferretdb": FerretDB, "redis": Redis} {
		sub := map[string]string{"ferretdb": "ferretdb/ferretdb.pid", "redis": "redis/redis.pid"}[name]
		path := filepath.Join(dir, sub)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		g := find(dir)
		if g.Name != name || len(g.Roots) != 1 || g.Roots[0] != os.Getpid() || !strings.Contains(g.Source, sub) {
			t.Errorf("%s from its pid file: %+v", name, g)
		}
		if g := find(t.TempDir()); g.Name != name || g.Source == "" {
			t.Errorf("%s by a /proc scan: %+v", name, g)
		}
	}
}
