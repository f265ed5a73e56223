package stackcheck

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/redis/go-redis/v9"
	kafkago "github.com/segmentio/kafka-go"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// The smoke tests prove that each server of the stack is the real thing
// and does what the pairs rely on. Each finds its server through the same
// variable the services read, with the stack's port as the default.

// TestPostgresWal2jsonDecodesAnInsert creates a wal2json slot, inserts a
// row, and reads the change back decoded as format-version 2 JSON.
func TestPostgresWal2jsonDecodesAnInsert(t *testing.T) {
	t.Parallel()
	url := kittest.PostgresURL(t)
	ctx := kittest.Context(t, 30*time.Second)
	schema := kittest.Schema(t, url)
	conn := kittest.Conn(t, url)
	var level string
	if err := conn.QueryRow(ctx, "SHOW wal_level").Scan(&level); err != nil || level != "logical" {
		t.Fatalf("wal_level = %q (%v), want logical", level, err)
	}
	slot := kittest.UniqueName(t, "slot")
	// A temporary slot is dropped when this session ends, even if the test dies.
	if _, err := conn.Exec(ctx, "SELECT pg_create_logical_replication_slot($1, 'wal2json', true)", slot); err != nil {
		t.Fatalf("create wal2json slot: %v", err)
	}
	table := schema + ".smoke"
	if _, err := conn.Exec(ctx, "CREATE TABLE "+table+" (id int PRIMARY KEY, note text)"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "INSERT INTO "+table+" VALUES (42, 'hello wal')"); err != nil {
		t.Fatal(err)
	}
	rows, err := conn.Query(ctx, `SELECT data FROM pg_logical_slot_get_changes($1, NULL, NULL,
		'format-version', '2', 'add-tables', $2)`, slot, table)
	if err != nil {
		t.Fatal(err)
	}
	datas, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, d := range datas {
		var c struct {
			Action  string `json:"action"`
			Table   string `json:"table"`
			Columns []struct {
				Name  string `json:"name"`
				Value any    `json:"value"`
			} `json:"columns"`
		}
		if err := json.Unmarshal([]byte(d), &c); err != nil {
			t.Fatalf("not wal2json: %q", d)
		}
		if c.Action == "I" && c.Table == "smoke" && len(c.Columns) == 2 && c.Columns[0].Value == float64(42) && c.Columns[1].Value == "hello wal" {
			found = true
		}
	}
	if !found {
		t.Fatalf("the insert was not decoded; changes: %v", datas)
	}
}

// TestPgBouncerProxiesInTransactionMode queries through pgbouncer: the
// server port seen by the query is Postgres', not the one dialled, and a
// parameterised query works with the exec mode the services use there.
func TestPgBouncerProxiesInTransactionMode(t *testing.T) {
	t.Parallel()
	url := kittest.Server(t, "PGBOUNCER_URL", kittest.DefaultPgBouncerURL)
	ctx := kittest.Context(t, 30*time.Second)
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for i := range 3 {
		var n, port int
		if err := conn.QueryRow(ctx, "SELECT $1::int + 1, inet_server_port()", i).Scan(&n, &port); err != nil {
			t.Fatalf("query %d through pgbouncer: %v", i, err)
		}
		if n != i+1 {
			t.Fatalf("got %d", n)
		}
		if port == int(cfg.Port) {
			t.Fatalf("the server answered on %d, the port dialled: not a pooler in between", port)
		}
	}
}

