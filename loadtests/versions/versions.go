package versions

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
)

// Config says where the servers are.
type Config struct {
	// PostgresURL defaults to DATABASE_URL or the stack's Postgres.
	PostgresURL string
	// RabbitMQManagementURL defaults to http://guest:guest@localhost:15672.
	RabbitMQManagementURL string
	// MongoURL defaults to MONGO_URL or mongodb://localhost:27017/.
	MongoURL string
	// RedisURL defaults to REDIS_URL or redis://localhost:6379/0.
	RedisURL string
	// Root is the repository root, to find .stack/kafka/libs (or
	// STACK_DIR) and docker-compose.yml.
	Root string
}

// DefaultPostgresURL is the stack's Postgres.
const DefaultPostgresURL = "postgres://postgres:postgres@localhost:5432/wpe?sslmode=disable"

// FromEnv fills a Config from DATABASE_URL, RABBITMQ_MANAGEMENT_URL,
// MONGO_URL and REDIS_URL, with the stack's defaults.
func FromEnv(root string) Config {
	c := Config{
		PostgresURL:           os.Getenv("DATABASE_URL"),
		RabbitMQManagementURL: os.Getenv("RABBITMQ_MANAGEMENT_URL"),
		MongoURL:              os.Getenv("MONGO_URL"),
		RedisURL:              os.Getenv("REDIS_URL"),
		Root:                  root,
	}
	if c.PostgresURL == "" {
		c.PostgresURL = DefaultPostgresURL
	}
	if c.RabbitMQManagementURL == "" {
		c.RabbitMQManagementURL = "http://guest:guest@localhost:15672"
	}
	if c.MongoURL == "" {
		c.MongoURL = "mongodb://localhost:27017/"
	}
	if c.RedisURL == "" {
		c.RedisURL = "redis://localhost:6379/0"
	}
	return c
}

// Collect asks every server, each within a few seconds, and measures
// this machine's fsync cost (once per process, about 20 s: Fsync).
func Collect(ctx context.Context, c Config) driver.Versions {
	v := driver.Versions{Errors: map[string]string{}}
	fail := func(server string, err error) { v.Errors[server] = err.Error() }
	if s, err := Postgres(ctx, c.PostgresURL); err != nil {
		fail("postgres", err)
	} else {
		v.Postgres = s
		if set, err := PostgresSettings(ctx, c.PostgresURL); err != nil {
			fail("postgres settings", err)
		} else {
			v.PostgresSettings = set
		}
		if w, err := Wal2json(ctx, s); err != nil {
			fail("wal2json", err)
		} else {
			v.Wal2json = w
		}
	}
	if r, e, err := RabbitMQ(ctx, c.RabbitMQManagementURL); err != nil {
		fail("rabbitmq", err)
	} else {
		v.RabbitMQ, v.Erlang = r, e
	}
	if k, err := Kafka(c.Root); err != nil {
		fail("kafka", err)
	} else {
		v.Kafka = k
	}
	if m, flavor, ferret, err := Mongo(ctx, c.MongoURL); err != nil {
		fail("mongo", err)
	} else {
		v.Mongo, v.MongoFlavor, v.FerretDB = m, flavor, ferret
	}
	if r, err := Redis(ctx, c.RedisURL); err != nil {
		fail("redis", err)
	} else {
		v.Redis = r
	}
	v.Fsync = Fsync(ctx, c.PostgresURL)
	if len(v.Errors) == 0 {
		v.Errors = nil
	}
	return v
}

// Postgres returns SHOW server_version.
func Postgres(ctx context.Context, url string) (string, error) {
	return show(ctx, url, "server_version")
}

// PostgresMajorText is the major version of a server_version as it is
// written: "15" of "15.18 (Debian 15.18-0+deb12u1)", "18" of "18.4",
// "19devel" of "19devel".
func PostgresMajorText(serverVersion string) string {
	major, _, _ := strings.Cut(strings.TrimSpace(serverVersion), ".")
	major, _, _ = strings.Cut(major, " ")
	return major
}

