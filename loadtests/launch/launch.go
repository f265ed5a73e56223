package launch

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Launcher builds and runs services. Its methods are safe for concurrent
// use.
type Launcher struct {
	root   string
	binDir string
	logDir string

	mu    sync.Mutex
	built map[string]bool
	procs map[string]*Proc
}

// Proc is a service started by a Launcher.
type Proc struct {
	// Name is the service's directory under services/.
	Name string
	// Port is the port it listens on.
	Port int
	// Env is the environment it was started with, beyond the driver's own.
	Env map[string]string
	// Log is its output file.
	Log string

	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// New returns a Launcher for the repository at root; binaries go to a new
// temporary directory, logs to logDir (created).
func New(root, logDir string) (*Launcher, error) {
	bin, err := os.MkdirTemp("", "wpe-loadtests-bin-")
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, err
	}
	return &Launcher{root: root, binDir: bin, logDir: logDir, built: map[string]bool{}, procs: map[string]*Proc{}}, nil
}

// Root finds the repository root (the directory holding go.work) from the
// working directory up.
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.work not found above the working directory: run from the repository")
		}
		dir = parent
	}
}

// Build compiles the named services not built yet, in one go build.
func (l *Launcher) Build(ctx context.Context, names ...string) error {
	l.mu.Lock()
	var todo []string
	for _, n := range names {
		if !l.built[n] {
			todo = append(todo, "./services/"+n)
		}
	}
	l.mu.Unlock()
	if len(todo) == 0 {
		return nil
	}
	args := append([]string{"build", "-o", l.binDir + string(os.PathSeparator)}, todo...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = l.root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("go build %s: %w\n%s", strings.Join(todo, " "), err, out)
	}
	l.mu.Lock()
	for _, n := range names {
		l.built[n] = true
	}
	l.mu.Unlock()
	return nil
}

// Running returns the process started for name, or nil.
func (l *Launcher) Running(name string) *Proc {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.procs[name]
	if p != nil {
		select {
		case <-p.done:
			return nil
		default:
		}
	}
	return p
}

// Start builds (if needed) and starts name on port with env added to the
// driver's environment, then waits up to readyTimeout for
// http://127.0.0.1:port/readyz to answer 200. A process of the same name
// started earlier must be stopped first. A name "service@instance" starts
// one more instance of service under a name of its own (the cache pair
// runs several instances of each side).
func (l *Launcher) Start(ctx context.Context, name string, port int, env map[string]string, readyTimeout time.Duration) (*Proc, error) {
	return l.start(ctx, name, port, env, probe{"/readyz", readyTimeout})
}

// StartLive is Start waiting for /healthz instead of /readyz: the process
// serves HTTP, ready or not. A hot standby (a second no-kafka instance on
// a slot another one streams) is live and answers 503 on /readyz until it
// takes over.
func (l *Launcher) StartLive(ctx context.Context, name string, port int, env map[string]string, timeout time.Duration) (*Proc, error) {
	return l.start(ctx, name, port, env, probe{"/healthz", timeout})
}

// probe is what start waits for: path answering 200, for at most
// timeout.
type probe struct {
	path    string
	timeout time.Duration
}

// start is Start and StartLive: it waits for ready's path to answer 200.
func (l *Launcher) start(ctx context.Context, name string, port int, env map[string]string, ready probe) (*Proc, error) {
	path, readyTimeout := ready.path, ready.timeout
	if l.Running(name) != nil {
		return nil, fmt.Errorf("%s is already running", name)
	}
	bin, _, _ := strings.Cut(name, "@")
	if err := l.Build(ctx, bin); err != nil {
		return nil, err
	}
	logPath := filepath.Join(l.logDir, name+".log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(logf, "\n=== %s start %s env %v\n", time.Now().Format(time.RFC3339), name, env)
	cmd := exec.Command(filepath.Join(l.binDir, bin))
	cmd.Dir = l.root
	// STATS_RESET: every round starts with POST /stats/reset, which a
	// service refuses without it. env may still override it.
	cmd.Env = append(os.Environ(), fmt.Sprintf("ADDR=127.0.0.1:%d", port), "STATS_RESET=true")
	for _, k := range sortedKeys(env) {
		cmd.Env = append(cmd.Env, k+"="+env[k])
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	p := &Proc{Name: name, Port: port, Env: maps.Clone(env), Log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); logf.Close(); close(p.done) }()
	l.mu.Lock()
	l.procs[name] = p
	l.mu.Unlock()

	if err := waitReady(ctx, p, path, readyTimeout); err != nil {
		_ = l.Stop(name, 10*time.Second)
		return nil, fmt.Errorf("%s did not become ready: %w (log: %s)\n%s", name, err, logPath, Tail(logPath, 15))
	}
	return p, nil
}

// waitReady waits up to timeout for p's path to answer 200.
func waitReady(ctx context.Context, p *Proc, path string, timeout time.Duration) error {
	url := fmt.Sprintf("http://127.0.0.1:%d%s", p.Port, path)
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(timeout)
	last := errors.New("no answer yet")
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			return fmt.Errorf("exited: %v", p.err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		resp, err := client.Get(url)
		if err != nil {
			last = err
			continue
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return nil
		}
		last = fmt.Errorf("%s answered %d", path, resp.StatusCode)
	}
	return fmt.Errorf("after %s: %w", timeout, last)
}

// Stop sends SIGTERM to the process started for name and waits up to
// grace for it to exit, then kills it. Stopping a name not running is a
// no-op.
func (l *Launcher) Stop(name string, grace time.Duration) error {
	p := l.take(name)
	if p == nil {
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s did not stop within %s after SIGTERM; killed", name, grace)
	}
}

// Kill ends the process started for name with SIGKILL, as kill -9 would
// (no drain, nothing released: the scale-out scenario's fault), and
// waits for it to exit. Killing a name not running is a no-op.
func (l *Launcher) Kill(name string) error {
	p := l.take(name)
	if p == nil {
		return nil
	}
	err := p.cmd.Process.Kill()
	<-p.done
	return err
}

// take removes the process started for name from l and returns it, or
// nil when there is none or it has already exited.
func (l *Launcher) take(name string) *Proc {
	l.mu.Lock()
	p := l.procs[name]
	delete(l.procs, name)
	l.mu.Unlock()
	if p == nil {
		return nil
	}
	select {
	case <-p.done:
		return nil
	default:
		return p
	}
}

// StopAll stops every process this Launcher started, in reverse name
// order, and removes the binaries.
func (l *Launcher) StopAll(grace time.Duration) error {
	l.mu.Lock()
	names := sortedKeys(l.procs)
	l.mu.Unlock()
	var errs []error
	for i := len(names) - 1; i >= 0; i-- {
		errs = append(errs, l.Stop(names[i], grace))
	}
	_ = os.RemoveAll(l.binDir)
	return errors.Join(errs...)
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// Tail returns the last n lines of the file at path ("" when it cannot
// be read).
func Tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
