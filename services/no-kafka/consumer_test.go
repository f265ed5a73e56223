package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	logc "github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/log"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/log/conformance"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/ids"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

func ev(key string) logc.NewEvent {
	return logc.NewEvent{Type: "test", Key: key, Payload: json.RawMessage(`{"a": 1}`)}
}

// The walsender is terminated (as a failover, an admin or a network cut
// would): the consumer reconnects, resumes from the slot's confirmed
// position, and delivers everything, including events written while it
// was away.
func TestWalsenderTerminatedReconnectsAndResumes(t *testing.T) {
	t.Parallel()
	tg := newTarget(t, map[string]string{"STANDBY_STATUS_INTERVAL": "100ms"})
	conformance.PostDelivered(t, tg.URL(), ev("k"))
	before := conformance.Consumer(t, tg.URL())
	if before.Slot == nil || !before.Slot.Active || before.Slot.ActivePID == 0 {
		t.Fatalf("slot not active: %+v", before.Slot)
	}
	pool := kittest.Pool(t, kittest.PostgresURL(t), "")
	var ok bool
	if err := pool.QueryRow(kittest.Context(t, 10*time.Second), `SELECT pg_terminate_backend($1)`, before.Slot.ActivePID).Scan(&ok); err != nil || !ok {
		t.Fatalf("terminate walsender %d: %v %v", before.Slot.ActivePID, ok, err)
	}
	var written []logc.Created
	for range 20 {
		written = append(written, conformance.Post(t, tg.URL(), ev("k")))
	}
	for _, c := range written {
		conformance.WaitDelivered(t, tg.URL(), c.ID)
	}
	after := conformance.Consumer(t, tg.URL())
	if after.Reconnects < 1 || after.Slot.ActivePID == before.Slot.ActivePID || !after.Running {
		t.Errorf("after terminating walsender %d: reconnects %d, walsender %d, running %v",
			before.Slot.ActivePID, after.Reconnects, after.Slot.ActivePID, after.Running)
	}
	if after.Delivered != 21 {
		t.Errorf("delivered %d for the first time, want 21", after.Delivered)
	}
}

