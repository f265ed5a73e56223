package service

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/config"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/stats"
)

// startConfig is a service's Config: Common and a setting of its own.
type startConfig struct {
	Common
	DatabaseURL string
}

func readStart(r *config.Reader) (startConfig, error) {
	c := startConfig{
		Common:      ReadCommon(r, pairs.Get("no-kafka").Addr(), 1<<20),
		DatabaseURL: r.URL("DATABASE_URL", "postgres://u:secret@localhost:5432/wpe"),
	}
	return c, r.Err()
}

// TestHelpListsEverySettingAndTouchesNothing checks -h and --help: exit
// 0, the usage text on stdout with every setting, its default and its
// meaning, from an empty environment (the Reader of the process is never
// made); and that an argument is refused with exit 2.
func TestHelpListsEverySettingAndTouchesNothing(t *testing.T) {
	t.Parallel()
	self := pairs.Get("no-kafka")
	for _, arg := range []string{"-h", "--help"} {
		var stdout, stderr bytes.Buffer
		code, done := handleArgs(&stdout, &stderr, []string{arg}, self, readStart)
		if !done || code != 0 || stderr.Len() != 0 {
			t.Fatalf("%s: code %d, done %v, stderr %q; want 0, true, nothing", arg, code, done, stderr.String())
		}
		r := config.FromMap(nil)
		if _, err := readStart(r); err != nil {
			t.Fatal(err)
		}
		out := stdout.String()
		if !strings.HasPrefix(out, "no-kafka: the log pair's postgres side") || !strings.Contains(out, "Usage: no-kafka [-h | --help]") {
			t.Errorf("%s: the header does not say what the service is:\n%s", arg, out)
		}
		for _, v := range r.Vars() {
			if want := "  " + v.Name + " (default " + v.Default; v.Default != "" && !strings.Contains(out, want) {
				t.Errorf("%s: usage lacks %q", arg, want)
			}
			if m := config.Meaning(self.Name, v.Name); m == "" || !strings.Contains(out, strings.Fields(m)[0]) {
				t.Errorf("%s: no meaning for %s", arg, v.Name)
			}
		}
		if !strings.Contains(out, "ADDR (default 127.0.0.1:8084)") {
			t.Errorf("%s: ADDR's default is not loopback:\n%s", arg, out)
		}
	}
	var stdout, stderr bytes.Buffer
	if code, done := handleArgs(&stdout, &stderr, []string{"--port=1"}, self, readStart); !done || code != 2 ||
		!strings.Contains(stderr.String(), "no-kafka -h lists them") {
		t.Errorf("--port=1: code %d, done %v, stderr %q; want 2 and a hint to -h", code, done, stderr.String())
	}
	if _, done := handleArgs(&stdout, &stderr, nil, self, readStart); done {
		t.Error("no arguments: done, want the service to start")
	}
}

// TestAssembleBindsADDRBeforeBuild occupies a port and assembles a
// service on it: Assemble must fail naming ADDR without calling build
// (which would migrate and create slots).
func TestAssembleBindsADDRBeforeBuild(t *testing.T) {
	t.Parallel()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	built := false
	build := func(context.Context, startConfig, *slog.Logger) (*Service, error) {
		built = true
		return nil, errors.New("built")
	}
	r := config.FromMap(map[string]string{"ADDR": busy.Addr().String()})
	_, err = Assemble(t.Context(), Process{Vars: r, Stderr: &bytes.Buffer{}}, readStart, build)
	if err == nil || !strings.Contains(err.Error(), "(ADDR)") || !strings.Contains(err.Error(), busy.Addr().String()) {
		t.Errorf("Assemble on a busy port: %v, want an error naming ADDR and %s", err, busy.Addr())
	}
	if built {
		t.Error("build was called although ADDR was busy")
	}
}

// TestAssembleServesOnTheBoundListener checks that the service serves on
// the listener Assemble bound (not a second bind), and that a failed build
// releases the port.
func TestAssembleServesOnTheBoundListener(t *testing.T) {
	t.Parallel()
	var bound net.Listener
	build := func(_ context.Context, cfg startConfig, logger *slog.Logger) (*Service, error) {
		bound = cfg.HTTP.Listener
		return New(stats.Info{Service: "test", Pair: "none", Backend: "none"}, cfg.HTTP, logger, nil, nil), nil
	}
	svc, err := Assemble(t.Context(), Process{Vars: config.FromMap(map[string]string{"ADDR": "127.0.0.1:0"}), Stderr: &bytes.Buffer{}}, readStart, build)
	if err != nil {
		t.Fatal(err)
	}
	if bound == nil {
		t.Fatal("build got no bound listener")
	}
	if err := svc.Listen(); err != nil {
		t.Fatal(err)
	}
	base, stop := runService(t, svc)
	defer stop()
	if svc.Addr().String() != bound.Addr().String() {
		t.Errorf("serves on %v, want the bound %v", svc.Addr(), bound.Addr())
	}
	resp, err := http.Get(base + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz on the bound listener: %v %v", resp, err)
	}
	resp.Body.Close()

	var addr string
	failing := func(_ context.Context, cfg startConfig, _ *slog.Logger) (*Service, error) {
		addr = cfg.HTTP.Listener.Addr().String()
		return nil, errors.New("no database")
	}
	if _, err := Assemble(t.Context(), Process{Vars: config.FromMap(map[string]string{"ADDR": "127.0.0.1:0"}), Stderr: &bytes.Buffer{}}, readStart, failing); err == nil {
		t.Fatal("a failed build did not fail Assemble")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("a failed build left %s bound: %v", addr, err)
	}
	ln.Close()
}

