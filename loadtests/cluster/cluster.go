package cluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Node is one host of the connection string and what it said about itself.
type Node struct {
	// Host and Port are the node's address as the connection string names it.
	Host string
	Port uint16
	// Primary is true when the node is not in recovery.
	Primary bool
	// Err says why the node could not be asked; the other fields are then zero.
	Err error
}

// Addr is the node's host:port.
func (n Node) Addr() string { return net.JoinHostPort(n.Host, strconv.Itoa(int(n.Port))) }

// Standby is one row of the primary's pg_stat_replication: a physical
// standby (the walsenders of logical slots are not listed).
type Standby struct {
	// Name is the standby's application_name (the cluster profile names it after the node).
	Name string
	// Host is the address the standby connects from (client_addr).
	Host string
	// State is the walsender's state, "streaming" once it has caught up.
	State string
	// SyncState is "sync", "async", "potential" or "quorum".
	SyncState string
}

// Topology is what Discover found.
type Topology struct {
	// Nodes are the hosts of the connection string, in its order.
	Nodes []Node
	// Primary is the one node not in recovery.
	Primary Node
	// Standbys are the primary's pg_stat_replication rows of its physical
	// standbys, by name.
	Standbys []Standby
	// VersionNum is the primary's server_version_num, e.g. 180004.
	VersionNum int
}

// Standby returns the standby whose sync_state is state ("sync" or
// "async"), and false when there is none or more than one.
func (t Topology) Standby(state string) (Standby, bool) {
	var found []Standby
	for _, s := range t.Standbys {
		if s.SyncState == state {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		return Standby{}, false
	}
	return found[0], true
}

// Node returns the node whose host is host.
func (t Topology) Node(host string) (Node, bool) {
	for _, n := range t.Nodes {
		if n.Host == host {
			return n, true
		}
	}
	return Node{}, false
}

// Hosts splits a multi-host connection string (keyword/value or URL) into
// one configuration per host, in the string's order, each without
// fallbacks and without target_session_attrs, so that it reaches that host
// whatever its role.
func Hosts(connString string) ([]*pgx.ConnConfig, error) {
	cfg, err := pgx.ParseConfig(connString)
	if err != nil {
		return nil, fmt.Errorf("cluster: parse connection string: %w", err)
	}
	type hostPort struct {
		host string
		port uint16
	}
	all := []hostPort{{cfg.Host, cfg.Port}}
	for _, f := range cfg.Fallbacks {
		all = append(all, hostPort{f.Host, f.Port})
	}
	var out []*pgx.ConnConfig
	seen := map[hostPort]bool{}
	for _, hp := range all {
		// sslmode=prefer lists each host twice (with and without TLS)
		if seen[hp] {
			continue
		}
		seen[hp] = true
		c := cfg.Copy()
		c.Host, c.Port = hp.host, hp.port
		c.Fallbacks = nil
		c.ValidateConnect = nil
		out = append(out, c)
	}
	return out, nil
}

// Discover asks every host of connString whether it is in recovery, and
// the primary for its pg_stat_replication. It fails unless exactly one
// host answers as a primary; a host that does not answer is a Node with
// Err set. Each host gets perHost to answer.
func Discover(ctx context.Context, connString string, perHost time.Duration) (Topology, error) {
	cfgs, err := Hosts(connString)
	if err != nil {
		return Topology{}, err
	}
	var top Topology
	var primaries []Node
	for _, c := range cfgs {
		n := Node{Host: c.Host, Port: c.Port}
		n.Primary, n.Err = isPrimary(ctx, c, perHost)
		top.Nodes = append(top.Nodes, n)
		if n.Err == nil && n.Primary {
			primaries = append(primaries, n)
		}
	}
	if len(primaries) != 1 {
		return top, fmt.Errorf("cluster: %d of %d hosts answer as a primary (want exactly one): %v", len(primaries), len(cfgs), top.Nodes)
	}
	top.Primary = primaries[0]
	for _, c := range cfgs {
		if c.Host == top.Primary.Host && c.Port == top.Primary.Port {
			top.Standbys, top.VersionNum, err = replication(ctx, c, perHost)
			break
		}
	}
	return top, err
}

func isPrimary(ctx context.Context, cfg *pgx.ConnConfig, timeout time.Duration) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return false, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var recovery bool
	if err := conn.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&recovery); err != nil {
		return false, err
	}
	return !recovery, nil
}

func replication(ctx context.Context, cfg *pgx.ConnConfig, timeout time.Duration) ([]Standby, int, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, 0, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var version int
	if err := conn.QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&version); err != nil {
		return nil, 0, err
	}
	// A logical walsender (a consumer streaming a logical slot, no-kafka's)
	// is a row of pg_stat_replication too, with sync_state async: it is
	// not a standby, and is left out by its active logical slot.
	rows, err := conn.Query(ctx, `SELECT r.application_name, coalesce(host(r.client_addr), ''), r.state, r.sync_state
		FROM pg_stat_replication r
		WHERE NOT EXISTS (SELECT 1 FROM pg_replication_slots s WHERE s.active_pid = r.pid AND s.slot_type = 'logical')
		ORDER BY r.application_name`)
	if err != nil {
		return nil, 0, err
	}
	standbys, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Standby, error) {
		var s Standby
		err := r.Scan(&s.Name, &s.Host, &s.State, &s.SyncState)
		return s, err
	})
	return standbys, version, err
}

