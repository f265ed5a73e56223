package pglisten_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/backoff"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pglisten"
)

// recorder collects what a Listener's hooks saw.
type recorder struct {
	connects, reconnects, disconnects atomic.Int32
	payloads                          chan string
}

// newListener returns a Listener on channel whose connections carry
// appName, with its hooks recording into a recorder.
func newListener(t testing.TB, url, appName, channel string) (*pglisten.Listener, *recorder) {
	t.Helper()
	cc, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cc.RuntimeParams["application_name"] = appName
	rec := &recorder{payloads: make(chan string, 100)}
	return &pglisten.Listener{
		Connect:  func(ctx context.Context) (*pgx.Conn, error) { return pgx.ConnectConfig(ctx, cc) },
		Channels: []string{channel},
		OnConnect: func(_ context.Context, _ *pgx.Conn, reconnect bool) error {
			rec.connects.Add(1)
			if reconnect {
				rec.reconnects.Add(1)
			}
			return nil
		},
		OnNotification: func(_ context.Context, n *pgconn.Notification) { rec.payloads <- n.Payload },
		OnDisconnect:   func(error, time.Duration) { rec.disconnects.Add(1) },
		Backoff:        backoff.Backoff{Initial: 10 * time.Millisecond, Max: 100 * time.Millisecond},
	}, rec
}

// fixture is a listener on a channel of its own, in the stack's Postgres,
// with a pool to notify and terminate through.
type fixture struct {
	l                *pglisten.Listener
	rec              *recorder
	pool             *pgxpool.Pool
	ctx              context.Context
	appName, channel string
}

func newFixture(t testing.TB) fixture {
	t.Helper()
	url := kittest.PostgresURL(t)
	f := fixture{pool: kittest.Pool(t, url, ""), ctx: kittest.Context(t, time.Minute),
		appName: kittest.UniqueName(t, "l"), channel: kittest.UniqueName(t, "c")}
	f.l, f.rec = newListener(t, url, f.appName, f.channel)
	return f
}

// run runs l until the test ends and fails the test if Run does not
// return promptly with context.Canceled then.
func run(t testing.TB, l *pglisten.Listener) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Run = %v, want context.Canceled", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Run did not return after its context ended")
		}
	})
}

// notifyUntilHeard sends payload on channel until the listener hands it
// out: a NOTIFY sent before LISTEN took effect is lost, by design.
func notifyUntilHeard(t testing.TB, ctx context.Context, exec func(context.Context, string, ...any) (pgconn.CommandTag, error), channel, payload string, rec *recorder) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		if _, err := exec(ctx, "SELECT pg_notify($1, $2)", channel, payload); err != nil {
			t.Fatal(err)
		}
		select {
		case p := <-rec.payloads:
			if p == payload {
				return
			}
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			t.Fatalf("notification %q never arrived", payload)
		}
	}
}