// PostgresMajor is the number of PostgresMajorText (15, 18), 0 when it is
// not one ("19devel", "").
func PostgresMajor(serverVersion string) int {
	n, _ := strconv.Atoi(PostgresMajorText(serverVersion))
	return n
}

// Wal2json returns the version of the wal2json output plugin for a
// server of serverVersion: Debian's postgresql-<major>-wal2json package,
// as dpkg-query knows it on this machine (the stack's server runs here).
func Wal2json(ctx context.Context, serverVersion string) (string, error) {
	pkg := "postgresql-" + PostgresMajorText(serverVersion) + "-wal2json"
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "dpkg-query", "-W", "-f=${Version}", pkg).Output()
	if v := strings.TrimSpace(string(out)); err == nil && v != "" {
		return v + " (Debian package " + pkg + ")", nil
	}
	return "", fmt.Errorf("dpkg-query %s: %v (not a Debian package here)", pkg, err)
}

// PostgresSettingNames are the server settings a run records: memory,
// the planner's costs, durability and WAL, and autovacuum's pace.
var PostgresSettingNames = []string{
	"shared_buffers", "work_mem", "effective_cache_size", "random_page_cost",
	"synchronous_commit", "fsync", "wal_level", "max_wal_size", "checkpoint_timeout",
	"default_toast_compression", "autovacuum_naptime", "max_connections",
}

// PostgresSettings returns the current value, with its unit, of every
// setting of PostgresSettingNames, within 5 s.
func PostgresSettings(ctx context.Context, url string) (map[string]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, "SELECT name, current_setting(name) FROM pg_settings WHERE name = ANY($1)", PostgresSettingNames)
	if err != nil {
		return nil, err
	}
	set, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([2]string, error) {
		var kv [2]string
		return kv, r.Scan(&kv[0], &kv[1])
	})
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(set))
	for _, kv := range set {
		out[kv[0]] = kv[1]
	}
	return out, nil
}

// show returns SHOW setting on a connection of its own, within 5 s.
func show(ctx context.Context, url, setting string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return "", err
	}
	defer conn.Close(context.Background())
	var s string
	err = conn.QueryRow(ctx, "SHOW "+setting).Scan(&s)
	return s, err
}

