package experiments

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/launch"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/localport"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// crashRig is one crash experiment's private world: a private Postgres
// cluster and the services it builds and starts against it.
type crashRig struct {
	env     Env
	cluster *pgCluster
	l       *launch.Launcher
	logDir  string
	ports   map[string]int
}

// newCrashRig starts a private cluster with extra settings and a
// launcher for the services. Close undoes both.
func newCrashRig(ctx context.Context, env Env, extra map[string]string) (*crashRig, error) {
	return newCrashRigAt(ctx, env, "", extra)
}

// newCrashRigAt is newCrashRig with the server binaries of bin ("": the
// default's, pgBindir).
func newCrashRigAt(ctx context.Context, env Env, bin string, extra map[string]string) (*crashRig, error) {
	root, err := env.root()
	if err != nil {
		return nil, err
	}
	if bin == "" {
		if bin, err = pgBindir(); err != nil {
			return nil, err
		}
	}
	cl, err := newPGClusterAt(ctx, bin, extra)
	if err != nil {
		return nil, err
	}
	l, logDir, err := newLauncher(root, "wpe-exp-logs-")
	if err != nil {
		cl.Close()
		return nil, err
	}
	return &crashRig{env: env, cluster: cl, l: l, logDir: logDir, ports: map[string]int{}}, nil
}

// Close stops the services and the cluster and removes their files (the
// services' logs stay when EXPERIMENTS_KEEP_LOGS is set).
func (r *crashRig) Close() {
	_ = r.l.StopAll(10 * time.Second)
	r.cluster.Close()
	if os.Getenv("EXPERIMENTS_KEEP_LOGS") != "" {
		r.logf("services' logs kept in %s (EXPERIMENTS_KEEP_LOGS)", r.logDir)
		return
	}
	_ = os.RemoveAll(r.logDir)
}

// logf writes a progress line to env.Out.
func (r *crashRig) logf(format string, args ...any) {
	if r.env.Out != nil {
		fmt.Fprintf(r.env.Out, "  "+format+"\n", args...)
	}
}

// keptPort is service name's port in ports: a free one, kept there, the
// first time, so that a restart of the service keeps its address.
func keptPort(ports map[string]int, name string) (int, error) {
	if port, ok := ports[name]; ok {
		return port, nil
	}
	port, err := localport.Free()
	if err != nil {
		return 0, err
	}
	ports[name] = port
	return port, nil
}

// start starts service name against the private cluster (every URL it
// reads points there), with extra settings, on a port of its own (kept
// across restarts of the same name).
func (r *crashRig) start(ctx context.Context, name string, extra map[string]string) (string, error) {
	port, err := keptPort(r.ports, name)
	if err != nil {
		return "", err
	}
	u := r.cluster.URL()
	env := map[string]string{"DATABASE_URL": u, "REPLICATION_URL": u, "DATABASE_LISTEN_URL": u, "LOG_FORMAT": "text"}
	for k, v := range extra {
		env[k] = v
	}
	if _, err := r.l.Start(ctx, name, port, env, 60*time.Second); err != nil {
		return "", err
	}
	return "http://127.0.0.1:" + strconv.Itoa(port), nil
}

// stop stops service name (SIGTERM, graceful).
func (r *crashRig) stop(name string) error { return r.l.Stop(name, 15*time.Second) }

// crashSettings records in r the settings every crash experiment's notes
// name: the private cluster's version and the machine.
func crashSettings(r *Result, cl *pgCluster) {
	m := driver.ThisMachine()
	r.setting("postgres_version", cl.Version())
	r.setting("machine_cpu_model", m.CPUModel)
	r.setting("machine_os", m.OS)
	r.setting("machine_arch", m.Arch)
	r.metric(MetricMachineCpus, float64(m.CPUs))
}

// crashNotes are the notes every crash experiment's result carries (from
// the settings crashSettings recorded), then more.
func crashNotes(f *Figures, more ...string) []string {
	return append([]string{
		fmt.Sprintf("PostgreSQL %s, a private cluster (own data directory and port, fsync on, defaults otherwise); the shared stack is not touched", f.Str("postgres_version")),
		fmt.Sprintf("machine: %s, %d CPUs, %s/%s (shared with other work: times are indicative)", f.Str("machine_cpu_model"), f.Int(MetricMachineCpus), f.Str("machine_os"), f.Str("machine_arch")),
	}, more...)
}

// pgSide is one Postgres-side service as the crash experiments write to
// it: one acknowledged single write, and a read that says whether it is
// there.
type pgSide struct {
	name string
	// write sends write i and returns the id to look up, the status, the
	// answer's body.
	write func(ctx context.Context, base string, i int) (id string, code int, body []byte, err error)
	// okCode is write's acknowledgement.
	okCode int
	// path is the read URL path of id.
	path func(id string) string
	// present, when set, says whether a 200 answer to path holds the
	// write: an event stream's read answers 200 with no events for a
	// stream it does not have.
	present func(body []byte) bool
}

