package cluster

import (
	"context"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The tests of this file promote a standby of the cluster profile's
// Postgres (scripts/cluster.sh promote) and rejoin the old primary after
// each promotion, so that the next test finds the cluster whole: a primary
// with one synchronous and one asynchronous standby streaming. They need
// root (the script does) and run one at a time (none is parallel).

// promotion is one way to promote: a clean switchover or a failover.
type promotion struct {
	name string
	// kill: the primary's postmaster is killed (kill -9) instead of
	// stopped cleanly.
	kill bool
}

// promotions are the two ways every test tries.
var promotions = []promotion{{"switchover", false}, {"failover", true}}

// pgRoles names the cluster's nodes by role (each node's cluster_name, which
// is also its application_name as a standby: pg1, pg2, pg3).
type pgRoles struct {
	primary, sync, async string
	top                  Topology
}

// pgScript runs scripts/cluster.sh with args and fails the test if it
// fails; its output goes to the test's log. It skips unless the test runs
// as root, as the script needs.
func pgScript(t testing.TB, args ...string) {
	t.Helper()
	requireRoot(t)
	// A rebuild (rejoin) copies the primary: seconds here, more on a busy
	// machine.
	out, err := runClusterScript(t, 6*time.Minute, args...)
	t.Logf("cluster.sh %s:\n%s", strings.Join(args, " "), strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("cluster.sh %s: %v", strings.Join(args, " "), err)
	}
}

// requireRoot skips the test unless it runs as root, as scripts/cluster.sh
// needs (namespaces, the nodes' data directories).
func requireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("promoting a node with scripts/cluster.sh needs root")
	}
}

// nodeName is the cluster_name of the server conn is on.
func nodeName(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) (string, error) {
	var name string
	err := q.QueryRow(ctx, "SELECT current_setting('cluster_name')").Scan(&name)
	return name, err
}

// wholePG waits (up to 2 minutes) until the cluster is whole: one primary,
// one synchronous and one asynchronous standby streaming from it; and
// returns who is what.
func wholePG(t testing.TB, ctx context.Context, url string) pgRoles {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var last error
	for {
		r, err := discoverRoles(ctx, url)
		if err == nil {
			return r
		}
		last = err
		select {
		case <-ctx.Done():
			t.Fatalf("the cluster is not whole (a primary, a sync and an async standby streaming) after 2 minutes: %v", last)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func discoverRoles(ctx context.Context, url string) (pgRoles, error) {
	r, err := DiscoverRoles(ctx, url)
	return pgRoles{primary: r.Primary, sync: r.Sync, async: r.Async, top: r.Top}, err
}

// promoteSync promotes the synchronous standby of the whole cluster r
// (scripts/cluster.sh promote, with --kill-primary for a failover), and
// registers the old primary's rejoin, after which the cluster must be
// whole again. It returns the new primary's name.
func promoteSync(t *testing.T, ctx context.Context, url string, r pgRoles, how promotion) string {
	t.Helper()
	t.Cleanup(func() {
		if t.Failed() && os.Getenv("CLUSTER_KEEP_FAILED") != "" {
			t.Logf("CLUSTER_KEEP_FAILED: %s left as it is (rejoin it with scripts/cluster.sh rejoin %s)", r.primary, r.primary)
			return
		}
		pgScript(t, "rejoin", r.primary)
		after := wholePG(t, context.Background(), url)
		t.Logf("rejoined: primary %s, sync standby %s, async standby %s", after.primary, after.sync, after.async)
	})
	args := []string{"promote", r.sync}
	if how.kill {
		args = append(args, "--kill-primary")
	}
	pgScript(t, args...)
	return r.sync
}

// TestPoolFollowsPromotion: a pgx pool on the multi-host URL
// (target_session_attrs=read-write) writes on, one row at a time, while
// the synchronous standby is promoted; after a switchover and after a
// failover its writes resume on the new primary, and every row it had
// acknowledged is there (the promoted standby was synchronous).
func TestPoolFollowsPromotion(t *testing.T) {
	url := clusterURL(t)
	requireRoot(t)
	for _, how := range promotions {
		t.Run(how.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			r := wholePG(t, ctx, url)
			pool, err := pgxpool.New(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close) // after the table is dropped
			table := uniqueName(t, "promote_pool_")
			if _, err := pool.Exec(ctx, "CREATE TABLE "+table+` (id bigint PRIMARY KEY,
				written_on text NOT NULL DEFAULT current_setting('cluster_name'))`); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				if _, err := pool.Exec(ctx, "DROP TABLE IF EXISTS "+table); err != nil {
					t.Errorf("drop %s: %v", table, err)
				}
			})

			w := startWriter(ctx, pool, table)
			w.waitAcked(t, 20)
			newPrimary := promoteSync(t, ctx, url, r, how)
			w.waitAcked(t, w.count()+20) // writes resume after the promotion
			acked, failed, seen := w.stop()
			t.Logf("%s from %s to %s: %d rows acknowledged, %d writes failed meanwhile, with:\n  %s",
				how.name, r.primary, newPrimary, len(acked), failed, strings.Join(seen, "\n  "))

			if name, err := nodeName(ctx, pool); err != nil || name != newPrimary {
				t.Fatalf("the pool is on %q (%v) after the promotion, want %s", name, err, newPrimary)
			}
			var present int
			var lastOn string
			if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+table+" WHERE id = ANY($1)", acked).Scan(&present); err != nil {
				t.Fatal(err)
			}
			if present != len(acked) {
				t.Errorf("%d of %d acknowledged rows on the new primary %s: %d lost", present, len(acked), newPrimary, len(acked)-present)
			}
			if err := pool.QueryRow(ctx, "SELECT written_on FROM "+table+" WHERE id = $1", acked[len(acked)-1]).Scan(&lastOn); err != nil {
				t.Fatal(err)
			}
			if lastOn != newPrimary {
				t.Errorf("the last acknowledged row was written on %s, want the new primary %s", lastOn, newPrimary)
			}
		})
	}
}

