package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/cache/conformance"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// TestLockHolderProcess is the holder process TestLockHolderKilled
// starts and kills; it skips in an ordinary run.
func TestLockHolderProcess(t *testing.T) { conformance.LockHolderProcess(t) }

// TestLockHolderKilled: a process holding a lock with a 1.5 s lease is
// killed. The lease row is not tied to any session of the dead client
// (nor of the instance it went through): the lock is free when the lease
// ends, the successor's token (from the sequence) is higher, and the
// dead holder's token is refused.
func TestLockHolderKilled(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	a, b := start(t, cfg), start(t, cfg)
	conformance.KillLockHolder(t, "TestLockHolderProcess", a.URL(), b.URL(), 1500*time.Millisecond)
}

// TestLockOutlivesItsInstance: the instance through which a lock was
// acquired stops; the lease row keeps the lock held (the other instance
// refuses it) until the lease ends, where a session advisory lock held by
// that instance would have been released with its connection.
func TestLockOutlivesItsInstance(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	a, b := start(t, cfg), start(t, cfg)
	name := kittest.UniqueName(t, "outlives")
	l := conformance.MustAcquire(t, a.URL(), name, "holder", 2*time.Second)
	a.Stop()
	if st, _, _ := conformance.Acquire(t, b.URL(), name, "other", time.Second); st != http.StatusConflict && time.Now().Before(l.ExpiresAt) {
		t.Errorf("acquire on the other instance once the granting one stopped: %d, want 409 until the lease ends", st)
	}
	kittest.Eventually(t, 10*time.Second, "the lease to end", func() bool {
		st, _, _ := conformance.Acquire(t, b.URL(), name, "other", time.Second)
		return st == http.StatusCreated
	})
	if time.Now().Before(l.ExpiresAt.Add(-50 * time.Millisecond)) {
		t.Errorf("the lock was free before its lease ended (%v)", l.ExpiresAt)
	}
}

// pgServer is a private Postgres of one test: its own data directory and
// port, never the shared stack's server, so that it can be crashed and
// started again. As root (initdb and postgres refuse root) its commands
// run as the postgres user, as scripts/stack.sh does.
type pgServer struct {
	bin, dir, data, log string
	port                int
	asUser              bool
}

// newPGServer initdbs and starts a private server, stopped and removed
// when the test ends; it skips when no Postgres binaries are installed.
func newPGServer(t *testing.T) *pgServer {
	t.Helper()
	initdb, err := exec.LookPath("initdb")
	if err != nil {
		t.Skip("no initdb on PATH: the private Postgres this test crashes cannot start")
	}
	bin := filepath.Dir(initdb)
	if real, err := filepath.EvalSymlinks(initdb); err == nil {
		bin = filepath.Dir(real)
	}
	dir, err := os.MkdirTemp("", "no-redis-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	_, port, _ := net.SplitHostPort(kittest.ClosedAddr(t))
	p := &pgServer{bin: bin, dir: dir, data: filepath.Join(dir, "data"), log: filepath.Join(dir, "postgres.log"), asUser: os.Geteuid() == 0}
	p.port, _ = strconv.Atoi(port)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if p.asUser {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Skipf("running as root, the private Postgres needs the postgres user: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	p.run(t, "initdb", "-D", p.data, "-U", "postgres", "--auth=trust", "--encoding=UTF8", "--no-locale")
	conf := fmt.Sprintf("\nlisten_addresses = '127.0.0.1'\nport = %d\nunix_socket_directories = ''\nmax_connections = 50\nshared_buffers = 32MB\nfsync = off\n", p.port)
	f, err := os.OpenFile(filepath.Join(p.data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteString(conf)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	p.Start(t)
	t.Cleanup(func() { _, _ = p.exec("pg_ctl", "-D", p.data, "-m", "immediate", "-w", "-t", "60", "stop") })
	return p
}

// exec runs one of the server's programs, as the postgres user when we
// are root.
func (p *pgServer) exec(prog string, args ...string) ([]byte, error) {
	argv := append([]string{filepath.Join(p.bin, prog)}, args...)
	if p.asUser {
		argv = append([]string{"runuser", "-u", "postgres", "--"}, argv...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = p.dir
	return cmd.CombinedOutput()
}

func (p *pgServer) run(t *testing.T, prog string, args ...string) {
	t.Helper()
	if out, err := p.exec(prog, args...); err != nil {
		log, _ := os.ReadFile(p.log)
		t.Fatalf("%s %v: %v\n%s\n%s", prog, args, err, out, log)
	}
}

// Start starts the server and waits until it accepts connections.
func (p *pgServer) Start(t *testing.T) {
	t.Helper()
	p.run(t, "pg_ctl", "-D", p.data, "-l", p.log, "-w", "-t", "60", "start")
}

// Crash stops the server as a crash would (pg_ctl stop -m immediate: no
// shutdown checkpoint; the next start runs crash recovery).
func (p *pgServer) Crash(t *testing.T) {
	t.Helper()
	p.run(t, "pg_ctl", "-D", p.data, "-m", "immediate", "-w", "-t", "60", "stop")
}

// URL is the server's connection string.
func (p *pgServer) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", p.port)
}

// TestPostgresCrashRoles: what a Postgres crash (a private server stopped
// with -m immediate, then started: crash recovery) does to the roles.
// While it is down: a subscription ends with "end" (reason "lost": the
// LISTEN connection died), and publishing, subscribing, acquiring and
// taking are 503s. After it: the lock is still held (cache_locks is
// WAL-logged): another owner is refused and the holder extends and
// releases it with its token, and the next token is above it (the
// sequence is logged too); the rate-limit window is lost (cache_limits
// is UNLOGGED: crash recovery empties it); subscriptions work again once
// the listener reconnected.
func TestPostgresCrashRoles(t *testing.T) {
	t.Parallel()
	pg := newPGServer(t)
	url := pg.URL()
	cfg := kittest.ReadConfig(t, readConfig, map[string]string{"DATABASE_URL": url, "DATABASE_SCHEMA": kittest.Schema(t, url)})
	base := start(t, cfg).URL()
	o := conformance.StartOutage(t, base)

	pg.Crash(t)
	o.Down(t, "Postgres")

	pg.Start(t)
	after := o.Reopen(t, 60*time.Second)
	var st int
	kittest.Eventually(t, 30*time.Second, "acquire to answer again", func() bool {
		st, _, _ = conformance.Acquire(t, base, o.Name, "after", time.Minute)
		return st != http.StatusServiceUnavailable
	})
	if st != http.StatusConflict {
		t.Fatalf("acquire by another owner after the crash, the lease still running: %d, want 409 (the lease row survived)", st)
	}
	if st, _ := conformance.Extend(t, base, o.Name, "before", o.Held.Token, time.Minute); st != http.StatusOK {
		t.Errorf("the holder's extend after the crash: %d, want 200", st)
	}
	if st := conformance.Release(t, base, o.Name, "before", o.Held.Token); st != http.StatusNoContent {
		t.Errorf("the holder's release after the crash: %d, want 204", st)
	}
	if next := conformance.MustAcquire(t, base, o.Name, "after", time.Minute); next.Token <= o.Held.Token {
		t.Errorf("token after the crash %d, want above %d", next.Token, o.Held.Token)
	}
	o.After(t, after, "the crash")
}