// The server drops a replication connection that stays silent longer
// than wal_sender_timeout. With the timeout set to 1s for this
// connection, an idle period of 4s outlives it several times: the stream
// survives only because standby status updates go out on time.
func TestStandbyStatusKeepsIdleStreamAlive(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(kittest.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("options", "-c wal_sender_timeout=1s")
	// libpq-style options: a space must be %20 here, not +.
	u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20")
	replURL := u.String()

	// The setting really applies to such a connection.
	cfg, err := pgconn.ParseConfig(replURL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["replication"] = "database"
	conn, err := pgconn.ConnectConfig(kittest.Context(t, 10*time.Second), cfg)
	if err != nil {
		t.Fatal(err)
	}
	res, err := conn.Exec(kittest.Context(t, 10*time.Second), "SHOW wal_sender_timeout").ReadAll()
	_ = conn.Close(context.Background())
	if err != nil || len(res) != 1 || len(res[0].Rows) != 1 || string(res[0].Rows[0][0]) != "1s" {
		t.Fatalf("SHOW wal_sender_timeout on a replication connection: %v %v", res, err)
	}

	tg := newTarget(t, map[string]string{"REPLICATION_URL": replURL, "STANDBY_STATUS_INTERVAL": "250ms"})
	conformance.PostDelivered(t, tg.URL(), ev("idle"))
	before := conformance.Consumer(t, tg.URL())
	// The idle period is the subject of this test, not a synchronisation.
	time.Sleep(4 * time.Second)
	after := conformance.Consumer(t, tg.URL())
	if after.Reconnects != 0 || after.Slot.ActivePID != before.Slot.ActivePID || !after.Slot.Active {
		t.Fatalf("the idle stream was dropped: reconnects %d, walsender %d -> %d, active %v",
			after.Reconnects, before.Slot.ActivePID, after.Slot.ActivePID, after.Slot.Active)
	}
	conformance.PostDelivered(t, tg.URL(), ev("idle"))
}

// A stopped consumer is what makes a slot dangerous: Postgres keeps all
// WAL from the slot's restart_lsn. GET /consumer shows it, and a consumer
// that comes back delivers what was written while it was away, even rows
// inserted behind the service's back.
func TestSlotRetainsWALWhileConsumerDownAndCatchesUp(t *testing.T) {
	t.Parallel()
	tg := newTarget(t, map[string]string{"STANDBY_STATUS_INTERVAL": "100ms"})
	conformance.PostDelivered(t, tg.URL(), ev("k"))
	st := conformance.Consumer(t, tg.URL())
	s := st.Slot
	if s == nil || s.Name != tg.Env["SLOT_NAME"] || s.Plugin != tg.Env["SLOT_PLUGIN"] || !s.Active || s.WALStatus == "" || s.WALStatus == "lost" ||
		s.ConfirmedFlushLSN == "" || s.RestartLSN == "" || st.Position != s.ConfirmedFlushLSN || st.LagUnit != "bytes" {
		t.Fatalf("/consumer: %+v slot %+v", st, s)
	}
	tg.Stop()

	pool := kittest.Pool(t, tg.Env["DATABASE_URL"], tg.Env["DATABASE_SCHEMA"])
	ctx := kittest.Context(t, time.Minute)
	slotSQL := `SELECT active, pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint FROM pg_replication_slots WHERE slot_name = $1`
	var active bool
	var retained0, retained1 int64
	// The walsender exits shortly after the consumer's connection closes.
	kittest.Eventually(t, time.Minute, "the slot to become inactive", func() bool {
		if err := pool.QueryRow(ctx, slotSQL, s.Name).Scan(&active, &retained0); err != nil {
			t.Fatal(err)
		}
		return !active
	})
	var written []string
	for i := range 200 {
		id := ids.New()
		written = append(written, id)
		if _, err := pool.Exec(ctx, `INSERT INTO messages (id, type, key, payload) VALUES ($1, 'behind.the.back', 'k', $2)`,
			id, fmt.Sprintf(`{"i": %d, "pad": "%s"}`, i, strings.Repeat("x", 500))); err != nil {
			t.Fatal(err)
		}
	}
	if err := pool.QueryRow(ctx, slotSQL, s.Name).Scan(&active, &retained1); err != nil {
		t.Fatal(err)
	}
	if retained1 <= retained0 {
		t.Errorf("retained WAL did not grow while the consumer was down: %d -> %d bytes", retained0, retained1)
	}
	tg.Start(t)
	for _, id := range written {
		conformance.WaitDelivered(t, tg.URL(), id)
	}
	if st := conformance.Consumer(t, tg.URL()); st.Delivered != 200 || st.Duplicates != 0 {
		t.Errorf("after catching up: delivered %d duplicates %d, want 200 and 0 (the graceful stop confirmed everything)", st.Delivered, st.Duplicates)
	}
}

// BenchmarkDeliverySynchronousCommit shows what SYNCHRONOUS_COMMIT=off
// costs the log: the commit returns before its WAL is flushed, and
// logical decoding only reads flushed WAL, so each event waits for the WAL
// writer (wal_writer_delay, 200ms by default) before the slot sees it.
//
//	go test -run '^$' -bench DeliverySynchronousCommit -benchtime 20x ./services/no-kafka
func BenchmarkDeliverySynchronousCommit(b *testing.B) {
	conformance.MeasureDeliveryPerSynchronousCommit(b, newTarget)
}

// A graceful stop that interrupts the recording of a batch (Postgres is
// slow or away) still records it and confirms it: deliveries has the
// event once Stop returns, and a new instance does not get it again.
func TestStopRecordsAndConfirmsTheBatchInHand(t *testing.T) {
	t.Parallel()
	tg := newTarget(t, nil)
	conformance.PostDelivered(t, tg.URL(), ev("k"))
	before := conformance.Consumer(t, tg.URL()).Position

	block := conformance.BlockDeliveries(t, tg.Env["DATABASE_URL"], tg.Env["DATABASE_SCHEMA"])
	inHand := conformance.Post(t, tg.URL(), ev("k"))
	w := block.WaitForWaiter(time.Minute, "the consumer to wait on the deliveries lock", conformance.Waiter{})
	stopped := make(chan struct{})
	go func() { defer close(stopped); tg.Stop() }()
	// Stop cancels the attempt in flight; the fix makes the consumer try
	// again (with a context of its own) before it confirms and exits.
	block.WaitForWaiter(time.Minute, "a final recording attempt after Stop", w)
	block.Release()
	select {
	case <-stopped:
	case <-time.After(2 * time.Minute):
		t.Fatal("the service did not stop")
	}

	pool := kittest.Pool(t, tg.Env["DATABASE_URL"], tg.Env["DATABASE_SCHEMA"])
	ctx := kittest.Context(t, time.Minute)
	var recorded bool
	if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM deliveries WHERE id = $1)`, inHand.ID).Scan(&recorded); err != nil || !recorded {
		t.Fatalf("the batch in hand was not recorded by the graceful stop: %v %v", recorded, err)
	}
	var advanced bool
	if err := pool.QueryRow(ctx, `SELECT confirmed_flush_lsn > $2::pg_lsn FROM pg_replication_slots WHERE slot_name = $1`,
		tg.Env["SLOT_NAME"], before).Scan(&advanced); err != nil || !advanced {
		t.Fatalf("confirmed_flush_lsn did not advance past %s at the graceful stop: %v %v", before, advanced, err)
	}
	tg.Start(t)
	conformance.PostDelivered(t, tg.URL(), ev("k"))
	if st := conformance.Consumer(t, tg.URL()); st.Delivered != 1 || st.Duplicates != 0 {
		t.Errorf("after the restart: delivered %d duplicates %d, want 1 and 0 (the stop confirmed the batch in hand)", st.Delivered, st.Duplicates)
	}
}

// TestFailedRecordingEndsTheStream: once recording a batch fails, the
// consumer retries for flushRetryFor, then ends its replication stream
// with the batch unconfirmed and reconnects, instead of retrying with the
// stream open. A primary's fast shutdown (a switchover) waits until every
// logical walsender has had what it sent confirmed: a consumer that held
// its stream open while its deliveries could not be recorded held the
// switchover until wal_sender_timeout (66 s in the pg-switchover
// experiment). Here recording fails because the deliveries table is
// renamed away; once it is back, the batch comes again and is delivered
// once.
func TestFailedRecordingEndsTheStream(t *testing.T) {
	t.Parallel()
	tg := newTarget(t, nil)
	conformance.PostDelivered(t, tg.URL(), ev("k"))
	before := conformance.Consumer(t, tg.URL())
	pool := kittest.Pool(t, tg.Env["DATABASE_URL"], tg.Env["DATABASE_SCHEMA"])
	ctx := kittest.Context(t, 3*time.Minute)
	rename := func(from, to string) {
		t.Helper()
		if _, err := pool.Exec(ctx, fmt.Sprintf(`ALTER TABLE IF EXISTS %s RENAME TO %s`, from, to)); err != nil {
			t.Fatalf("rename %s to %s: %v", from, to, err)
		}
	}
	rename("deliveries", "deliveries_away")
	t.Cleanup(func() {
		_, _ = pool.Exec(context.Background(), `ALTER TABLE IF EXISTS deliveries_away RENAME TO deliveries`)
	})
	inHand := conformance.Post(t, tg.URL(), ev("k"))
	// Each attempt fails at once (no such table); after flushRetryFor the
	// stream ends and the consumer reconnects. Without the bound it would
	// retry on the open stream until recording worked again.
	deadline := time.Now().Add(time.Minute)
	var st logc.ConsumerStatus
	for st = conformance.Consumer(t, tg.URL()); st.Reconnects <= before.Reconnects; st = conformance.Consumer(t, tg.URL()) {
		if time.Now().After(deadline) {
			t.Fatalf("recording has failed for a minute and the stream is still the first one: reconnects %d, walsender %+v", st.Reconnects, st.Slot)
		}
		time.Sleep(200 * time.Millisecond)
	}
	rename("deliveries_away", "deliveries")
	conformance.WaitDelivered(t, tg.URL(), inHand.ID)
	if after := conformance.Consumer(t, tg.URL()); after.Delivered != 2 {
		t.Errorf("delivered %d for the first time, want 2 (the batch that could not be recorded, once)", after.Delivered)
	}
}

// A slot of the same name in another database cannot serve this one
// (logical decoding is per database): the service refuses it at start,
// naming SLOT_NAME, instead of failing START_REPLICATION forever.
func TestSlotOfAnotherDatabaseIsRefused(t *testing.T) {
	t.Parallel()
	base := kittest.PostgresURL(t)
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/postgres"
	other := kittest.Pool(t, u.String(), "")
	slot := kittest.UniqueName(t, "s")
	ctx := kittest.Context(t, time.Minute)
	if _, err := other.Exec(ctx, `SELECT pg_create_logical_replication_slot($1, $2)`, slot, testPlugin()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dropSlot(t, base, slot) })
	var db string
	if err := other.QueryRow(ctx, `SELECT current_database()`).Scan(&db); err != nil {
		t.Fatal(err)
	}
	pool := kittest.Pool(t, base, "")
	var current string
	if err := pool.QueryRow(ctx, `SELECT current_database()`).Scan(&current); err != nil || current == db {
		t.Skipf("the test database is %q (%v): no other database to put the slot in", current, err)
	}
	cfg := kittest.ReadConfig(t, readConfig, map[string]string{"DATABASE_URL": base, "SLOT_NAME": slot, "SLOT_PLUGIN": testPlugin()})
	_, err = ensureSlot(ctx, cfg, pool, kittest.Logger(cfg))
	if err == nil || !strings.Contains(err.Error(), "SLOT_NAME") || !strings.Contains(err.Error(), db) {
		t.Fatalf("ensureSlot with a slot of database %q: %v, want an error naming SLOT_NAME and the database", db, err)
	}
}

// TestNewSlotResyncsUndeliveredEvents follows the service's own advice
// after a slot was lost (drop it, restart): the events written while no
// slot streamed them (here: while the service was stopped, the slot then
// dropped) are not in the new slot's stream. The start finds them in the
// messages table and delivers them: the recovery loses none, and events
// delivered before are not delivered again.
func TestNewSlotResyncsUndeliveredEvents(t *testing.T) {
	t.Parallel()
	tg := newTarget(t, map[string]string{"STANDBY_STATUS_INTERVAL": "100ms"})
	before := conformance.PostDelivered(t, tg.URL(), ev("r"))
	tg.Stop()
	pool := kittest.Pool(t, tg.Env["DATABASE_URL"], tg.Env["DATABASE_SCHEMA"])
	ctx := kittest.Context(t, time.Minute)
	var away []string
	for range 100 {
		id := ids.New()
		if _, err := pool.Exec(ctx, `INSERT INTO messages (id, type, key, payload) VALUES ($1, 'test', 'r', '{}')`, id); err != nil {
			t.Fatal(err)
		}
		away = append(away, id)
	}
	dropSlot(t, tg.Env["DATABASE_URL"], tg.Env["SLOT_NAME"])
	tg.Start(t)
	for _, id := range away {
		conformance.WaitDelivered(t, tg.URL(), id)
	}
	c := conformance.Consumer(t, tg.URL())
	if c.Delivered != 100 {
		t.Errorf("delivered %d for the first time after the new slot, want the 100 written while it was away", c.Delivered)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM deliveries WHERE id = $1`, before.ID).Scan(&n); err != nil || n != 1 {
		t.Errorf("the event delivered before has %d delivery rows (%v), want 1", n, err)
	}
}