// Roles names a whole cluster's nodes by role: each node's cluster_name,
// which the cluster profile also gives a standby as its application_name
// (pg1, pg2, pg3).
type Roles struct {
	Primary, Sync, Async string
	// Top is what Discover found.
	Top Topology
}

// DiscoverRoles asks every host of url who is what, and fails unless the
// cluster is whole: one primary, one sync and one async standby streaming
// from it, and every host answering.
func DiscoverRoles(ctx context.Context, url string) (Roles, error) {
	top, err := Discover(ctx, url, 10*time.Second)
	if err != nil {
		return Roles{}, err
	}
	s, okS := top.Standby("sync")
	a, okA := top.Standby("async")
	if !okS || !okA || s.State != "streaming" || a.State != "streaming" {
		return Roles{}, errors.New("pg_stat_replication: want one sync and one async standby streaming")
	}
	for _, n := range top.Nodes {
		if n.Err != nil {
			return Roles{}, n.Err
		}
	}
	cfg, err := HostConfig(url, top.Primary.Host)
	if err != nil {
		return Roles{}, err
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return Roles{}, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var p string
	err = conn.QueryRow(ctx, "SELECT current_setting('cluster_name')").Scan(&p)
	return Roles{Primary: p, Sync: s.Name, Async: a.Name, Top: top}, err
}

// HostConfig is the configuration of host alone of the multi-host
// connection string url (Hosts), or an error when url does not name it.
func HostConfig(url, host string) (*pgx.ConnConfig, error) {
	cfgs, err := Hosts(url)
	if err != nil {
		return nil, err
	}
	for _, c := range cfgs {
		if c.Host == host {
			return c, nil
		}
	}
	return nil, fmt.Errorf("cluster: the connection string names no host %s", host)
}

// WaitReplayed waits until the standby conn has replayed the WAL up to
// lsn (as pg_current_wal_lsn() printed it on the primary), polling every
// 50 ms until ctx ends.
func WaitReplayed(ctx context.Context, conn *pgx.Conn, lsn string) error {
	return poll(ctx, func() (bool, error) {
		var done bool
		err := conn.QueryRow(ctx, "SELECT coalesce(pg_last_wal_replay_lsn() >= $1::pg_lsn, false)", lsn).Scan(&done)
		return done, err
	}, func() error { return fmt.Errorf("standby has not replayed up to %s", lsn) })
}

// WaitSlotSynced waits until the standby conn holds a synchronized,
// persistent copy of the failover slot named slot (pg_replication_slots:
// synced and not temporary; PostgreSQL 17+), polling every 50 ms until ctx
// ends.
func WaitSlotSynced(ctx context.Context, conn *pgx.Conn, slot string) error {
	return poll(ctx, func() (bool, error) {
		var n int
		err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_replication_slots
			WHERE slot_name = $1 AND synced AND NOT temporary`, slot).Scan(&n)
		return n == 1, err
	}, func() error { return fmt.Errorf("slot %s is not synchronized to the standby", slot) })
}

func poll(ctx context.Context, check func() (bool, error), timeoutErr func() error) error {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		ok, err := check()
		if err != nil {
			if ctx.Err() != nil {
				return errors.Join(timeoutErr(), ctx.Err())
			}
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.Join(timeoutErr(), ctx.Err())
		case <-t.C:
		}
	}
}

// Seen reads, through a pool on the multi-host URL, the rows a consumer
// records (deliveries, tasks done), as a reader would see them throughout
// a promotion: an id it saw on the old primary that the new primary does
// not hold is a phantom.
type Seen struct {
	mu     sync.Mutex
	ids    map[string]bool
	cancel context.CancelFunc
	done   chan struct{}
}

// StartSeen runs query every 50 ms (each run 5 s at most; a failed run is
// tried again) until Stop. The query takes the largest cursor seen so far
// as $1 (0 at first) and returns rows of an id (text) and its cursor
// (bigint): a sequence, or a time in microseconds.
func StartSeen(ctx context.Context, pool *pgxpool.Pool, query string) *Seen {
	ctx, cancel := context.WithCancel(ctx)
	w := &Seen{ids: map[string]bool{}, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		var last int64
		for ctx.Err() == nil {
			rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
			rows, err := pool.Query(rctx, query, last)
			if err == nil {
				for rows.Next() {
					var id string
					var cursor int64
					if rows.Scan(&id, &cursor) == nil {
						w.mu.Lock()
						w.ids[id] = true
						w.mu.Unlock()
						last = max(last, cursor)
					}
				}
				rows.Close()
			}
			rcancel()
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return w
}

// Stop ends the reads and returns the ids seen (the same at every call).
func (w *Seen) Stop() []string {
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.AppendSeq(make([]string, 0, len(w.ids)), maps.Keys(w.ids))
}
