package eventstore

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/segmentio/kafka-go"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// serverTest skips t under -short, saying why (what it talks to), and
// otherwise marks t parallel and returns a context of a minute for the
// test (kittest.Context).
func serverTest(t *testing.T, why string) context.Context {
	t.Helper()
	if testing.Short() {
		t.Skip(why)
	}
	t.Parallel()
	return kittest.Context(t, time.Minute)
}

// realPostgres is serverTest for a test of the stack's Postgres, whose
// URL (kittest.PostgresURL: DATABASE_URL or the default, checked to
// answer) it returns with the context.
func realPostgres(t *testing.T) (ctx context.Context, dbURL string) {
	t.Helper()
	ctx = serverTest(t, "talks to Postgres")
	return ctx, kittest.PostgresURL(t)
}

// scratchSchema makes a schema of the test's own in the Postgres at
// dbURL (kittest.Schema, dropped when the test ends) and runs tables
// there, each "{schema}" in it replaced by the schema's name. It returns
// a connection of the test's (kittest.Conn) and the schema.
func scratchSchema(t testing.TB, ctx context.Context, dbURL, tables string) (*pgx.Conn, string) {
	t.Helper()
	schema := kittest.Schema(t, dbURL)
	conn := kittest.Conn(t, dbURL)
	if _, err := conn.Exec(ctx, strings.ReplaceAll(tables, "{schema}", schema)); err != nil {
		t.Fatal(err)
	}
	return conn, schema
}

// kafkaBenchTopic skips under -short and otherwise marks t parallel,
// makes a new bench topic on the stack's Kafka with create, and deletes
// it when the test ends. It returns a context of a minute for the test,
// the brokers and the topic.
func kafkaBenchTopic(t *testing.T, create func(ctx context.Context, brokers, topic string) error) (ctx context.Context, brokers, topic string) {
	t.Helper()
	ctx = serverTest(t, "talks to Kafka")
	brokers = envOr("KAFKA_BROKERS", pairs.DefaultKafkaBrokers)
	topic = BenchTopic(time.Now())
	if err := create(ctx, brokers, topic); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := DeleteTopic(context.Background(), brokers, topic); err != nil {
			t.Error(err)
		}
	})
	return ctx, brokers, topic
}

