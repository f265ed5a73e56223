package experiments

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/raw"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/localport"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pglisten"
)

// listenService is the LISTEN user started with its LISTEN URL on
// pgbouncer.
const listenService = pairs.NoRabbitMQ

// listenThroughPgBouncer LISTENs on one channel twice, on a direct
// connection and through the stack's pgbouncer (transaction pooling),
// sends notifications on a third connection and counts what each
// listener received; then starts no-rabbitmq with DATABASE_LISTEN_URL on
// pgbouncer and checks that it refuses to start, naming the problem.
func listenThroughPgBouncer(ctx context.Context, env Env, size Size) (Result, error) {
	r := Result{AckedLost: -1, Metrics: map[driver.Metric]float64{}}
	n := 100
	if size == Full {
		n = 1000
	}
	dn, bn, err := listenCount(ctx, env, n)
	if err != nil {
		return r, err
	}
	r.Metrics[MetricSent] = float64(n)
	r.Metrics[MetricReceivedDirect] = float64(dn)
	r.Metrics[MetricReceivedPgbouncer] = float64(bn)
	// The direct listener's count is the one a correctly configured
	// service relies on.
	r.AckedLost = int64(n) - dn

	refused, msg, took, err := startDeaf(ctx, env)
	if err != nil {
		return r, fmt.Errorf("starting %s with its LISTEN URL on pgbouncer: %w", listenService, err)
	}
	r.Metrics[MetricServiceRefused] = b2f(refused)
	r.Metrics[MetricServiceExitSeconds] = took.Seconds()
	r.setting("service_message", msg)
	return r, nil
}

// listenText is listen-through-pgbouncer's prose.
var listenText = Text{
	Title:    "LISTEN through pgbouncer in transaction mode receives nothing",
	Happens:  "LISTEN through a transaction-mode pooler succeeds on whichever server connection ran it, which the pooler then hands to other clients: no notification reaches the listener, and a service that starts anyway runs deaf on its fallback poll.",
	UserMust: "Give LISTEN a direct connection (DATABASE_LISTEN_URL) and keep the pooler for the rest; the services here probe LISTEN with a NOTIFY round trip at start and after every reconnect and refuse to run deaf.",
	Figure: func(f *Figures) string {
		verdict := fmt.Sprintf("%s with DATABASE_LISTEN_URL on pgbouncer refused to start in %.1f s", listenService, f.Num(MetricServiceExitSeconds))
		if f.Num(MetricServiceRefused) == 0 {
			verdict = fmt.Sprintf("%s with DATABASE_LISTEN_URL on pgbouncer did NOT refuse to start (%s)", listenService, f.Str("service_message"))
		}
		return fmt.Sprintf("%d notifications sent: %d received on a direct connection, %d through pgbouncer; %s",
			f.Int(MetricSent), f.Int(MetricReceivedDirect), f.Int(MetricReceivedPgbouncer), verdict)
	},
	Notes: func(f *Figures) []string {
		notes := []string{
			"pgbouncer: the stack's, in transaction pooling mode (PGBOUNCER_URL). The notifications are sent on a direct connection, each in a transaction of its own. pgbouncer drops each one arriving on the idle server connection that ran LISTEN, logging only a warning (\"got packet 'A' from server when not linked\").",
			"The acknowledged-writes count is notifications the direct listener missed; in the services a notification is only a wake-up (the rows are the truth), so a deaf listener delays work by the poll interval but loses none.",
		}
		if f.Num(MetricServiceRefused) != 0 {
			notes = append(notes, "The refusal names the problem: "+f.Str("service_message"))
		}
		return notes
	},
}

// listenCount LISTENs on one channel on a direct connection and through
// env's pgbouncer, sends n notifications on a third connection, and
// returns how many each listener received.
func listenCount(ctx context.Context, env Env, n int) (direct, bounced int64, err error) {
	channel := uniqueName("wpe_x_listen")
	dl, err := raw.Listen(ctx, env.PostgresURL, channel)
	if err != nil {
		return 0, 0, fmt.Errorf("direct listener: %w", err)
	}
	defer dl.Close()
	// The server connection that ran LISTEN for pgbouncer's client goes
	// back to pgbouncer's pool still LISTENing; the application_name finds
	// it afterwards (see unlistenBounced).
	bl, err := raw.Listen(ctx, withAppName(env.PgBouncerURL, channel), channel)
	if err != nil {
		return 0, 0, fmt.Errorf("listener through pgbouncer: %w", err)
	}
	defer func() { _ = unlistenBounced(env.PostgresURL, channel) }()
	defer bl.Close()
	sender, err := pgx.Connect(ctx, env.PostgresURL)
	if err != nil {
		return 0, 0, fmt.Errorf("sender: %w", err)
	}
	defer sender.Close(context.Background())
	for i := range n {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := sender.Exec(sctx, "SELECT pg_notify($1, $2)", channel, fmt.Sprint(i))
		cancel()
		if err != nil {
			return 0, 0, fmt.Errorf("NOTIFY: %w", err)
		}
	}
	// Every notification is on the wire once its commit returned; give
	// the listeners 2 s to read them.
	waitCount(ctx, dl, int64(n), 2*time.Second)
	waitCount(ctx, bl, int64(n), 2*time.Second)
	return dl.Count(), bl.Count(), nil
}

