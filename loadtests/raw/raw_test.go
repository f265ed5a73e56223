package raw

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// options returns short loops against the stack's servers, on scratch
// names unique to the test.
func options(t testing.TB) Options {
	t.Helper()
	o := DefaultOptions()
	o.PostgresURL = kittest.Server(t, "DATABASE_URL", o.PostgresURL)
	o.RabbitMQURL = kittest.Server(t, "RABBITMQ_URL", o.RabbitMQURL)
	o.KafkaBrokers = strings.Split(kittest.Server(t, "KAFKA_BROKERS", strings.Join(o.KafkaBrokers, ",")), ",")
	o.Duration, o.Conns = 500*time.Millisecond, 2
	o.Name = "t" + strconv.FormatInt(time.Now().UnixNano()%1e9, 10)
	return o
}

// check runs one declared loop and wants every result it returns
// measured, with a rate.
func check(t *testing.T, names ...string) {
	t.Helper()
	o := options(t)
	for _, l := range loops {
		if l.names[0] != names[0] {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		rs, err := l.run(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != len(names) {
			t.Fatalf("%d results for %v", len(rs), names)
		}
		for i, r := range rs {
			if r.Items <= 0 || r.Rate <= 0 || r.Seconds <= 0 || r.Desc == "" {
				t.Errorf("%s: %+v", names[i], r)
			}
			t.Logf("%s: %.0f/s (%d in %.2fs)", names[i], r.Rate, r.Items, r.Seconds)
		}
		return
	}
	t.Fatalf("no loop %v", names)
}

func TestInsertCommit(t *testing.T) { t.Parallel(); check(t, InsertCommit) }
func TestInsertBatch(t *testing.T)  { t.Parallel(); check(t, InsertBatch) }
func TestClaimDelete(t *testing.T)  { t.Parallel(); check(t, ClaimDelete) }
func TestWal2JSON(t *testing.T)     { t.Parallel(); check(t, Wal2JSON) }
func TestAMQP(t *testing.T)         { t.Parallel(); check(t, Publish, Consume) }
func TestKafka(t *testing.T)        { t.Parallel(); check(t, Produce, Fetch) }

// TestLimit checks the path arithmetic: two stages at 100/s and 300/s
// give 75/s, and a missing loop gives no limit.
func TestLimit(t *testing.T) {
	r := Results{Loops: []Result{{Engine: Postgres, Loop: InsertBatch, Rate: 100}, {Engine: Postgres, Loop: ClaimDelete, Rate: 300}}}
	lim, desc, ok := r.Limit("no-rabbitmq")
	if !ok || lim != 75 || desc != "postgres insert_batch → claim_delete" {
		t.Errorf("Limit = %v %q %v", lim, desc, ok)
	}
	if p, ok := r.PercentOfRaw("no-rabbitmq", 30); !ok || p != 40 {
		t.Errorf("PercentOfRaw = %v %v", p, ok)
	}
	if _, _, ok := r.Limit("no-kafka"); ok {
		t.Error("no-kafka has a limit without its wal2json loop")
	}
	if c := r.PercentCell("kafka", 1); c != "–" {
		t.Errorf("PercentCell = %q", c)
	}
}

// TestWriteLoad round-trips a results file.
func TestWriteLoad(t *testing.T) {
	dir := t.TempDir()
	if r, err := Load(dir); err != nil || len(r.Loops) != 0 {
		t.Fatalf("empty dir: %+v %v", r, err)
	}
	in := Results{Schema: SchemaVersion, ID: "20260101T000000Z-raw", Loops: []Result{{Engine: Kafka, Loop: Fetch, Rate: 5}}}
	if _, err := Write(dir, in); err != nil {
		t.Fatal(err)
	}
	out, err := Load(dir)
	if err != nil || len(out.Loops) != 1 || out.Loops[0].Rate != 5 {
		t.Fatalf("%+v %v", out, err)
	}
}