// TestReconnectsAfterTerminateAndCallsTheHook kills the listening backend
// with pg_terminate_backend: the listener must reconnect, call OnConnect
// again (with reconnect set) and receive notifications again.
func TestReconnectsAfterTerminateAndCallsTheHook(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	run(t, f.l)
	pool, ctx, channel, rec := f.pool, f.ctx, f.channel, f.rec

	kittest.Eventually(t, 20*time.Second, "the first connect", func() bool { return rec.connects.Load() == 1 })
	if rec.reconnects.Load() != 0 {
		t.Fatal("the first connect was reported as a reconnect")
	}
	notifyUntilHeard(t, ctx, pool.Exec, channel, "before", rec)

	var killed int
	if err := pool.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1`, f.appName).Scan(&killed); err != nil || killed != 1 {
		t.Fatalf("terminated %d listening backends (%v), want 1", killed, err)
	}
	kittest.Eventually(t, 20*time.Second, "the reconnect", func() bool { return rec.reconnects.Load() == 1 })
	if rec.disconnects.Load() < 1 {
		t.Error("OnDisconnect was not called for the lost connection")
	}
	notifyUntilHeard(t, ctx, pool.Exec, channel, "after", rec)
}

// TestOnConnectErrorRetries: a failing hook drops the connection and the
// listener tries again, with reconnect set, until the hook succeeds.
func TestOnConnectErrorRetries(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	l, pool, ctx, channel, rec := f.l, f.pool, f.ctx, f.channel, f.rec
	var calls atomic.Int32
	var sawReconnect atomic.Bool
	l.OnConnect = func(_ context.Context, _ *pgx.Conn, reconnect bool) error {
		if calls.Add(1) < 3 {
			return errors.New("re-read failed")
		}
		sawReconnect.Store(reconnect)
		rec.connects.Add(1)
		return nil
	}
	run(t, l)
	kittest.Eventually(t, 20*time.Second, "a successful hook", func() bool { return rec.connects.Load() == 1 })
	if !sawReconnect.Load() || rec.disconnects.Load() != 2 {
		t.Errorf("reconnect=%v after %d disconnects, want true after 2", sawReconnect.Load(), rec.disconnects.Load())
	}
	notifyUntilHeard(t, ctx, pool.Exec, channel, "x", rec)
}

// TestRunEndsWhileUnreachable: with the server unreachable Run keeps
// retrying, and returns as soon as its context ends.
func TestRunEndsWhileUnreachable(t *testing.T) {
	t.Parallel()
	l, rec := newListener(t, "postgres://postgres@127.0.0.1:1/wpe?sslmode=disable", "x", "c")
	l.Backoff = backoff.Backoff{Initial: time.Millisecond, Max: time.Hour}
	run(t, l)
	kittest.Eventually(t, 20*time.Second, "failed attempts", func() bool { return rec.disconnects.Load() >= 3 })
	// The cleanup of run checks that Run returns promptly though the
	// backoff has grown.
}

// TestProbeRefusesADeafConnection: through pgbouncer in transaction mode
// LISTEN succeeds and then nothing ever arrives. The probe must catch it
// on every connection, report ErrDeaf to OnDisconnect, and never call
// OnConnect, so that a service built on the listener fails loudly
// instead of running deaf.
func TestProbeRefusesADeafConnection(t *testing.T) {
	t.Parallel()
	bouncer := kittest.Server(t, "PGBOUNCER_URL", kittest.DefaultPgBouncerURL)
	f := newFixture(t)
	l, rec := newListener(t, bouncer, f.appName, f.channel)
	l.Notify = func(ctx context.Context, channel, payload string) error {
		_, err := f.pool.Exec(ctx, "SELECT pg_notify($1, $2)", channel, payload)
		return err
	}
	l.ProbeTimeout = time.Second
	errs := make(chan error, 1)
	l.OnDisconnect = func(err error, _ time.Duration) {
		select {
		case errs <- err:
		default:
		}
	}
	run(t, l)
	select {
	case err := <-errs:
		if !errors.Is(err, pglisten.ErrDeaf) {
			t.Fatalf("OnDisconnect(%v), want ErrDeaf", err)
		}
		t.Logf("refused: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("no refusal within 20 s")
	}
	if n := rec.connects.Load(); n != 0 {
		t.Errorf("OnConnect called %d times on a deaf connection", n)
	}
	if !errors.Is(l.Err(), pglisten.ErrDeaf) || l.Listening() || isClosed(l.Listened()) {
		t.Errorf("a deaf listener's state: Err %v, Listening %v, Listened closed %v; want ErrDeaf, false, false", l.Err(), l.Listening(), isClosed(l.Listened()))
	}
	if err := l.Await(t.Context(), 0); !errors.Is(err, pglisten.ErrDeaf) {
		t.Errorf("Await on a deaf listener = %v, want ErrDeaf", err)
	}
}

// TestProbeDeliversEarlyNotifications: notifications of the listened
// channels that arrive during the probe are handed out after OnConnect,
// none lost.
func TestProbeDeliversEarlyNotifications(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	l, rec := f.l, f.rec
	// The probe's notification is sent after two of the channel's own.
	l.Notify = func(ctx context.Context, channel, payload string) error {
		for _, p := range []string{"early-1", "early-2"} {
			if _, err := f.pool.Exec(ctx, "SELECT pg_notify($1, $2)", f.channel, p); err != nil {
				return err
			}
		}
		_, err := f.pool.Exec(ctx, "SELECT pg_notify($1, $2)", channel, payload)
		return err
	}
	// Both hooks run on Run's goroutine; the test reads order after the
	// second payload's channel send.
	var order []string
	l.OnConnect = func(context.Context, *pgx.Conn, bool) error {
		order = append(order, "connect")
		return nil
	}
	l.OnNotification = func(_ context.Context, n *pgconn.Notification) {
		order = append(order, n.Payload)
		rec.payloads <- n.Payload
	}
	run(t, l)
	for range 2 {
		select {
		case <-rec.payloads:
		case <-time.After(20 * time.Second):
			t.Fatal("the early notifications never arrived")
		}
	}
	if got := strings.Join(order[:3], " "); got != "connect early-1 early-2" {
		t.Errorf("hooks saw %q, want \"connect early-1 early-2\"", got)
	}
}

// isClosed reports whether ch is closed, without waiting.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestStateFollowsTheConnection: the listener's own state (Listening,
// Err, Listened, Await) before Run, once listening, while a connection
// killed by pg_terminate_backend is being replaced (held in OnConnect),
// after the reconnect, and after Run returns.
func TestStateFollowsTheConnection(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	l, pool, ctx := f.l, f.pool, f.ctx
	// The probe's NOTIFY goes through the pool: no second connection
	// under the listener's name to be terminated with it.
	l.Notify = pglisten.NotifyThrough(pool)
	if l.Listening() || l.Err() != nil || isClosed(l.Listened()) {
		t.Fatalf("before Run: Listening %v, Err %v, Listened closed %v", l.Listening(), l.Err(), isClosed(l.Listened()))
	}
	if err := l.Await(ctx, 0); !errors.Is(err, pglisten.ErrNoAttempt) {
		t.Fatalf("Await before Run = %v, want ErrNoAttempt", err)
	}
	if err := l.ListenErr(); !errors.Is(err, pglisten.ErrNoAttempt) {
		t.Fatalf("ListenErr before Run = %v, want ErrNoAttempt", err)
	}

	// The reconnect's OnConnect reports, then waits for release, so that
	// the state between the loss and the new connection can be read.
	held, release := make(chan struct{}), make(chan struct{})
	var heldOnce sync.Once
	var lost atomic.Int32
	var listeningInOnLost atomic.Bool
	l.OnConnect = func(_ context.Context, _ *pgx.Conn, reconnect bool) error {
		if reconnect {
			heldOnce.Do(func() { close(held) })
			<-release
		}
		return nil
	}
	l.OnLost = func(error) {
		lost.Add(1)
		listeningInOnLost.Store(l.Listening())
	}
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(runCtx) }()
	var releaseOnce sync.Once
	unhold := func() { releaseOnce.Do(func() { close(release) }) }
	defer unhold()
	defer cancel() // on a failure: Run ends once released

	if err := l.Await(ctx, 20*time.Second); err != nil {
		t.Fatalf("Await = %v", err)
	}
	if !l.Listening() || l.Err() != nil || l.ListenErr() != nil || !isClosed(l.Listened()) {
		t.Fatalf("listening: Listening %v, Err %v, ListenErr %v, Listened closed %v; want true, nil, nil, true", l.Listening(), l.Err(), l.ListenErr(), isClosed(l.Listened()))
	}

	var killed int
	if err := pool.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1`, f.appName).Scan(&killed); err != nil || killed != 1 {
		t.Fatalf("terminated %d listening backends (%v), want 1", killed, err)
	}
	select {
	case <-held:
	case <-time.After(20 * time.Second):
		t.Fatal("no reconnect within 20 s")
	}
	if l.Listening() || l.Err() == nil || l.ListenErr() != l.Err() || !isClosed(l.Listened()) {
		t.Errorf("reconnecting: Listening %v, Err %v, ListenErr %v, Listened closed %v; want false, the loss, the loss, true", l.Listening(), l.Err(), l.ListenErr(), isClosed(l.Listened()))
	}
	if lost.Load() != 1 || listeningInOnLost.Load() {
		t.Errorf("OnLost called %d times, Listening %v in it; want once, false", lost.Load(), listeningInOnLost.Load())
	}
	if err := l.Await(ctx, 0); err != nil {
		t.Errorf("Await once a connection listened = %v, want nil", err)
	}
	t.Logf("the loss: %v", l.Err())
	unhold()
	kittest.Eventually(t, 20*time.Second, "listening again", l.Listening)
	if l.ListenErr() != nil || l.Err() == nil {
		t.Errorf("listening again: ListenErr %v, Err %v; want nil, the loss (kept)", l.ListenErr(), l.Err())
	}
	if lost.Load() != 1 {
		t.Errorf("OnLost called %d times after the reconnect, want 1", lost.Load())
	}

	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v, want context.Canceled", err)
	}
	if l.Listening() {
		t.Error("Listening after Run returned")
	}
	if lost.Load() != 1 {
		t.Errorf("OnLost called %d times after Run returned, want 1 (not for ctx's end)", lost.Load())
	}
}

