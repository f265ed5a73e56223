package pairs

import (
	"fmt"
	"net"
	"strconv"
)

// Side says which side of its pair a service is on.
type Side string

// The sides of a pair.
const (
	// Postgres is the side built on plain Postgres (the no-* services).
	Postgres Side = "postgres"
	// Specialist is the side built on the specialist system.
	Specialist Side = "specialist"
)

// Service is one row of the pair table.
type Service struct {
	// Name is the service's directory under services/ and its name in
	// /stats.
	Name string
	// Pair is the comparison it belongs to: queue, log, documents,
	// eventstore, cache.
	Pair string
	// Side is Postgres or Specialist.
	Side Side
	// Backend is the system it is built on, as /stats reports it.
	Backend string
	// Port is its default HTTP port (ADDR defaults to
	// "127.0.0.1:<Port>").
	Port int
	// Planned marks a service that is not built yet: it has no directory
	// under services/, and the load driver does not target it.
	Planned bool
}

// Addr is the service's default listen address, "127.0.0.1:<Port>":
// loopback, so that a service started without ADDR is reachable only
// from this machine (it has no authentication; docs/security.md says how
// to expose one, ADDR=0.0.0.0:<Port>).
func (s Service) Addr() string { return net.JoinHostPort(DefaultHost, strconv.Itoa(s.Port)) }

// DefaultHost is the host of every service's default ADDR: loopback.
const DefaultHost = "127.0.0.1"

// URL is the service's base URL on host with its port shifted by offset.
func (s Service) URL(host string, offset int) string {
	return fmt.Sprintf("http://%s:%d", host, s.Port+offset)
}

// The pairs' names: the Pair of every row of All, and the name the load
// driver's commands, results files and report sections use.
const (
	Queue      = "queue"
	Log        = "log"
	Documents  = "documents"
	Cache      = "cache"
	EventStore = "eventstore"
)

// The services' names: the Name of every row of All, the directory under
// services/ and the name /stats reports. Code that names a service uses
// these, never the bare string.
const (
	RabbitMQ        = "rabbitmq"
	NoRabbitMQ      = "no-rabbitmq"
	Kafka           = "kafka"
	NoKafka         = "no-kafka"
	MongoDB         = "mongodb"
	NoMongoDB       = "no-mongodb"
	Redis           = "redis"
	NoRedis         = "no-redis"
	KurrentDB       = "kurrentdb"
	NoKurrentDB     = "no-kurrentdb"
	KafkaEventStore = "kafka-eventstore"
)

// All is the pair table, planned services included, in port order.
var All = []Service{
	{Name: RabbitMQ, Pair: Queue, Side: Specialist, Backend: "rabbitmq", Port: 8081},
	{Name: NoRabbitMQ, Pair: Queue, Side: Postgres, Backend: "postgres", Port: 8082},
	{Name: Kafka, Pair: Log, Side: Specialist, Backend: "kafka", Port: 8083},
	{Name: NoKafka, Pair: Log, Side: Postgres, Backend: "postgres", Port: 8084},
	{Name: MongoDB, Pair: Documents, Side: Specialist, Backend: "mongodb", Port: 8085},
	{Name: NoMongoDB, Pair: Documents, Side: Postgres, Backend: "postgres", Port: 8086},
	{Name: Redis, Pair: Cache, Side: Specialist, Backend: "redis", Port: 8087},
	{Name: NoRedis, Pair: Cache, Side: Postgres, Backend: "postgres", Port: 8088},
	{Name: KurrentDB, Pair: EventStore, Side: Specialist, Backend: "kurrentdb", Port: 8089},
	{Name: NoKurrentDB, Pair: EventStore, Side: Postgres, Backend: "postgres", Port: 8090},
	{Name: KafkaEventStore, Pair: EventStore, Side: Specialist, Backend: "kafka", Port: 8091},
}

// Names returns the pairs of the table, each once, in table order.
func Names() []string {
	var out []string
	for _, s := range All {
		if len(out) == 0 || out[len(out)-1] != s.Pair {
			out = append(out, s.Pair)
		}
	}
	return out
}

// Built returns the services that exist, in table order.
func Built() []Service {
	var out []Service
	for _, s := range All {
		if !s.Planned {
			out = append(out, s)
		}
	}
	return out
}

// Lookup returns the named service's row.
func Lookup(name string) (Service, bool) {
	for _, s := range All {
		if s.Name == name {
			return s, true
		}
	}
	return Service{}, false
}

// Get returns the named service's row and panics if there is none: a
// service's main and the load driver name themselves with a constant, so
// a miss is a programming error.
func Get(name string) Service {
	s, ok := Lookup(name)
	if !ok {
		panic(fmt.Sprintf("pairs: no service %q in the pair table", name))
	}
	return s
}

// Pair returns the built services of a pair, the Postgres side first, then
// the specialists in table order.
func Pair(pair string) []Service {
	var pg, other []Service
	for _, s := range Built() {
		switch {
		case s.Pair != pair:
		case s.Side == Postgres:
			pg = append(pg, s)
		default:
			other = append(other, s)
		}
	}
	return append(pg, other...)
}