// The slot is dropped under a running service, as a standby promoted on
// PostgreSQL 15 or 16 has none (no failover slots before 17): the
// consumer finds it missing, makes it again and resyncs, and the events
// written afterwards are delivered. Before, it retried START_REPLICATION
// forever and delivered nothing more.
func TestMissingSlotIsMadeAgainWhileRunning(t *testing.T) {
	t.Parallel()
	tg := newTarget(t, map[string]string{"STANDBY_STATUS_INTERVAL": "100ms"})
	conformance.PostDelivered(t, tg.URL(), ev("m"))
	pool := kittest.Pool(t, tg.Env["DATABASE_URL"], "")
	slot := tg.Env["SLOT_NAME"]
	dropSlotUnder(t, pool, slot)
	var written []logc.Created
	for range 20 {
		written = append(written, conformance.Post(t, tg.URL(), ev("m")))
	}
	for _, c := range written {
		conformance.WaitDelivered(t, tg.URL(), c.ID)
	}
	// The resync may have delivered them before the stream starts again.
	var c logc.ConsumerStatus
	kittest.Eventually(t, time.Minute, "the consumer streaming the slot made again", func() bool {
		c = conformance.Consumer(t, tg.URL())
		return c.Slot != nil && c.Slot.Active && c.Running
	})
	if c.Delivered != 21 {
		t.Errorf("delivered %d for the first time, want 21", c.Delivered)
	}
	// On 17 and later the slot is made with FAILOVER, so that a standby
	// with sync_replication_slots keeps a copy of it.
	ctx := kittest.Context(t, 10*time.Second)
	var version int
	if err := pool.QueryRow(ctx, `SELECT current_setting('server_version_num')::int`).Scan(&version); err != nil {
		t.Fatal(err)
	}
	if version >= 170000 {
		var failover bool
		if err := pool.QueryRow(ctx, `SELECT failover FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&failover); err != nil || !failover {
			t.Errorf("slot %s on %d: failover %v (%v), want true", slot, version, failover, err)
		}
	}
}

// dropSlotUnder drops slot while a consumer streams it, as a promotion on
// PostgreSQL 15 or 16 loses it: the walsender ended and the slot dropped
// in one statement, before the consumer's reconnect (50 ms later) can
// take the slot again; retried until it wins the race.
func dropSlotUnder(t testing.TB, pool *pgxpool.Pool, slot string) {
	t.Helper()
	drop := fmt.Sprintf(`DO $$
DECLARE p int;
BEGIN
  LOOP
    SELECT active_pid INTO p FROM pg_replication_slots WHERE slot_name = '%s';
    IF NOT FOUND THEN RAISE EXCEPTION 'no slot %s'; END IF;
    IF p IS NULL THEN PERFORM pg_drop_replication_slot('%s'); EXIT; END IF;
    PERFORM pg_terminate_backend(p);
    PERFORM pg_sleep(0.002);
  END LOOP;
END $$`, slot, slot, slot)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := pool.Exec(ctx, drop)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("drop slot %s under the service: %v", slot, err)
		}
	}
}

// TestExplainLostSlot: the errors PostgreSQL answers START_REPLICATION
// with on an invalidated slot (logical.c, CreateDecodingContext) get the
// way out that /readyz shows; other errors pass unchanged. 15 answers
// "cannot read from logical replication slot" (seen on 15.18 by
// loadtests/experiments' slot-wal-retention, whose /readyz lacked the
// way out), 16 and later "can no longer get changes".
func TestExplainLostSlot(t *testing.T) {
	t.Parallel()
	for _, msg := range []string{`cannot read from logical replication slot "s1"`, `can no longer get changes from replication slot "s1"`} {
		lost := &pgconn.PgError{Code: "55000", Message: msg,
			Detail: "This slot has been invalidated because it exceeded the maximum reserved size."}
		got := explain("s1", fmt.Errorf("start replication: %w", lost))
		if !strings.Contains(got.Error(), "pg_drop_replication_slot('s1')") || !errors.Is(got, lost) {
			t.Errorf("explain(%s) = %v", msg, got)
		}
	}
	other := &pgconn.PgError{Code: "55000", Message: "replication slot \"s1\" is active for PID 42"}
	if got := explain("s1", other); got != error(other) {
		t.Errorf("explain(active slot) = %v, want it unchanged", got)
	}
}

// TestWalsenderBoundsABlockedSend: the replication connection asks its
// walsender for the TCP user timeout and keepalives, so that a frozen or
// unreachable consumer cannot keep the walsender (and a CHECKPOINT that
// waits for it) blocked in a send; the experiment slot-wal-retention
// measures the CHECKPOINT. A REPLICATION_URL that sets one keeps it.
func TestWalsenderBoundsABlockedSend(t *testing.T) {
	t.Parallel()
	show := func(rawURL, name string) string {
		t.Helper()
		var cfg Config
		cfg.ReplicationURL, cfg.Slot, cfg.Postgres.ConnectTimeout = rawURL, "test_show", 10*time.Second
		conn, err := connectReplication(kittest.Context(t, 10*time.Second), cfg, cfg.Slot)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		res, err := conn.Exec(kittest.Context(t, 10*time.Second), "SHOW "+name).ReadAll()
		if err != nil || len(res) != 1 || len(res[0].Rows) != 1 {
			t.Fatalf("SHOW %s on the replication connection: %v %v", name, res, err)
		}
		return string(res[0].Rows[0][0])
	}
	base := kittest.PostgresURL(t)
	for name, want := range map[string]string{"tcp_user_timeout": "10000", "tcp_keepalives_idle": "10", "tcp_keepalives_interval": "5", "tcp_keepalives_count": "3"} {
		if got := show(base, name); got != want {
			t.Errorf("walsender %s = %q, want %q", name, got, want)
		}
	}
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	if got := show(base+sep+"tcp_user_timeout=20000", "tcp_user_timeout"); got != "20000" {
		t.Errorf("REPLICATION_URL's own tcp_user_timeout=20000: walsender has %q, want 20000", got)
	}
}
