package scenario

import (
	"context"
	"fmt"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/cluster"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/cost"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// The nodes whose CPU the durability scenario counts, each from its own
// process's counters (/proc/<pid>/stat: the process and its descendants,
// package cost), found on this machine:
//   - every Postgres host of the configuration's DATABASE_URL, asked for
//     a backend's pid (pg_backend_pid) and its cluster_name: the
//     backend's parent is that node's postmaster (a group named after
//     the node, "pg1"; "postgres" on a server without a cluster_name);
//   - every RabbitMQ and Kafka node of the cluster profile, from the pid
//     files scripts/cluster.sh writes (<stack>/cluster/rabbitmq/<node>/
//     rabbitmq.pid, <stack>/cluster/kafka/<node>/kafka.pid), named after
//     the node ("rmq1", "kafka1").
// On other hosts the same counters would have to be read there (an agent
// reading /proc, or the node's own metrics: RabbitMQ's and the JVM's
// process CPU time); see docs/cluster.md.

// DurabilityServiceGroup is the process group of the configuration's
// service; the others are nodes.
const DurabilityServiceGroup = "service"

// durabilityGroups is what c's points count: its service (the listener
// on its port), then every node of the servers it uses: the Postgres
// hosts, and the broker's nodes on the specialists' sides (a server
// idle in a configuration is left out, so that the total is what the
// configuration costs).
func (e *Env) durabilityGroups(ctx context.Context, c DurabilityConfig, stackDir string) cost.Set {
	port := 0
	for _, s := range c.Pair.Services() {
		if s.Name == c.Service {
			port = s.Port + e.PortOffset
		}
	}
	set := cost.Set{cost.Process(DurabilityServiceGroup, 0, port)}
	set = append(set, postgresNodes(ctx, c.Env["DATABASE_URL"])...)
	switch {
	case c.Env["RABBITMQ_URL"] != "":
		set = append(set, pidFileNodes(filepath.Join(stackDir, "cluster", "rabbitmq"), "rabbitmq.pid")...)
	case c.Env["KAFKA_BROKERS"] != "":
		set = append(set, pidFileNodes(filepath.Join(stackDir, "cluster", "kafka"), "kafka.pid")...)
	}
	return set
}

// postgresNodes is a group per host of the connection string u: the
// postmaster of a backend it opens there, named by the server's
// cluster_name. A host that does not answer is a group without roots
// whose source says why.
func postgresNodes(ctx context.Context, u string) cost.Set {
	cfgs, err := cluster.Hosts(u)
	if err != nil {
		return cost.Set{{Name: "postgres", Source: "not found: " + err.Error()}}
	}
	var out cost.Set
	for _, cfg := range cfgs {
		name, pid, err := nodeBackend(ctx, cfg)
		if err != nil {
			out = append(out, cost.Group{Name: cfg.Host, Source: "not found: " + err.Error()})
			continue
		}
		g := cost.Postgres("", pid)
		g.Name = name
		out = append(out, g)
	}
	return out
}

// nodeBackend connects to one host and returns its cluster_name (or
// "postgres") and the pid of the backend serving the connection.
func nodeBackend(ctx context.Context, cfg *pgx.ConnConfig) (string, int, error) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(cctx, cfg)
	if err != nil {
		return "", 0, err
	}
	defer conn.Close(context.Background())
	var name string
	var pid int
	if err := conn.QueryRow(cctx, "SELECT current_setting('cluster_name'), pg_backend_pid()").Scan(&name, &pid); err != nil {
		return "", 0, err
	}
	if name == "" {
		name = "postgres"
	}
	return name, pid, nil
}

// pidFileNodes is a group per node folder of dir holding a live pid
// file named file, by node name, in name order.
func pidFileNodes(dir, file string) cost.Set {
	paths, _ := filepath.Glob(filepath.Join(dir, "*", file))
	slices.Sort(paths)
	var out cost.Set
	for _, p := range paths {
		node := filepath.Base(filepath.Dir(p))
		if pid := cost.ReadPIDFile(p); pid > 0 {
			out = append(out, cost.Group{Name: node, Roots: []int{pid}, Source: "pid file " + p})
		} else {
			out = append(out, cost.Group{Name: node, Source: "not running (no live pid in " + p + ")"})
		}
	}
	return out
}

// dropSlot drops the replication slot name on e.PostgresURL when no
// consumer holds it; a slot left there would hold the primary's WAL back.
func (e *Env) dropSlot(ctx context.Context, name string) {
	conn, err := e.connect(ctx)
	if err != nil {
		e.logf("slot %s not dropped: %v", name, err)
		return
	}
	defer conn.Close(context.Background())
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := conn.Exec(cctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots
		WHERE slot_name = $1 AND NOT active`, name); err != nil {
		e.logf("slot %s not dropped: %v", name, err)
	}
}

// durabilityCleanup deletes the queues and topics the configurations
// used (their names are this run's), logging what it could not.
func durabilityCleanup(c DurabilityCluster, configs []DurabilityConfig, logf func(string, ...any)) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, x := range configs {
		var err error
		switch x.Service {
		case pairs.RabbitMQ:
			err = deleteQueues(firstURL(c.RabbitMQURLs), x.Env["RABBITMQ_QUEUE"])
		case pairs.Kafka:
			err = deleteTopic(ctx, c.KafkaBrokers, x.Env["KAFKA_TOPIC"])
		}
		if err != nil {
			logf("durability cleanup of %s %s: %v", x.Service, x.Name(), err)
		}
	}
}

// firstURL is the first of a comma-separated list of URLs.
func firstURL(urls string) string {
	u, _, _ := strings.Cut(urls, ",")
	return strings.TrimSpace(u)
}

// PostgresMajor returns the major version of the server at u.
func PostgresMajor(ctx context.Context, u string) (int, string, error) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(cctx, u)
	if err != nil {
		return 0, "", err
	}
	defer conn.Close(context.Background())
	var num int
	var version string
	if err := conn.QueryRow(cctx, "SELECT current_setting('server_version_num')::int, current_setting('server_version')").Scan(&num, &version); err != nil {
		return 0, "", fmt.Errorf("server version: %w", err)
	}
	return num / 10000, version, nil
}

// MetricSyncStandbys is a fixed point's count of synchronous standbys
// streaming from the primary when it began (pg_stat_replication,
// sync_state = 'sync'): with none, on and remote_apply waited for no
// standby.
const MetricSyncStandbys = "synchronous_standbys"

// checkSyncCommit connects as c's service does (its DATABASE_URL) and
// fails unless the session's synchronous_commit is the configuration's
// (SettingSyncCommit) or the server's default (the other sides); it
// records the synchronous standbys streaming in m.
func checkSyncCommit(ctx context.Context, c DurabilityConfig, m map[driver.Metric]float64) error {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(cctx, c.Env["DATABASE_URL"])
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	var got string
	var standbys int
	err = conn.QueryRow(cctx, `SELECT current_setting('synchronous_commit'),
		(SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync')::int`).Scan(&got, &standbys)
	if err != nil {
		return err
	}
	m[MetricSyncStandbys] = float64(standbys)
	if c.Setting == SettingSyncCommit && got != c.Value {
		return fmt.Errorf("the service's connections would run with synchronous_commit %s, not %s", got, c.Value)
	}
	return nil
}