// TestFreshTopicOnRealKafka creates a bench topic on the stack's Kafka:
// it starts empty, a second creation is refused (it would not be fresh),
// its size counts what is produced to it, the store state declares it
// fresh with that size, and only bench topics can be deleted.
func TestFreshTopicOnRealKafka(t *testing.T) {
	ctx, brokers, topic := kafkaBenchTopic(t, CreateTopic)
	if n, err := TopicRecords(ctx, brokers, topic); err != nil || n != 0 {
		t.Fatalf("fresh topic: %d records, %v", n, err)
	}
	if err := CreateTopic(ctx, brokers, topic); err == nil {
		t.Error("a second CreateTopic of the same name succeeded: the topic would not be fresh")
	}
	w := &kafka.Writer{Addr: kafka.TCP(strings.Split(brokers, ",")[0]), Topic: topic, RequiredAcks: kafka.RequireAll}
	defer w.Close()
	if err := w.WriteMessages(ctx, kafka.Message{Key: []byte("s"), Value: []byte(`{}`)}, kafka.Message{Key: []byte("s"), Value: []byte(`{}`)}, kafka.Message{Key: []byte("t"), Value: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	o := Options{KafkaBrokers: brokers, KafkaTopic: topic, FreshTopic: true}
	st := storeStates(ctx, o, []*Engine{{Name: "kafka-eventstore", Backend: "kafka", Up: true}, {Name: "kurrentdb", Backend: "kurrentdb", Why: "connection refused"}})
	if len(st) != 2 || st[0].Mode != StoreFresh || st[0].Records == nil || *st[0].Records != 3 || !strings.Contains(st[0].Store, topic) {
		t.Errorf("kafka state %+v, want fresh with 3 records", st[0])
	}
	if st[1].Records != nil || !strings.HasPrefix(st[1].Error, "not measured here") {
		t.Errorf("an engine that is not up: %+v", st[1])
	}
	if err := DeleteTopic(ctx, brokers, "eventstore"); err == nil {
		t.Error("DeleteTopic accepted the service's default topic")
	}
}

// TestEventsTableStateOnRealPostgres makes an events table in a schema
// of its own with 3 rows: the store state and the run's StartState both
// declare 3 rows and a size; a missing table is an error in the state,
// never a zero.
func TestEventsTableStateOnRealPostgres(t *testing.T) {
	ctx, dbURL := realPostgres(t)
	_, schema := scratchSchema(t, ctx, dbURL, "CREATE TABLE {schema}.events (stream_id text, version bigint); INSERT INTO {schema}.events VALUES ('a',0),('a',1),('b',0)")
	engines := []*Engine{{Name: "no-kurrentdb", Backend: "postgres", Up: true}}
	run := driver.NewRun("eventstore-test", nil, time.Now())
	recordStart(ctx, run, Options{DatabaseURL: dbURL, Schema: schema}, engines)
	st := run.Settings["store_state"].([]StoreState)
	if st[0].Records == nil || *st[0].Records != 3 || st[0].TotalBytes <= 0 || st[0].Mode != StoreKept {
		t.Errorf("store state %+v, want 3 rows kept", st[0])
	}
	if ss := run.StartState; ss == nil || len(ss.Tables) != 1 || ss.Tables[0].Rows != 3 || ss.Tables[0].Table != "events" {
		t.Errorf("start state %+v", ss)
	}
	missing := storeStates(ctx, Options{DatabaseURL: dbURL, Schema: schema + "_none"}, engines)
	if missing[0].Records != nil || missing[0].Error == "" {
		t.Errorf("a missing table: %+v", missing[0])
	}
}

// fakeEngine answers reads of every stream with n events and counts
// appends; the harness's own fake, not a database.
func fakeEngine(t testing.TB, n func(stream string) int) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/capabilities":
			w.Write([]byte(`{"conditional_append":false}`))
		case r.Method == http.MethodPost:
			w.WriteHeader(http.StatusCreated)
			w.Write([]byte(`{"position":"1"}`))
		default:
			stream := strings.TrimPrefix(r.URL.Path, "/streams/")
			evs := make([]string, n(stream))
			for i := range evs {
				evs[i] = fmt.Sprintf(`{"version":%d}`, i)
			}
			fmt.Fprintf(w, `{"events":[%s],"records_scanned":%d}`, strings.Join(evs, ","), 1000)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestPointReadNeedsTheSameStreamEverywhere: when every engine holds the
// pre-filled stream in full the point read is measured; when one engine
// holds fewer events (the committed run compared 239 events with an
// empty stream), the point is failed with the counts, never measured.
func TestPointReadNeedsTheSameStreamEverywhere(t *testing.T) {
	full := fakeEngine(t, func(string) int { return pointReadEvents })
	empty := fakeEngine(t, func(string) int { return 0 })
	run := func(b *httptest.Server) Results {
		dir := t.TempDir()
		o := Append.Defaults
		o.Targets = "no-kurrentdb=" + full.URL + ",kafka-eventstore=" + b.URL + ",kurrentdb=http://127.0.0.1:1"
		o.Out, o.Streams, o.Reads = dir, 2, 2
		if _, err := Bench(context.Background(), "point-read", o, nil, &strings.Builder{}); err != nil {
			t.Fatal(err)
		}
		r, err := Load(dir)
		if err != nil || r.PointRead == nil {
			t.Fatalf("Load: %v", err)
		}
		return r
	}
	ok := run(full)
	for _, row := range ok.PointRead.Rows[:2] {
		if !row.Measured || row.Failed != "" || row.Matched != pointReadEvents {
			t.Errorf("same stream: %+v", row)
		}
	}
	if k := ok.PointRead.Rows[2]; k.Measured || k.Failed != "" {
		t.Errorf("kurrentdb, not up: %+v, want not measured, not failed", k)
	}
	if len(ok.PointRead.Stores) != 3 || ok.PointRead.Stores[1].Records == nil || *ok.PointRead.Stores[1].Records != 1000 {
		t.Errorf("stores %+v: the Kafka side's size is what an unwritten stream's read scans", ok.PointRead.Stores)
	}
	bad := run(empty)
	for _, row := range bad.PointRead.Rows[:2] {
		if row.Measured || !strings.Contains(row.Failed, "kafka-eventstore holds 0 events") {
			t.Errorf("different streams: %+v", row)
		}
	}
	_, err := sameStream(context.Background(), []*Engine{{Name: "a", URL: full.URL, Up: true}, {Name: "b", URL: empty.URL, Up: true}}, "s", pointReadEvents, map[string]error{"a": errors.New("pre-fill refused")})
	if !errors.Is(err, ErrStreamsDiffer) || !strings.Contains(err.Error(), "a: pre-fill refused") || !strings.Contains(err.Error(), "b holds 0 events") {
		t.Errorf("sameStream: %v", err)
	}
}
