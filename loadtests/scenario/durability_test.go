package scenario

import (
	"context"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/versions"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/postgres"
)

const testClusterURL = "postgres://postgres:postgres@10.77.0.11:5432,10.77.0.12:5432,10.77.0.13:5432/wpe?sslmode=disable&target_session_attrs=read-write"

func TestWithRuntimeParam(t *testing.T) {
	u, err := WithRuntimeParam(testClusterURL, SettingSyncCommit, "remote_apply")
	if err != nil {
		t.Fatal(err)
	}
	p, _ := url.Parse(u)
	if p.Host != "10.77.0.11:5432,10.77.0.12:5432,10.77.0.13:5432" || p.Query().Get("target_session_attrs") != "read-write" || p.Query().Get(SettingSyncCommit) != "remote_apply" {
		t.Fatalf("WithRuntimeParam = %s", u)
	}
	again, _ := WithRuntimeParam(u, SettingSyncCommit, "local")
	if q, _ := url.Parse(again); len(q.Query()[SettingSyncCommit]) != 1 || q.Query().Get(SettingSyncCommit) != "local" {
		t.Fatalf("a second value did not replace the first: %s", again)
	}
	for _, bad := range []string{"host=a dbname=b", "mysql://x/y", "://"} {
		if _, err := WithRuntimeParam(bad, "k", "v"); err == nil {
			t.Errorf("WithRuntimeParam(%q) accepted it", bad)
		}
	}
}

func TestDurabilityConfigs(t *testing.T) {
	cl := DurabilityCluster{DatabaseURL: testClusterURL, RabbitMQURLs: "amqp://a/,amqp://b/", KafkaBrokers: "k1:9092,k2:9092", PostgresMajor: 15}
	cs, err := DurabilityConfigs(cl, "t1")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range cs {
		names = append(names, c.Service+" "+c.Name())
		if c.Env["DATABASE_SCHEMA"] != DurabilitySchema(c.Service) || !strings.HasPrefix(c.Env["DATABASE_SCHEMA"], "durability_") {
			t.Errorf("%s: schema %q", c.Service, c.Env["DATABASE_SCHEMA"])
		}
		checkConfigEnv(t, c, cl)
	}
	want := "no-rabbitmq synchronous_commit=local,no-rabbitmq synchronous_commit=on,no-rabbitmq synchronous_commit=remote_apply," +
		"rabbitmq QUEUE_TYPE=classic,rabbitmq QUEUE_TYPE=quorum," +
		"no-kafka synchronous_commit=local,no-kafka synchronous_commit=on,no-kafka synchronous_commit=remote_apply," +
		"kafka KAFKA_ACKS=1,kafka KAFKA_ACKS=all"
	if got := strings.Join(names, ","); got != want {
		t.Fatalf("configurations:\n got %s\nwant %s", got, want)
	}
	cl.PostgresMajor = 18
	cs, _ = DurabilityConfigs(cl, "t1")
	if p := cs[5].Env["SLOT_PLUGIN"]; p != "pgoutput" {
		t.Errorf("no-kafka on 18 decodes with %q, want pgoutput", p)
	}
	if _, err := DurabilityConfigs(DurabilityCluster{DatabaseURL: "host=x"}, "t"); err == nil {
		t.Error("a keyword/value connection string was accepted: the setting could not be added to it")
	}
}

// checkConfigEnv checks the environment of one configuration of cl.
func checkConfigEnv(t *testing.T, c DurabilityConfig, cl DurabilityCluster) {
	t.Helper()
	e := c.Env
	switch c.Service {
	case pairs.NoRabbitMQ, pairs.NoKafka:
		u, _ := url.Parse(e["DATABASE_URL"])
		if u.Query().Get(SettingSyncCommit) != c.Value {
			t.Errorf("%s %s: DATABASE_URL %s", c.Service, c.Name(), e["DATABASE_URL"])
		}
		if c.Service == pairs.NoKafka && (e["SYNCHRONOUS_COMMIT"] != c.Value || e["SLOT_NAME"] != DurabilitySlot || e["SLOT_PLUGIN"] != "wal2json") {
			t.Errorf("no-kafka %s: %v", c.Name(), e)
		}
	case pairs.RabbitMQ:
		if e["RABBITMQ_URL"] != cl.RabbitMQURLs || e[SettingQueueType] != c.Value || e["RABBITMQ_QUEUE"] != "durability-t1-"+c.Value || e["DATABASE_URL"] != cl.DatabaseURL {
			t.Errorf("rabbitmq %s: %v", c.Name(), e)
		}
	case pairs.Kafka:
		if e["KAFKA_BROKERS"] != cl.KafkaBrokers || e[SettingAcks] != c.Value || e["KAFKA_REPLICATION_FACTOR"] != "3" ||
			e["KAFKA_MIN_INSYNC_REPLICAS"] != "2" || !strings.Contains(e["KAFKA_TOPIC"], "t1") || e["DATABASE_URL"] != cl.DatabaseURL {
			t.Errorf("kafka %s: %v", c.Name(), e)
		}
	}
}