// pgSides are the Postgres sides that run on this machine's stack.
var pgSides = map[string]pgSide{
	pairs.NoKafka: {name: pairs.NoKafka, okCode: http.StatusCreated,
		write: func(ctx context.Context, base string, i int) (string, int, []byte, error) {
			return crashPostID(ctx, base+"/events", fmt.Sprintf(`{"type":"exp.crash","key":"k%d","payload":{"n":%d}}`, i%16, i))
		},
		path: func(id string) string { return "/events/" + id }},
	pairs.NoRabbitMQ: {name: pairs.NoRabbitMQ, okCode: http.StatusAccepted,
		write: func(ctx context.Context, base string, i int) (string, int, []byte, error) {
			return crashPostID(ctx, base+"/tasks", fmt.Sprintf(`{"kind":"exp","payload":{"n":%d},"fail_times":0}`, i))
		},
		path: func(id string) string { return "/tasks/" + id }},
	pairs.NoMongoDB: {name: pairs.NoMongoDB, okCode: http.StatusCreated,
		write: func(ctx context.Context, base string, i int) (string, int, []byte, error) {
			return crashPostID(ctx, base+"/users", fmt.Sprintf(`{"email":"exp%d-%d@crash.test","name":"n%d","plan":"pro"}`, i, time.Now().UnixNano(), i))
		},
		path: func(id string) string { return "/users/" + id }},
	pairs.NoKurrentDB: {name: pairs.NoKurrentDB, okCode: http.StatusCreated,
		write: func(ctx context.Context, base string, i int) (string, int, []byte, error) {
			stream := fmt.Sprintf("exp-%d-%d", time.Now().UnixNano(), i)
			code, b, err := driver.Do(ctx, http.MethodPost, base+"/streams/"+stream+"/events",
				[]byte(`{"expected_version":"no_stream","events":[{"type":"exp.crash","data":{"n":`+strconv.Itoa(i)+`}}]}`))
			return stream, code, b, err
		},
		path:    func(id string) string { return "/streams/" + id },
		present: streamHasEvents},
}

// streamHasEvents says whether a GET /streams/{stream} answer holds an
// event.
func streamHasEvents(body []byte) bool {
	var r struct {
		Events []json.RawMessage `json:"events"`
	}
	return json.Unmarshal(body, &r) == nil && len(r.Events) > 0
}

// crashPostID posts body to url and returns the answer's id.
func crashPostID(ctx context.Context, url, body string) (string, int, []byte, error) {
	code, b, err := driver.Do(ctx, http.MethodPost, url, []byte(body))
	if err != nil {
		return "", code, b, err
	}
	var v struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(b, &v)
	return v.ID, code, b, nil
}

// crashCountMissing GETs each id on base and counts those not answered 200
// (or answered 200 without the write: side.present);
// retries each for a while when the service is not ready (5xx).
func crashCountMissing(ctx context.Context, base string, side pgSide, ids []string) (missing int64, err error) {
	err = eachAtMost8(ids, func(id string) error {
		for attempt := 0; ; attempt++ {
			code, b, err := driver.Do(ctx, http.MethodGet, base+side.path(id), nil)
			switch {
			case err == nil && code == http.StatusOK && (side.present == nil || side.present(b)):
				return nil
			case err == nil && code == http.StatusOK:
				atomic.AddInt64(&missing, 1)
				return nil
			case err == nil && code == http.StatusNotFound:
				atomic.AddInt64(&missing, 1)
				return nil
			case attempt >= 20 || ctx.Err() != nil:
				return fmt.Errorf("GET %s: %d %s %v", side.path(id), code, b, err)
			}
			time.Sleep(250 * time.Millisecond)
		}
	})
	return missing, err
}

// eachAtMost8 calls check for every id, at most 8 at a time, and returns
// once all have returned: nil, or the error returned first.
func eachAtMost8(ids []string, check func(id string) error) error {
	var wg sync.WaitGroup
	var firstErr atomic.Value
	sem := make(chan struct{}, 8)
	for _, id := range ids {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := check(id); err != nil {
				firstErr.CompareAndSwap(nil, err)
			}
		}()
	}
	wg.Wait()
	err, _ := firstErr.Load().(error)
	return err
}

// crashWaitReady polls base/readyz until it answers 200 or timeout passes.
func crashWaitReady(ctx context.Context, base string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		code, b, err := driver.Do(ctx, http.MethodGet, base+"/readyz", nil)
		if err == nil && code == http.StatusOK {
			return nil
		}
		last = fmt.Sprintf("%d %s %v", code, b, err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s/readyz not ready after %s: %s", base, timeout, last)
}

// ms is d in milliseconds, rounded to 0.1.
func crashMS(d time.Duration) float64 { return float64(d.Round(100*time.Microsecond)) / 1e6 }