// waitCount waits until l has received want notifications or d has
// passed.
func waitCount(ctx context.Context, l *raw.Listener, want int64, d time.Duration) {
	deadline := time.Now().Add(d)
	for l.Count() < want && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// startDeaf builds listenService and starts it with its LISTEN URL on
// pgbouncer, in a scratch schema dropped afterwards, and reports whether
// it exited non-zero with pglisten.ErrDeaf's message, the line that says
// so (or why not), and how long it ran. A service still running after a
// minute is killed: it did not refuse.
func startDeaf(ctx context.Context, env Env) (refused bool, msg string, took time.Duration, err error) {
	if env.Root == "" {
		return false, "", 0, errors.New("no repository root (Env.Root) to build the service from")
	}
	bin, err := os.MkdirTemp("", "wpe-experiments-bin-")
	if err != nil {
		return false, "", 0, err
	}
	defer os.RemoveAll(bin)
	bctx, bcancel := context.WithTimeout(ctx, 5*time.Minute)
	build := exec.CommandContext(bctx, "go", "build", "-o", filepath.Join(bin, listenService), "./services/"+listenService)
	build.Dir = env.Root
	out, err := build.CombinedOutput()
	bcancel()
	if err != nil {
		return false, "", 0, fmt.Errorf("go build: %w\n%s", err, out)
	}
	port, err := localport.Free()
	if err != nil {
		return false, "", 0, err
	}
	schema := uniqueName("wpe_x_deaf")
	defer func() { _ = dropSchema(env.PostgresURL, schema) }()
	// no-rabbitmq names its LISTEN connection (listenerName in
	// services/no-rabbitmq/listen.go); pgbouncer passes the name on.
	defer func() { _ = unlistenBounced(env.PostgresURL, "no-rabbitmq listen "+schema) }()
	rctx, rcancel := context.WithTimeout(ctx, time.Minute)
	defer rcancel()
	cmd := exec.CommandContext(rctx, filepath.Join(bin, listenService))
	cmd.Env = append(os.Environ(),
		fmt.Sprintf("ADDR=127.0.0.1:%d", port),
		"DATABASE_URL="+env.PostgresURL,
		"DATABASE_SCHEMA="+schema,
		"DATABASE_LISTEN_URL="+env.PgBouncerURL,
		"LOG_LEVEL=warn",
	)
	t0 := time.Now()
	out, err = cmd.CombinedOutput()
	took = time.Since(t0)
	text := string(out)
	var exit *exec.ExitError
	switch {
	case rctx.Err() != nil && ctx.Err() == nil:
		return false, "still running after a minute", took, nil
	case errors.As(err, &exit) && exit.ExitCode() > 0:
		if i := strings.Index(text, pglisten.ErrDeaf.Error()); i >= 0 {
			return true, pglisten.ErrDeaf.Error(), took, nil
		}
		return false, "exited " + fmt.Sprint(exit.ExitCode()) + " without the probe's message: " + lastLine(text), took, nil
	case err != nil:
		return false, "", took, err
	}
	return false, "exited 0: " + lastLine(text), took, nil
}

// withAppName adds application_name=name to the connection URL u.
func withAppName(u, name string) string {
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	return u + sep + "application_name=" + url.QueryEscape(name)
}

// unlistenBounced closes the server connections pgbouncer keeps in its
// pool that still LISTEN for a client of this experiment: those whose
// application_name is name, idle (lent to no client), and whose last
// statement was a LISTEN, so that no other client has used them since.
// pgbouncer opens a new server connection when it needs one. Left alone,
// such a connection would stay LISTENing until pgbouncer closes it (and
// pgbouncer would log a warning for each notification it drops).
func unlistenBounced(directURL, name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, directURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
WHERE application_name = $1 AND state = 'idle' AND query ILIKE 'listen %' AND pid <> pg_backend_pid()`, name)
	return err
}

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
