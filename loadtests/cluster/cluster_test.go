package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// clusterURL returns CLUSTER_DATABASE_URL, or skips: the cluster profile is
// not part of the single-node stack that make test runs against.
func clusterURL(t testing.TB) string {
	t.Helper()
	return clusterEnv(t, "CLUSTER_DATABASE_URL")
}

// clusterEnv returns the cluster profile's variable name, or skips the
// test under -short or when name is not set: the cluster profile is not
// part of the single-node stack that make test runs against.
func clusterEnv(t testing.TB, name string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: the cluster profile's test needs the running cluster")
	}
	v := strings.TrimSpace(os.Getenv(name))
	if v == "" {
		t.Skip(name + ` is not set: the cluster profile is not part of make test; start it (make up-cluster, root) and run make test-cluster, or eval "$(bash scripts/cluster.sh env)" first`)
	}
	return v
}

// uniqueName returns prefix and 8 random hex characters, a name no other
// test run uses.
func uniqueName(t testing.TB, prefix string) string {
	t.Helper()
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return prefix + hex.EncodeToString(b)
}

// connect opens cfg and closes it when the test ends.
func connect(t testing.TB, ctx context.Context, cfg *pgx.ConnConfig) *pgx.Conn {
	t.Helper()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("connect to %s:%d: %v", cfg.Host, cfg.Port, err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// hostConfig returns the configuration of the one host named host.
func hostConfig(t testing.TB, connString, host string) *pgx.ConnConfig {
	t.Helper()
	c, err := HostConfig(connString, host)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestHostsSplitsAMultiHostString(t *testing.T) {
	t.Parallel()
	for _, s := range []string{
		"host=10.77.0.11,10.77.0.12,10.77.0.13 port=5432 user=postgres dbname=wpe sslmode=prefer target_session_attrs=read-write",
		"postgres://postgres@10.77.0.11:5432,10.77.0.12:5432,10.77.0.13:5432/wpe?sslmode=disable&target_session_attrs=read-write",
	} {
		cfgs, err := Hosts(s)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		var got []string
		for _, c := range cfgs {
			got = append(got, c.Host)
			if c.Port != 5432 || c.Database != "wpe" || len(c.Fallbacks) != 0 || c.ValidateConnect != nil {
				t.Errorf("%s: host %s: port %d, database %q, %d fallbacks, validate set %v; want 5432, wpe, none, unset",
					s, c.Host, c.Port, c.Database, len(c.Fallbacks), c.ValidateConnect != nil)
			}
		}
		if strings.Join(got, ",") != "10.77.0.11,10.77.0.12,10.77.0.13" {
			t.Errorf("%s: hosts %v, want the three in order, once each", s, got)
		}
	}
	if _, err := Hosts("host=a port=notaport"); err == nil {
		t.Error("a bad port parsed")
	}
}

func TestDiscoverWithoutAPrimaryFails(t *testing.T) {
	t.Parallel()
	// Port 1 on loopback: refused at once, no server involved.
	top, err := Discover(context.Background(), "host=127.0.0.1,localhost port=1 user=postgres sslmode=disable connect_timeout=2", 3*time.Second)
	if err == nil {
		t.Fatal("Discover found a primary where no server listens")
	}
	if len(top.Nodes) != 2 {
		t.Fatalf("Discover reports %d nodes, want the 2 of the string", len(top.Nodes))
	}
	for _, n := range top.Nodes {
		if n.Err == nil || n.Primary {
			t.Errorf("node %s: err %v, primary %v; want an error and not primary", n.Addr(), n.Err, n.Primary)
		}
	}
}

func TestTopologyStandby(t *testing.T) {
	t.Parallel()
	top := Topology{Standbys: []Standby{{Name: "pg2", SyncState: "sync"}, {Name: "pg3", SyncState: "async"}, {Name: "pg4", SyncState: "async"}}}
	if s, ok := top.Standby("sync"); !ok || s.Name != "pg2" {
		t.Errorf("Standby(sync) = %v, %v; want pg2", s, ok)
	}
	if _, ok := top.Standby("async"); ok {
		t.Error("Standby(async) found one of two")
	}
}

// TestClusterReplicates checks the running cluster profile: one primary,
// one synchronous and one asynchronous standby streaming; the multi-host
// string reaches the primary even when it is named last; a row written on
// the primary with remote_apply is readable on the synchronous standby at
// once and on the asynchronous one once it has replayed; a standby refuses
// writes; and on 17+ a failover slot is synchronized to the sync standby.
func TestClusterReplicates(t *testing.T) {
	url := clusterURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	top, err := Discover(ctx, url, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range top.Nodes {
		if n.Err != nil {
			t.Fatalf("node %s does not answer: %v", n.Addr(), n.Err)
		}
	}
	syncSB, ok := top.Standby("sync")
	if !ok {
		t.Fatalf("want exactly one standby with sync_state = sync, pg_stat_replication has %+v", top.Standbys)
	}
	asyncSB, ok := top.Standby("async")
	if !ok {
		t.Fatalf("want exactly one standby with sync_state = async, pg_stat_replication has %+v", top.Standbys)
	}
	for _, s := range []Standby{syncSB, asyncSB} {
		if s.State != "streaming" {
			t.Errorf("standby %s (%s) is %q, want streaming", s.Name, s.Host, s.State)
		}
		if _, ok := top.Node(s.Host); !ok {
			t.Errorf("standby %s connects from %s, which is not a host of the connection string", s.Name, s.Host)
		}
	}
	t.Logf("PostgreSQL %d: primary %s, sync standby %s (%s), async standby %s (%s)",
		top.VersionNum, top.Primary.Addr(), syncSB.Name, syncSB.Host, asyncSB.Name, asyncSB.Host)

	// The multi-host string with the primary named last still lands on it:
	// target_session_attrs=read-write skips the standbys.
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ValidateConnect == nil {
		t.Fatal("CLUSTER_DATABASE_URL has no target_session_attrs=read-write")
	}
	var standbysFirst []*pgconn.FallbackConfig
	var last *pgconn.FallbackConfig
	for _, f := range append([]*pgconn.FallbackConfig{{Host: cfg.Host, Port: cfg.Port, TLSConfig: cfg.TLSConfig}}, cfg.Fallbacks...) {
		if f.Host == top.Primary.Host && f.Port == top.Primary.Port {
			last = f
		} else {
			standbysFirst = append(standbysFirst, f)
		}
	}
	if last == nil {
		t.Fatal("the primary is not a host of the connection string")
	}
	ordered := append(standbysFirst, last)
	cfg.Host, cfg.Port, cfg.TLSConfig, cfg.Fallbacks = ordered[0].Host, ordered[0].Port, ordered[0].TLSConfig, ordered[1:]
	primary := connect(t, ctx, cfg)
	var addr string
	var recovery bool
	if err := primary.QueryRow(ctx, "SELECT host(inet_server_addr()), pg_is_in_recovery()").Scan(&addr, &recovery); err != nil {
		t.Fatal(err)
	}
	if addr != top.Primary.Host || recovery {
		t.Fatalf("the multi-host string (primary last) reached %s, in recovery %v; want the primary %s", addr, recovery, top.Primary.Host)
	}

	table := uniqueName(t, "cluster_check_")
	if _, err := primary.Exec(ctx, "CREATE TABLE "+table+" (id int PRIMARY KEY, note text NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := primary.Exec(ctx, "DROP TABLE IF EXISTS "+table); err != nil {
			t.Errorf("drop %s: %v", table, err)
		}
	})
	// remote_apply: the commit returns once the synchronous standby has
	// applied it, so the row must be visible there without waiting.
	tx, err := primary.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SET LOCAL synchronous_commit = remote_apply"); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "INSERT INTO "+table+" VALUES (1, 'written on the primary')"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	var lsn string
	if err := primary.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&lsn); err != nil {
		t.Fatal(err)
	}

	readRow := func(conn *pgx.Conn, who string) {
		t.Helper()
		var note string
		if err := conn.QueryRow(ctx, "SELECT note FROM "+table+" WHERE id = 1").Scan(&note); err != nil {
			t.Errorf("%s: read the row written on the primary: %v", who, err)
		} else if note != "written on the primary" {
			t.Errorf("%s: note %q", who, note)
		}
	}
	syncConn := connect(t, ctx, hostConfig(t, url, syncSB.Host))
	readRow(syncConn, "sync standby "+syncSB.Name+" (right after a remote_apply commit)")

	asyncConn := connect(t, ctx, hostConfig(t, url, asyncSB.Host))
	waitCtx, waitCancel := context.WithTimeout(ctx, 30*time.Second)
	defer waitCancel()
	if err := WaitReplayed(waitCtx, asyncConn, lsn); err != nil {
		t.Fatalf("async standby %s: %v", asyncSB.Name, err)
	}
	readRow(asyncConn, "async standby "+asyncSB.Name)

	_, err = syncConn.Exec(ctx, "INSERT INTO "+table+" VALUES (2, 'written on a standby')")
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "25006" {
		t.Errorf("a write on the standby %s: %v; want SQLSTATE 25006 (read_only_sql_transaction)", syncSB.Name, err)
	}

	t.Run("failover slot", func(t *testing.T) {
		if top.VersionNum < 170000 {
			t.Skipf("PostgreSQL %d has no failover slots (17+): a logical slot lives on the primary only and is lost on promotion", top.VersionNum)
		}
		slot := uniqueName(t, "cluster_check_")
		if _, err := primary.Exec(ctx, "SELECT pg_create_logical_replication_slot($1, 'pgoutput', false, false, true)", slot); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, err := primary.Exec(ctx, "SELECT pg_drop_replication_slot($1)", slot); err != nil {
				t.Errorf("drop slot %s: %v", slot, err)
			}
		})
		var failover bool
		if err := primary.QueryRow(ctx, "SELECT failover FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&failover); err != nil {
			t.Fatal(err)
		}
		if !failover {
			t.Fatalf("slot %s on the primary has failover = false", slot)
		}
		// The standby keeps a new synced slot temporary until the primary's
		// copy has moved past the standby's own catalog xmin: until its
		// consumer confirms a position and a running-transactions record
		// (every 15 s on a busy primary) is decoded after it. Log that
		// record now and advance the slot as a consumer that has read
		// everything would, every half second, while the standby is asked.
		syncCtx, syncCancel := context.WithTimeout(ctx, 90*time.Second)
		stop := make(chan struct{})
		advanced := make(chan error, 1)
		go func() {
			t := time.NewTicker(500 * time.Millisecond)
			defer t.Stop()
			for {
				if _, err := primary.Exec(ctx, "SELECT pg_log_standby_snapshot(), pg_replication_slot_advance($1, pg_current_wal_lsn())", slot); err != nil {
					advanced <- err
					syncCancel()
					return
				}
				select {
				case <-stop:
					advanced <- nil
					return
				case <-t.C:
				}
			}
		}()
		err := WaitSlotSynced(syncCtx, syncConn, slot)
		syncCancel()
		close(stop)
		if aerr := <-advanced; aerr != nil {
			t.Fatalf("advance slot %s on the primary: %v", slot, aerr)
		}
		if err != nil {
			t.Fatalf("sync standby %s: %v", syncSB.Name, err)
		}
	})
}