func TestDurabilityOptions(t *testing.T) {
	o := DurabilityDefaults
	if err := o.Validate(); err == nil {
		t.Error("options without a cluster passed")
	}
	o.Cluster = DurabilityCluster{DatabaseURL: "postgres://x/y", RabbitMQURLs: "amqp://a/", KafkaBrokers: "k:9092"}
	for _, x := range []DurabilityOptions{o, func() DurabilityOptions { s := DurabilitySmall; s.Cluster = o.Cluster; return s }()} {
		if err := x.Validate(); err != nil {
			t.Errorf("%v", err)
		}
	}
	// The budget: the ten configurations, 3 windows of 30 s each (issue
	// 40), in about 35 minutes.
	if o.Rounds < 3 || o.Duration < 30*time.Second {
		t.Errorf("defaults: %d windows of %s, want at least 3 of 30 s", o.Rounds, o.Duration)
	}
	if e := o.Estimate(10); e.Typical > 40*time.Minute || e.Typical < 20*time.Minute || e.Bound < e.Typical || e.Attacks != 90 {
		t.Errorf("estimate %+v: want about 35 minutes typically, 90 attacks", e)
	}
	if x := o; true {
		x.Rounds = 0
		if err := x.Validate(); err == nil || !strings.Contains(err.Error(), "rounds 0") {
			t.Errorf("0 rounds: %v", err)
		}
	}
	if n := o.Count(); n != 10 {
		t.Errorf("%d configurations, want 10", n)
	}
	o.Only = []string{"kafka KAFKA_ACKS=all"}
	if n := o.Count(); n != 1 {
		t.Errorf("-durability-only kept %d configurations, want 1", n)
	}
	// The clusters needed follow the configurations kept: the Postgres
	// sides alone need no broker's addresses.
	for only, want := range map[string]string{"": "rabbitmq kafka", "no-rabbitmq,no-kafka": "", "rabbitmq QUEUE": "rabbitmq", "kafka KAFKA_ACKS=all": "kafka"} {
		x := DurabilityDefaults
		if only != "" {
			x.Only = strings.Split(only, ",")
		}
		if got := strings.Join(x.Needs(), " "); got != want {
			t.Errorf("-durability-only %q needs %q, want %q", only, got, want)
		}
		x.Cluster = DurabilityCluster{DatabaseURL: "postgres://x/y"}
		if err := x.Validate(); (err == nil) != (want == "") {
			t.Errorf("-durability-only %q without brokers' addresses: %v", only, err)
		}
	}
}

// TestSyncCommitReachesTheServicesPool: the URL parameter is what the
// services' pool (kit/postgres.Open) and a replication connection (as
// no-kafka's) run with.
func TestSyncCommitReachesTheServicesPool(t *testing.T) {
	base := cmpOr(os.Getenv("DATABASE_URL"), versions.DefaultPostgresURL)
	if testing.Short() {
		t.Skip("-short: needs Postgres")
	}
	for _, mode := range SyncCommitModes {
		u, err := WithRuntimeParam(base, SettingSyncCommit, mode)
		if err != nil {
			t.Fatal(err)
		}
		pooled, replication := showSyncCommit(t, u)
		if pooled != mode || replication != mode {
			t.Errorf("with %s: the pool shows %q, a replication connection %q", mode, pooled, replication)
		}
	}
}

// cmpOr is a, or b when a is empty.
func cmpOr(a, b string) string {
	if a == "" {
		return b
	}
	return a
}

// showSyncCommit is SHOW synchronous_commit through a pool of the
// services' kit opened on u, and through a replication connection.
func showSyncCommit(t *testing.T, u string) (pooled, replication string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := postgres.Open(ctx, postgres.Config{URL: u})
	if err != nil {
		t.Fatalf("no Postgres (DATABASE_URL, or make up; -short skips this test): %v", err)
	}
	defer pool.Close()
	if err := pool.QueryRow(ctx, "SHOW synchronous_commit").Scan(&pooled); err != nil {
		t.Fatal(err)
	}
	repl, _ := WithRuntimeParam(u, "replication", "database")
	conn, err := pgconn.Connect(ctx, repl)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	res, err := conn.Exec(ctx, "SHOW synchronous_commit").ReadAll()
	if err != nil || len(res) != 1 || len(res[0].Rows) != 1 {
		t.Fatalf("replication connection: %v, %v", res, err)
	}
	return pooled, string(res[0].Rows[0][0])
}

// TestCheckSyncCommit: a configuration whose URL carries its setting
// passes; one whose URL does not (the server's default, on) fails,
// naming both.
func TestCheckSyncCommit(t *testing.T) {
	base := cmpOr(os.Getenv("DATABASE_URL"), versions.DefaultPostgresURL)
	if testing.Short() {
		t.Skip("-short: needs Postgres")
	}
	ctx := context.Background()
	u, _ := WithRuntimeParam(base, SettingSyncCommit, "remote_apply")
	m := map[driver.Metric]float64{}
	good := DurabilityConfig{Setting: SettingSyncCommit, Value: "remote_apply", Env: map[string]string{"DATABASE_URL": u}}
	if err := checkSyncCommit(ctx, good, m); err != nil {
		t.Fatal(err)
	}
	if _, ok := m[MetricSyncStandbys]; !ok {
		t.Errorf("no %s recorded: %v", MetricSyncStandbys, m)
	}
	bad := DurabilityConfig{Setting: SettingSyncCommit, Value: "local", Env: map[string]string{"DATABASE_URL": base}}
	if err := checkSyncCommit(ctx, bad, m); err == nil || !strings.Contains(err.Error(), "not local") {
		t.Errorf("a URL without the setting passed: %v", err)
	}
}