// TestAwaitReportsTheLastFailure: with the server unreachable, Await
// gives up at its deadline with the failed attempts' cause.
func TestAwaitReportsTheLastFailure(t *testing.T) {
	t.Parallel()
	l, rec := newListener(t, "postgres://postgres@127.0.0.1:1/wpe?sslmode=disable", "x", "c")
	run(t, l)
	kittest.Eventually(t, 20*time.Second, "a failed attempt", func() bool { return rec.disconnects.Load() >= 1 })
	err := l.Await(t.Context(), 0)
	if err == nil || errors.Is(err, pglisten.ErrNoAttempt) || !strings.Contains(err.Error(), "connect") {
		t.Errorf("Await = %v, want the connect failure", err)
	}
	if l.Listening() || isClosed(l.Listened()) {
		t.Error("an unreachable listener reports listening")
	}
}

// TestStartAndClose: Start runs the listener on its own until Close, which
// waits until its connection is closed; Close is idempotent and a Start
// after it, or a second Start, fails.
func TestStartAndClose(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	l, pool, ctx := f.l, f.pool, f.ctx
	l.Notify = pglisten.NotifyThrough(pool)
	if err := l.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close(context.Background()) })
	if err := l.Start(); err == nil {
		t.Error("a second Start succeeded")
	}
	if err := l.Await(ctx, 20*time.Second); err != nil {
		t.Fatalf("Await = %v", err)
	}
	notifyUntilHeard(t, ctx, pool.Exec, f.channel, "started", f.rec)
	backends := func() int {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, f.appName).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := backends(); n != 1 {
		t.Fatalf("%d listening backends, want 1", n)
	}
	if err := l.Close(ctx); err != nil {
		t.Fatalf("Close = %v", err)
	}
	if l.Listening() {
		t.Error("Listening after Close returned")
	}
	// Close returns once the client side closed; the server notices soon.
	kittest.Eventually(t, 20*time.Second, "the backend gone", func() bool { return backends() == 0 })
	if err := l.Close(ctx); err != nil {
		t.Errorf("a second Close = %v, want nil", err)
	}
	if err := l.Start(); err == nil {
		t.Error("Start after Close succeeded")
	}
}

