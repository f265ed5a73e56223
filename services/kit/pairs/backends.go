package pairs

import (
	"fmt"
	"net"
	"net/url"
	"strings"
)

// Default URLs of the stack's backends (native `make up` and compose
// alike, on the ports of scripts/ports.env). Services and tests read the
// variable named in Backends, with these defaults.
const (
	// DefaultPostgresURL is DATABASE_URL's default.
	DefaultPostgresURL = "postgres://postgres:postgres@localhost:5432/wpe?sslmode=disable"
	// DefaultPgBouncerURL is PGBOUNCER_URL's default (transaction mode, so
	// pgx must not use the extended protocol's prepared statements).
	DefaultPgBouncerURL = "postgres://postgres:postgres@localhost:6432/wpe?sslmode=disable&default_query_exec_mode=exec"
	// DefaultRabbitMQURL is RABBITMQ_URL's default.
	DefaultRabbitMQURL = "amqp://guest:guest@localhost:5672/"
	// DefaultRabbitMQManagementURL is RABBITMQ_MANAGEMENT_URL's default.
	DefaultRabbitMQManagementURL = "http://guest:guest@localhost:15672"
	// DefaultKafkaBrokers is KAFKA_BROKERS' default.
	DefaultKafkaBrokers = "localhost:9092"
	// DefaultMongoURL is MONGO_URL's default.
	DefaultMongoURL = "mongodb://localhost:27017/"
	// DefaultRedisURL is REDIS_URL's default.
	DefaultRedisURL = "redis://localhost:6379/0"
	// DefaultKurrentDBURL is KURRENTDB_URL's default (the compose stack's
	// insecure single node).
	DefaultKurrentDBURL = "kurrentdb://localhost:2113?tls=false"
)

// Backend is one server of the stack.
type Backend struct {
	// Name is its compose service name.
	Name string
	// Env is the variable services and tests read its address from.
	Env string
	// DefaultURL is Env's default.
	DefaultURL string
	// PortVar is the scripts/ports.env variable of the port DefaultURL
	// uses.
	PortVar string
}

// Backends lists the stack's servers that the services and tests reach.
var Backends = []Backend{
	{Name: "postgres", Env: "DATABASE_URL", DefaultURL: DefaultPostgresURL, PortVar: "PG_PORT"},
	{Name: "pgbouncer", Env: "PGBOUNCER_URL", DefaultURL: DefaultPgBouncerURL, PortVar: "PGBOUNCER_PORT"},
	{Name: "rabbitmq", Env: "RABBITMQ_URL", DefaultURL: DefaultRabbitMQURL, PortVar: "RABBITMQ_PORT"},
	{Name: "rabbitmq", Env: "RABBITMQ_MANAGEMENT_URL", DefaultURL: DefaultRabbitMQManagementURL, PortVar: "RABBITMQ_MGMT_PORT"},
	{Name: "kafka", Env: "KAFKA_BROKERS", DefaultURL: DefaultKafkaBrokers, PortVar: "KAFKA_PORT"},
	{Name: "mongodb", Env: "MONGO_URL", DefaultURL: DefaultMongoURL, PortVar: "MONGO_PORT"},
	{Name: "redis", Env: "REDIS_URL", DefaultURL: DefaultRedisURL, PortVar: "REDIS_PORT"},
	{Name: "kurrentdb", Env: "KURRENTDB_URL", DefaultURL: DefaultKurrentDBURL, PortVar: "KURRENTDB_PORT"},
}

// Port returns the port of a default address: a URL's, or the first
// host:port of a comma-separated list (KAFKA_BROKERS).
func Port(addr string) (string, error) {
	host := addr
	if strings.Contains(addr, "://") {
		u, err := url.Parse(addr)
		if err != nil {
			return "", fmt.Errorf("%q is not a URL", addr)
		}
		host = u.Host
	}
	host, _, _ = strings.Cut(host, ",")
	_, port, err := net.SplitHostPort(host)
	if err != nil || port == "" {
		return "", fmt.Errorf("%q names no port", addr)
	}
	return port, nil
}
