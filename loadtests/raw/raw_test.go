package raw

import (
	"context"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
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
		res := Results{Settings: settings(o)}
		for i, r := range rs {
			r.Engine, r.Loop = l.engine, names[i]
			res.Loops = append(res.Loops, r)
			if r.Items <= 0 || r.Rate <= 0 || r.Seconds <= 0 || r.Desc != "" || res.LoopDesc(r) == "" {
				t.Errorf("%s: %+v", names[i], r)
			}
			t.Logf("%s: %.0f/s (%d in %.2fs)", names[i], r.Rate, r.Items, r.Seconds)
		}
		if p, err := driver.Prose(res); err != nil || len(p) > 0 {
			t.Errorf("the results hold sentences (%v): %q", err, p)
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

func TestRecordUpdate(t *testing.T) { t.Parallel(); check(t, RecordUpdate) }

// TestLimit checks the path arithmetic: stages add their time per item,
// a stage taken twice counts twice, Core keeps the compared engine's
// stages, and a missing loop gives no limit.
func TestLimit(t *testing.T) {
	r := Results{Loops: []Result{
		{Engine: Postgres, Loop: InsertBatch, Rate: 400}, {Engine: Postgres, Loop: ClaimDelete, Rate: 300},
		{Engine: Postgres, Loop: RecordUpdate, Rate: 600},
		{Engine: RabbitMQ, Loop: Publish, Rate: 200}, {Engine: RabbitMQ, Loop: Consume, Rate: 200},
	}}
	// 2/400 + 1/300 + 2/600 = 7/600: 85.7/s.
	lim, desc, ok := r.Limit("no-rabbitmq")
	if !ok || math.Abs(lim-600.0/7) > 1e-9 || desc != "postgres insert_batch ×2 → postgres claim_delete → postgres record_update ×2" {
		t.Errorf("Limit = %v %q %v", lim, desc, ok)
	}
	if p, ok := r.PercentOfRaw("no-rabbitmq", 600.0/7/2); !ok || math.Abs(p-50) > 1e-9 {
		t.Errorf("PercentOfRaw = %v %v", p, ok)
	}
	// rabbitmq: 1/400 + 1/200 + 1/200 + 2/600 = 0.015833; RabbitMQ alone 1/200 + 1/200: 100/s.
	if lim, _, ok := r.Limit("rabbitmq"); !ok || math.Abs(lim-1/0.0158333333333) > 1e-6 {
		t.Errorf("rabbitmq Limit = %v %v", lim, ok)
	}
	if c := r.CoreCell("rabbitmq", 50); c != "50% of 100/s" {
		t.Errorf("CoreCell = %q", c)
	}
	if core := Paths["rabbitmq"].Core().String(); core != "rabbitmq publish → rabbitmq consume" {
		t.Errorf("Core = %q", core)
	}
	if _, _, ok := r.Limit("no-kafka"); ok {
		t.Error("no-kafka has a limit without its wal2json loop")
	}
	if c := r.PercentCell("kafka", 1); c != "–" {
		t.Errorf("PercentCell = %q", c)
	}
}