// TestAssembleWarnsOfStrays checks that a misspelt setting is logged once
// as a warning naming the setting it meant, and that the stack's URLs are
// not.
func TestAssembleWarnsOfStrays(t *testing.T) {
	t.Parallel()
	env := map[string]string{"ADDR": "127.0.0.1:0", "DATABSE_URL": "postgres://h/db", "PGBOUNCER_URL": "postgres://h:6432/db"}
	var environ []string
	for k, v := range env {
		environ = append(environ, k+"="+v)
	}
	var logs bytes.Buffer
	build := func(_ context.Context, cfg startConfig, logger *slog.Logger) (*Service, error) {
		return New(stats.Info{Service: "test", Pair: "none", Backend: "none"}, cfg.HTTP, logger, nil, nil), nil
	}
	svc, err := Assemble(t.Context(), Process{Vars: config.FromMap(env), Environ: environ, Stderr: &logs}, readStart, build)
	if err != nil {
		t.Fatal(err)
	}
	_ = svc.Stop(t.Context())
	_ = svc.cfg.Listener.Close()
	got := logs.String()
	if strings.Count(got, "level=WARN") != 1 || !strings.Contains(got, "DATABSE_URL is set but is not a setting of this service; did you mean DATABASE_URL?") {
		t.Errorf("want one warning naming DATABSE_URL and DATABASE_URL, got:\n%s", got)
	}
}

// TestIndex checks GET /: the service's name, pair and backend, and links
// to its documents.
func TestIndex(t *testing.T) {
	t.Parallel()
	svc := New(stats.Info{Service: "no-kafka", Pair: "log", Backend: "postgres"}, ReadCommon(config.FromMap(nil), ":0", 1<<20).HTTP, slog.New(slog.DiscardHandler), nil, nil)
	rec := httptest.NewRecorder()
	svc.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	var got Index
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("GET /: %d %q %q (%v)", rec.Code, rec.Header().Get("Content-Type"), rec.Body.String(), err)
	}
	if got.Service != "no-kafka" || got.Pair != "log" || got.Backend != "postgres" {
		t.Errorf("GET / = %+v", got)
	}
	for name, path := range map[string]string{"openapi": "/openapi.yaml", "stats": "/stats", "metrics": "/metrics"} {
		if got.Links[name] != path {
			t.Errorf("links[%s] = %q, want %s", name, got.Links[name], path)
		}
	}
}

// TestReadyBackendNamesTheVariable checks the 503 of an unreachable
// backend: it names the server, the variable and its value, password
// masked.
func TestReadyBackendNamesTheVariable(t *testing.T) {
	t.Parallel()
	svc := New(stats.Info{Service: "test", Pair: "none", Backend: "none"}, ReadCommon(config.FromMap(nil), ":0", 1<<20).HTTP, slog.New(slog.DiscardHandler), nil, nil)
	svc.ReadyBackend("postgres", "DATABASE_URL", "postgres://u:secret@localhost:1/db", func(context.Context) error { return errors.New("connection refused") })
	svc.ReadyBackend("redis", "REDIS_URL", "redis://localhost:6379/0", func(context.Context) error { return nil })
	rec := httptest.NewRecorder()
	svc.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	body := rec.Body.String()
	if rec.Code != http.StatusServiceUnavailable ||
		!strings.Contains(body, "postgres unreachable (DATABASE_URL=postgres://u:xxxxx@localhost:1/db): connection refused") ||
		strings.Contains(body, "secret") || !strings.Contains(body, `"redis":"ok"`) {
		t.Errorf("/readyz: %d %s", rec.Code, body)
	}
}

// TestStartHelpExitsZeroWithoutBuilding runs Start as a process (this test
// binary again, as main would) with -h, a busy ADDR and a DATABASE_URL
// nothing answers: it must print the usage and exit 0 without calling
// build, which here would exit 3.
func TestStartHelpExitsZeroWithoutBuilding(t *testing.T) {
	if arg := os.Getenv("WPE_START_ARG"); arg != "" {
		os.Args = []string{"no-kafka", arg}
		Start(pairs.Get("no-kafka"), readStart, func(context.Context, startConfig, *slog.Logger) (*Service, error) {
			os.Exit(3)
			return nil, nil
		})
		os.Exit(4) // Start returned: it must exit
	}
	t.Parallel()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for arg, want := range map[string]int{"-h": 0, "--help": 0, "-x": 2} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestStartHelpExitsZeroWithoutBuilding$")
		cmd.Env = append(os.Environ(), "WPE_START_ARG="+arg, "ADDR="+busy.Addr().String(), "DATABASE_URL=postgres://u:p@127.0.0.1:1/none")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			code = exit.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != want {
			t.Errorf("%s: exit %d, want %d; stdout %.300q stderr %.300q", arg, code, want, stdout.String(), stderr.String())
		}
		if want == 0 && !strings.Contains(stdout.String(), "  DATABASE_URL (default postgres://u:secret@localhost:5432/wpe)") {
			t.Errorf("%s: stdout lacks the usage: %.500q", arg, stdout.String())
		}
	}
}