// TestRabbitMQPublishWithConfirmsAndConsume publishes one persistent
// message with a publisher confirm and consumes it with a manual ack.
func TestRabbitMQPublishWithConfirmsAndConsume(t *testing.T) {
	t.Parallel()
	url := kittest.Server(t, "RABBITMQ_URL", kittest.DefaultRabbitMQURL)
	ctx := kittest.Context(t, 30*time.Second)
	conn, err := amqp.DialConfig(url, amqp.Config{Dial: amqp.DefaultDial(5 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	q, err := ch.QueueDeclare(kittest.UniqueName(t, "smoke"), false, true, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	conf, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", q.Name, true, false, amqp.Publishing{
		DeliveryMode: amqp.Persistent, ContentType: "text/plain", Body: []byte("hello queue")})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := conf.WaitContext(ctx); err != nil || !ok {
		t.Fatalf("publisher confirm: ack=%v err=%v", ok, err)
	}
	msgs, err := ch.ConsumeWithContext(ctx, q.Name, "", false, true, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-msgs:
		if string(m.Body) != "hello queue" || m.DeliveryMode != amqp.Persistent {
			t.Fatalf("got %q mode %d", m.Body, m.DeliveryMode)
		}
		if err := m.Ack(false); err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("no message consumed")
	}
}

// TestKafkaProduceAcksAllAndConsume creates a topic, produces one record
// with acks=all and reads it back from the beginning.
func TestKafkaProduceAcksAllAndConsume(t *testing.T) {
	t.Parallel()
	brokers := strings.Split(kittest.Server(t, "KAFKA_BROKERS", kittest.DefaultKafkaBrokers), ",")
	ctx := kittest.Context(t, 60*time.Second)
	topic := kittest.UniqueName(t, "smoke")
	conn, err := kafkago.DialContext(ctx, "tcp", brokers[0])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctrl, err := conn.Controller()
	if err != nil {
		t.Fatal(err)
	}
	cc, err := kafkago.DialContext(ctx, "tcp", net.JoinHostPort(ctrl.Host, strconv.Itoa(ctrl.Port)))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	if err := cc.CreateTopics(kafkago.TopicConfig{Topic: topic, NumPartitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.DeleteTopics(topic) })
	w := &kafkago.Writer{Addr: kafkago.TCP(brokers...), Topic: topic, RequiredAcks: kafkago.RequireAll,
		WriteTimeout: 10 * time.Second, AllowAutoTopicCreation: false}
	defer w.Close()
	// A just-created topic may need a moment before its leader is known.
	for {
		err = w.WriteMessages(ctx, kafkago.Message{Key: []byte("k"), Value: []byte("hello log")})
		if err == nil || ctx.Err() != nil || !isRetriable(err) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("produce with acks=all: %v", err)
	}
	r := kafkago.NewReader(kafkago.ReaderConfig{Brokers: brokers, Topic: topic, Partition: 0, MaxWait: 500 * time.Millisecond})
	defer r.Close()
	m, err := r.ReadMessage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Value) != "hello log" || string(m.Key) != "k" || m.Offset != 0 {
		t.Fatalf("got key %q value %q offset %d", m.Key, m.Value, m.Offset)
	}
}

func isRetriable(err error) bool {
	var ke kafkago.Error
	if errors.As(err, &ke) {
		return ke.Temporary()
	}
	var we kafkago.WriteErrors
	if errors.As(err, &we) {
		for _, e := range we {
			if e != nil && !isRetriable(e) {
				return false
			}
		}
		return true
	}
	return false
}

// TestRedisAnswers pings Redis and round-trips a key.
func TestRedisAnswers(t *testing.T) {
	t.Parallel()
	opts, err := redis.ParseURL(kittest.Server(t, "REDIS_URL", kittest.DefaultRedisURL))
	if err != nil {
		t.Fatal(err)
	}
	opts.DialTimeout, opts.ReadTimeout, opts.WriteTimeout = 5*time.Second, 5*time.Second, 5*time.Second
	c := redis.NewClient(opts)
	defer c.Close()
	ctx := kittest.Context(t, 30*time.Second)
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	key := kittest.UniqueName(t, "smoke")
	if err := c.Set(ctx, key, "hello cache", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Get(ctx, key).Result(); err != nil || v != "hello cache" {
		t.Fatalf("GET = %q, %v", v, err)
	}
	if ttl := c.TTL(ctx, key).Val(); ttl <= 0 || ttl > time.Minute {
		t.Fatalf("TTL = %v", ttl)
	}
}

// TestMongoWireStoresAndFinds stores a document with a nested array and
// finds it by a nested field, over the MongoDB wire protocol: real MongoDB
// under compose, FerretDB on the native stack (the test logs which).
func TestMongoWireStoresAndFinds(t *testing.T) {
	t.Parallel()
	url := kittest.Server(t, "MONGO_URL", kittest.DefaultMongoURL)
	ctx := kittest.Context(t, 30*time.Second)
	client, err := mongo.Connect(options.Client().ApplyURI(url).SetTimeout(10 * time.Second).SetServerSelectionTimeout(5 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Disconnect(context.Background())
	db := client.Database(kittest.UniqueName(t, "t"))
	t.Cleanup(func() { _ = db.Drop(context.Background()) })
	var info bson.M
	if err := db.RunCommand(ctx, bson.D{{Key: "buildInfo", Value: 1}}).Decode(&info); err != nil {
		t.Fatal(err)
	}
	server := "MongoDB " + stringOf(info["version"])
	if fd, ok := info["ferretdb"].(bson.M); ok {
		server = "FerretDB " + stringOf(fd["version"]) + " (MongoDB wire protocol, not MongoDB)"
	}
	t.Logf("server: %s", server)
	users := db.Collection("users")
	if _, err := users.InsertOne(ctx, bson.D{{Key: "email", Value: "ada@example.com"},
		{Key: "profile", Value: bson.D{{Key: "langs", Value: bson.A{"en", "fr"}}, {Key: "address", Value: bson.D{{Key: "city", Value: "Paris"}}}}}}); err != nil {
		t.Fatal(err)
	}
	var got bson.M
	if err := users.FindOne(ctx, bson.D{{Key: "profile.address.city", Value: "Paris"}, {Key: "profile.langs", Value: "fr"}}).Decode(&got); err != nil {
		t.Fatalf("find by nested field: %v", err)
	}
	if got["email"] != "ada@example.com" {
		t.Fatalf("found %v", got)
	}
}

func stringOf(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return "?"
}