// acker runs one write at a time until stopped, and records the ids of
// the acknowledged ones, how many failed, and the first distinct errors:
// the pool's rows, the queue's tasks.
type acker[T any] struct {
	mu     sync.Mutex
	acked  []T
	failed int
	seen   []string // the distinct errors, at most 5, in order
	cancel context.CancelFunc
	done   chan struct{}
}

// startAcker calls write(ctx, i) for i = 1, 2, ... until stop, pause
// after each acknowledged write and a tenth of a second after each failed
// one.
func startAcker[T any](ctx context.Context, pause time.Duration, write func(ctx context.Context, i int) (T, error)) *acker[T] {
	ctx, cancel := context.WithCancel(ctx)
	a := &acker[T]{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(a.done)
		for i := 1; ctx.Err() == nil; i++ {
			id, err := write(ctx, i)
			a.mu.Lock()
			switch {
			case err == nil:
				a.acked = append(a.acked, id)
			case ctx.Err() == nil:
				a.failed++
				if msg := err.Error(); len(a.seen) < 5 && !slices.Contains(a.seen, msg) {
					a.seen = append(a.seen, msg)
				}
			}
			a.mu.Unlock()
			wait := pause
			if err != nil {
				wait = 100 * time.Millisecond
			}
			select {
			case <-ctx.Done():
			case <-time.After(wait):
			}
		}
	}()
	return a
}

func (a *acker[T]) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.acked)
}

// waitAcked waits (up to 3 minutes) until n writes are acknowledged.
func (a *acker[T]) waitAcked(t testing.TB, n int) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for a.count() < n {
		if time.Now().After(deadline) {
			a.mu.Lock()
			defer a.mu.Unlock()
			t.Fatalf("%d of %d writes acknowledged after 3 minutes (%d failed: %s)", len(a.acked), n, a.failed, strings.Join(a.seen, "; "))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop ends the writes and returns the acknowledged ids, the number of
// failed writes and their first distinct errors.
func (a *acker[T]) stop() ([]T, int, []string) {
	a.cancel()
	<-a.done
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.acked, a.failed, a.seen
}

// startWriter inserts rows 1, 2, ... into table through pool.
func startWriter(ctx context.Context, pool *pgxpool.Pool, table string) *acker[int64] {
	return startAcker(ctx, 0, func(ctx context.Context, i int) (int64, error) {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_, err := pool.Exec(ctx, "INSERT INTO "+table+" (id) VALUES ($1)", i)
		return int64(i), err
	})
}