// TestCloseEndsAnUnreachableListener: Close stops a Listener that never
// connected, promptly, and a Listener that cannot run refuses Start.
func TestCloseEndsAnUnreachableListener(t *testing.T) {
	t.Parallel()
	if err := (&pglisten.Listener{}).Start(); err == nil {
		t.Error("Start of a Listener without Connect and Channels succeeded")
	}
	l, rec := newListener(t, "postgres://postgres@127.0.0.1:1/wpe?sslmode=disable", "x", "c")
	if err := l.Start(); err != nil {
		t.Fatal(err)
	}
	kittest.Eventually(t, 20*time.Second, "a failed attempt", func() bool { return rec.disconnects.Load() >= 1 })
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := l.Close(ctx); err != nil {
		t.Errorf("Close = %v", err)
	}
	if l.Listening() || l.ListenErr() == nil {
		t.Errorf("after Close: Listening %v, ListenErr %v; want false and the connect failure", l.Listening(), l.ListenErr())
	}
}

// TestCloseBeforeStart: Close before Start returns at once, and makes
// Start fail.
func TestCloseBeforeStart(t *testing.T) {
	t.Parallel()
	l, _ := newListener(t, "postgres://postgres@127.0.0.1:1/wpe?sslmode=disable", "x", "c")
	if err := l.Close(t.Context()); err != nil {
		t.Errorf("Close before Start = %v", err)
	}
	if err := l.Start(); err == nil {
		t.Error("Start after Close succeeded")
	}
}