// RabbitMQ returns rabbitmq_version and erlang_version from
// GET <mgmt>/api/overview (credentials in the URL's user info).
func RabbitMQ(ctx context.Context, mgmt string) (string, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(mgmt, "/")+"/api/overview", nil)
	if err != nil {
		return "", "", err
	}
	if u := req.URL.User; u != nil {
		pw, _ := u.Password()
		req.SetBasicAuth(u.Username(), pw)
		req.URL.User = nil
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", "", fmt.Errorf("/api/overview answered %d", resp.StatusCode)
	}
	var o struct {
		RabbitMQ string `json:"rabbitmq_version"`
		Erlang   string `json:"erlang_version"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&o); err != nil {
		return "", "", err
	}
	return o.RabbitMQ, o.Erlang, nil
}

var (
	kafkaJar   = regexp.MustCompile(`^kafka-server-(\d[\w.\-]*)\.jar$`)
	kafkaImage = regexp.MustCompile(`(?m)image:\s*["']?(\S*kafka\S*):([\w.\-]+)`)
)

// Kafka learns the broker's version from the native stack's jars
// (STACK_DIR or <root>/.stack, kafka/libs/kafka-server-X.jar), else from
// docker-compose.yml's Kafka image tag. (The Kafka protocol has no
// "version" request: ApiVersions lists API ranges, not a release.)
func Kafka(root string) (string, error) {
	stack := os.Getenv("STACK_DIR")
	if stack == "" {
		stack = filepath.Join(root, ".stack")
	}
	if es, err := os.ReadDir(filepath.Join(stack, "kafka", "libs")); err == nil {
		for _, e := range es {
			if m := kafkaJar.FindStringSubmatch(e.Name()); m != nil {
				return m[1] + " (native stack jars)", nil
			}
		}
	}
	if b, err := os.ReadFile(filepath.Join(root, "docker-compose.yml")); err == nil {
		if m := kafkaImage.FindSubmatch(b); m != nil {
			return fmt.Sprintf("%s (docker image %s)", m[2], m[1]), nil
		}
	}
	return "", fmt.Errorf("no kafka-server jar under %s/kafka/libs and no Kafka image in docker-compose.yml", stack)
}

// Mongo runs buildInfo and returns the version, the flavor ("FerretDB" or
// "MongoDB") and FerretDB's own version.
func Mongo(ctx context.Context, url string) (version, flavor, ferret string, err error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	client, err := mongo.Connect(options.Client().ApplyURI(url).SetServerSelectionTimeout(4 * time.Second))
	if err != nil {
		return "", "", "", err
	}
	defer func() { _ = client.Disconnect(context.Background()) }()
	b, err := MongoBuild(ctx, client.Database("admin"))
	return b.Version, b.Flavor, b.FerretDB, err
}

// MongoServer is what buildInfo says of a MongoDB-protocol server.
type MongoServer struct {
	// Version is the MongoDB version it speaks ("7.0.42").
	Version string
	// Flavor is "FerretDB" or "MongoDB" (Flavor).
	Flavor string
	// FerretDB is FerretDB's own version ("unknown" when built without
	// one), "" on MongoDB.
	FerretDB string
}

// MongoBuild runs buildInfo on db within ctx: the one reading of a
// MongoDB-protocol server's identity (the version probes, the documents
// scenarios and experiments).
func MongoBuild(ctx context.Context, db *mongo.Database) (MongoServer, error) {
	var info bson.M
	if err := db.RunCommand(ctx, bson.D{{Key: "buildInfo", Value: 1}}).Decode(&info); err != nil {
		return MongoServer{}, err
	}
	var b MongoServer
	b.Version, _ = info["version"].(string)
	b.Flavor, b.FerretDB = Flavor(info)
	return b, nil
}

// String names the server for a reader: "MongoDB 7.0.42", "FerretDB
// 1.24.2, MongoDB 7.0.42 wire protocol", "FerretDB (version unknown),
// MongoDB 7.0.42 wire protocol".
func (b MongoServer) String() string {
	switch {
	case b.Flavor != "FerretDB":
		return "MongoDB " + b.Version
	case b.FerretDB == "" || b.FerretDB == "unknown": // built from source without version.txt (scripts/ferretdb pins the module)
		return "FerretDB (version unknown), MongoDB " + b.Version + " wire protocol"
	}
	return "FerretDB " + b.FerretDB + ", MongoDB " + b.Version + " wire protocol"
}

// Flavor tells FerretDB from MongoDB by buildInfo's fields: FerretDB adds
// "ferretdbVersion" (and "ferretdbFeatures").
func Flavor(info map[string]any) (flavor, ferretVersion string) {
	for k := range info {
		if strings.HasPrefix(strings.ToLower(k), "ferretdb") {
			s, _ := info["ferretdbVersion"].(string)
			return "FerretDB", s
		}
	}
	return "MongoDB", ""
}

// Redis returns INFO server's redis_version.
func Redis(ctx context.Context, url string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	opts, err := redis.ParseURL(url)
	if err != nil {
		return "", err
	}
	client := redis.NewClient(opts)
	defer client.Close()
	info, err := client.Info(ctx, "server").Result()
	if err != nil {
		return "", err
	}
	return RedisVersion(info)
}

// RedisVersion reads redis_version from the text of INFO server.
func RedisVersion(info string) (string, error) {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok && v != "" {
			return v, nil
		}
	}
	return "", fmt.Errorf("INFO server has no redis_version")
}
