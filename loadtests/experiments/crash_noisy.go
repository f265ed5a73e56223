package experiments

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/loadtests/raw"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// noisyNeighbourSlot is issue 14's item 10: WAL written into an unrelated
// table while no-kafka is stopped, then the time from no-kafka's start
// until a new event is delivered, and the slot's lag at that start: the
// walsender decodes every record of the cluster's WAL since the slot's
// position, the unrelated ones too, before it reaches the new event.
// Beside it, each remedy on the same noise: the log in a database of its
// own, the consumer kept running, and (at the protocol level) pgoutput
// with a publication against wal2json with and without its table filter.
func noisyNeighbourSlot() Experiment {
	return Experiment{Name: "noisy-neighbour-slot", Run: runNoisyNeighbour, Full: 200 * time.Second, Text: noisyText}
}

// noisyDB is the database of the second no-kafka (the log in a database of
// its own); the noise is always written in the cluster's postgres database.
const noisyDB = "exp_logdb"

// noisyRawSlot is one protocol-level slot read after the noise: a plugin
// and the options of its START_REPLICATION.
type noisyRawSlot struct {
	key, label, plugin string
	args               []string
}

// noisyRawSlots are the slots the protocol-level comparison reads, each
// created before the noise in the database the noise is written to.
var noisyRawSlots = []noisyRawSlot{
	{key: "pgoutput_pub", label: "pgoutput with a publication FOR TABLE log.messages", plugin: "pgoutput",
		args: []string{`proto_version '1'`, `publication_names 'exp_noisy_pub'`}},
	{key: "wal2json_filter", label: "wal2json with add-tables (no-kafka's options)", plugin: "wal2json",
		args: []string{`"format-version" '2'`, `"add-tables" 'log.messages'`, `"actions" 'insert'`, `"include-transaction" 'true'`, `"include-types" 'false'`}},
	{key: "wal2json_all", label: "wal2json without a table filter", plugin: "wal2json",
		args: []string{`"format-version" '2'`, `"actions" 'insert'`, `"include-transaction" 'true'`, `"include-types" 'false'`}},
}

// noisyText is noisy-neighbour-slot's prose.
var noisyText = Text{
	Title: "A slot decodes the whole cluster's WAL (noisy neighbour)",
	Happens: "A logical slot's walsender reads every WAL record written since the slot's position and decodes every change of its own database, unrelated tables too: " +
		"the table filter (wal2json's add-tables, pgoutput's publication) runs on each change after decoding, and only other databases' records are skipped early. " +
		"WAL written by other work while no-kafka is away delays the first new event by the time it takes to get through it.",
	UserMust: "Keep the consumer running (a slot that keeps up decodes the neighbour's WAL as it is written); put the log in a database of its own (decoding drops other databases' records early; the lag in bytes stays as large); " +
		"a table filter keeps the noise off the wire, not out of decoding, and with many small neighbouring transactions pgoutput's publication (which sends nothing for emptied transactions) gets through faster than wal2json's add-tables (which sends a B and a C for each); " +
		"watch the slot's lag in bytes (GET /consumer), not only in events (docs/log.md, Noisy neighbour: what to do).",
	Figure: noisyFigure,
	Notes: func(f *Figures) []string {
		return crashNotes(f,
			"the unrelated WAL is rows of about 1 kB in public.noise of the postgres database (no-kafka's), in transactions of 10,000 rows, then (\"one-row transactions\", a queue's shape) one row per transaction written with synchronous_commit = off",
			"the lag is pg_current_wal_lsn() - confirmed_flush_lsn before no-kafka starts; no-kafka's times run from launching the process, so the 0 MB round is the start's own cost",
			"(a): the time runs from the event's commit until GET /events/{id}/wait answers; the walsender's lag is pg_current_wal_lsn() - sent_lsn of no-kafka's walsender at that commit",
			"(b): a second no-kafka (SLOT_NAME exp_noisy_db) with its schema and slot in database "+noisyDB+" of the same cluster, the noise in database postgres; its slot's lag in bytes holds the other database's WAL too, but decoding drops those records before the reorder buffer (PostgreSQL's decode.c: \"only interested in our database\")",
			"(c): protocol-level slots, no service: the time runs from START_REPLICATION (connection already open) until a message holding the event's id arrives; \"received\" is what the client had to read; all three decode every change of their own database into the reorder buffer, and the table filter (pgoutput_change's publication check, wal2json's add-tables) drops it only when the transaction is replayed at its commit; wal2json with include-transaction (no-kafka's setting) still sends a B and a C for every transaction whose rows it dropped, pgoutput skips empty transactions (since PostgreSQL 15)",
			"AckedLost counts events not delivered within 3 minutes")
	},
}

// noisyRound is one round of the consumer away: the noise's amount, in
// one-row transactions when small.
type noisyRound struct {
	amount int64
	small  bool
}

// key names the round in the metrics: "100mb", "1024mb_small_tx".
func (rd noisyRound) key() string {
	key := fmt.Sprintf("%dmb", rd.amount>>20)
	if rd.small {
		key += "_small_tx"
	}
	return key
}

// noisyRoundsOf are the rounds f holds (by their first_event_s_ metric):
// by amount, the one-row-transaction rounds last, as they ran.
func noisyRoundsOf(f *Figures) []noisyRound {
	var rounds []noisyRound
	for _, rest := range f.Names(MetricFirstEventSecondsOf, "") {
		digits, _, _ := strings.Cut(rest, "mb")
		mb, err := strconv.ParseInt(digits, 10, 64)
		if err != nil {
			continue
		}
		rounds = append(rounds, noisyRound{amount: mb << 20, small: strings.HasSuffix(rest, "_small_tx")})
	}
	slices.SortFunc(rounds, func(a, b noisyRound) int {
		if a.small != b.small {
			if a.small {
				return 1
			}
			return -1
		}
		return cmp.Compare(a.amount, b.amount)
	})
	if len(rounds) == 0 {
		f.miss("first_event_s_*")
	}
	return rounds
}

// noisyFigure is the consumer-away rounds, then each remedy on the same
// noise.
func noisyFigure(f *Figures) string {
	rounds := noisyRoundsOf(f)
	var largest int64
	for _, rd := range rounds {
		largest = max(largest, rd.amount)
	}
	var away, otherDB []string
	raw := map[bool][]string{}
	for _, rd := range rounds {
		k := rd.key()
		what := noisyWhat(f.Int(MetricUnrelatedWALBytesOf.Of(k)), f.Int(MetricUnrelatedTransactionsOf.Of(k)), rd.small)
		away = append(away, fmt.Sprintf("%s (slot lag %s) → %.2f s", what, noisyBytes(f.Int(MetricLagBytesOf.Of(k))), f.Num(MetricFirstEventSecondsOf.Of(k))))
		otherDB = append(otherDB, fmt.Sprintf("%s → %.2f s", what, f.Num(MetricOtherDBFirstEventSecondsOf.Of(k))))
		if rd.amount == largest {
			var rawFigs []string
			for _, s := range noisyRawSlots {
				rawFigs = append(rawFigs, fmt.Sprintf("%s %.2f s (%s received)", s.label, f.Num(noisyRawKey(s.key, MetricRawSecondsOf, k)), noisyBytes(f.Int(noisyRawKey(s.key, MetricRawBytesReceivedOf, k)))))
			}
			raw[rd.small] = append(raw[rd.small], what+": "+strings.Join(rawFigs, ", "))
		}
	}
	var running []string
	for _, small := range []bool{false, true} {
		key := noisyRunningKey(small)
		running = append(running, fmt.Sprintf("%s (walsender %s behind at the event's commit) → %.3f s",
			noisyWhat(f.Int(SidePrefix(key+"_").Of(MetricUnrelatedWALBytes)), f.Int(SidePrefix(key+"_").Of(MetricUnrelatedTransactions)), small), noisyBytes(f.Int(SidePrefix(key+"_").Of(MetricDecodeLagBytes))), f.Num(SidePrefix(key+"_").Of(MetricEventSeconds))))
	}
	return "Consumer away (no-kafka stopped, unrelated WAL written into another table of its database, one event, no-kafka started; time from its start until it delivered the event): " +
		strings.Join(away, "; ") + ". Remedies, same noise: " +
		"(a) consumer kept running (the noise written while it streams, time from the next event's commit to its delivery): " + strings.Join(running, "; ") + "; " +
		"(b) log in a database of its own (noise in the other database, consumer away, start → delivered): " + strings.Join(otherDB, "; ") + "; " +
		"(c) slots created before the noise, consumer away, read over a replication connection from START_REPLICATION until the event: " + strings.Join(raw[false], "; ") + "; " + strings.Join(raw[true], "; ") + "."
}

// noisyRunningKey starts the metrics of the consumer-kept-running case.
func noisyRunningKey(small bool) string {
	if small {
		return "running_small_tx"
	}
	return "running"
}

// noisyRun is one run of noisy-neighbour-slot: the private cluster, a
// connection to its postgres database (the noise's and no-kafka's) and
// one to noisyDB, and the two no-kafka configurations: same (the log in
// the noise's database) and other (in noisyDB).
type noisyRun struct {
	rig             *crashRig
	mainURL         string
	conn, otherConn *pgx.Conn
	same, other     map[string]string
	metrics         map[driver.Metric]float64
	undelivered     int64
}

func runNoisyNeighbour(ctx context.Context, env Env, size Size) (Result, error) {
	began := time.Now()
	amounts := []int64{0, 20 << 20}
	if size == Full {
		amounts = []int64{0, 100 << 20, 1 << 30}
	}
	// max_wal_size: 1 GB of WAL written between two checkpoints must not
	// force checkpoints all the time (the slot retains it anyway).
	rig, err := newCrashRig(ctx, env, map[string]string{"max_wal_size": "'4GB'"})
	if err != nil {
		return Result{}, err
	}
	defer rig.Close()
	res := Result{Name: "noisy-neighbour-slot", Metrics: map[driver.Metric]float64{}}
	r := &noisyRun{rig: rig, metrics: res.Metrics}
	defer r.close()
	if err := r.setup(ctx); err != nil {
		return Result{}, err
	}
	largest := amounts[len(amounts)-1]
	// Rows in transactions of 10,000 at each amount, then the largest
	// amount again in transactions of one row each (a queue's shape).
	var rounds []noisyRound
	for _, a := range amounts {
		rounds = append(rounds, noisyRound{amount: a})
	}
	rounds = append(rounds, noisyRound{amount: largest, small: true})
	for _, rd := range rounds {
		if err := r.away(ctx, rd); err != nil {
			return Result{}, err
		}
	}
	for _, small := range []bool{false, true} {
		if err := r.running(ctx, largest, small); err != nil {
			return Result{}, err
		}
	}
	res.AckedLost = r.undelivered
	crashSettings(&res, rig.cluster)
	res.DurationS = time.Since(began).Seconds()
	return res, nil
}

// close closes the run's connections.
func (r *noisyRun) close() {
	for _, c := range []*pgx.Conn{r.conn, r.otherConn} {
		if c != nil {
			c.Close(context.Background())
		}
	}
}

// setup creates the noise table, noisyDB, both no-kafka instances'
// schemas and slots (their first start) and the publication.
func (r *noisyRun) setup(ctx context.Context) error {
	r.mainURL = r.rig.cluster.URL()
	otherURL := strings.Replace(r.mainURL, "/postgres?", "/"+noisyDB+"?", 1)
	r.same = map[string]string{"SLOT_NAME": "exp_noisy"}
	r.other = map[string]string{"SLOT_NAME": "exp_noisy_db", "DATABASE_URL": otherURL, "REPLICATION_URL": otherURL, "DATABASE_LISTEN_URL": otherURL}
	var err error
	if r.conn, err = pgx.Connect(ctx, r.mainURL); err != nil {
		return err
	}
	if _, err := r.conn.Exec(ctx, `CREATE TABLE public.noise (id bigserial PRIMARY KEY, pad text NOT NULL)`); err != nil {
		return err
	}
	if _, err := r.conn.Exec(ctx, `CREATE DATABASE `+noisyDB); err != nil {
		return err
	}
	// The first start creates each instance's schema and slot.
	for _, e := range []map[string]string{r.same, r.other} {
		if err := noisyCatchUp(ctx, r.rig, e); err != nil {
			return err
		}
	}
	if r.otherConn, err = pgx.Connect(ctx, otherURL); err != nil {
		return err
	}
	_, err = r.conn.Exec(ctx, `CREATE PUBLICATION exp_noisy_pub FOR TABLE log.messages`)
	return err
}

// away is one round with the consumers away: both caught up and stopped,
// the protocol-level slots created, the noise written, one event in each
// database; then each no-kafka started and timed until it delivered its
// event, and each protocol-level slot read until the event.
func (r *noisyRun) away(ctx context.Context, rd noisyRound) error {
	for _, e := range []map[string]string{r.same, r.other} {
		if err := noisyCatchUp(ctx, r.rig, e); err != nil {
			return err
		}
	}
	for _, s := range noisyRawSlots {
		if _, err := r.conn.Exec(ctx, `SELECT pg_create_logical_replication_slot($1, $2)`, "exp_raw_"+s.key, s.plugin); err != nil {
			return fmt.Errorf("create slot exp_raw_%s: %w", s.key, err)
		}
	}
	written, txs, err := noisyWrite(ctx, r.conn, rd.amount, rd.small)
	if err != nil {
		return err
	}
	key := rd.key()
	r.metrics[MetricUnrelatedWALBytesOf.Of(key)] = float64(written)
	r.metrics[MetricUnrelatedTransactionsOf.Of(key)] = float64(txs)
	// The new events are written after the noise, before the starts: a
	// walsender reaches them only once it has got through the noise.
	id, err := noisyEvent(ctx, r.conn)
	if err != nil {
		return err
	}
	otherID, err := noisyEvent(ctx, r.otherConn)
	if err != nil {
		return err
	}
	// Both lags before either start: a start writes WAL of its own.
	lag, err := noisySlotLag(ctx, r.conn, "exp_noisy")
	if err != nil {
		return err
	}
	otherLag, err := noisySlotLag(ctx, r.otherConn, "exp_noisy_db")
	if err != nil {
		return err
	}
	r.metrics[MetricLagBytesOf.Of(key)] = float64(lag)
	r.metrics[MetricOtherDBLagBytesOf.Of(key)] = float64(otherLag)
	if err := r.deliver(ctx, r.same, id, MetricFirstEventSecondsOf.Of(key)); err != nil {
		return err
	}
	if err := r.deliver(ctx, r.other, otherID, MetricOtherDBFirstEventSecondsOf.Of(key)); err != nil {
		return err
	}
	r.rig.logf("consumer away, %s: no-kafka delivered %.2f s after its start (slot lag %.0f bytes); log in database %s: %.2f s (slot lag %.0f bytes)",
		noisyWhat(written, txs, rd.small), r.metrics[MetricFirstEventSecondsOf.Of(key)], r.metrics[MetricLagBytesOf.Of(key)], noisyDB, r.metrics[MetricOtherDBFirstEventSecondsOf.Of(key)], r.metrics[MetricOtherDBLagBytesOf.Of(key)])
	return r.readRawSlots(ctx, id, key)
}

// deliver starts no-kafka with extra and records under metric how long
// it took until it delivered event id.
func (r *noisyRun) deliver(ctx context.Context, extra map[string]string, id string, metric driver.Metric) error {
	wait, ok, err := noisyDeliverAfterStart(ctx, r.rig, extra, id)
	if err != nil {
		return err
	}
	if !ok {
		r.undelivered++
	}
	r.metrics[metric] = wait.Seconds()
	return nil
}

// readRawSlots reads each protocol-level slot from START_REPLICATION until
// event id, records the time and the bytes received, and drops the slot.
func (r *noisyRun) readRawSlots(ctx context.Context, id, key string) error {
	for _, s := range noisyRawSlots {
		d, recv, err := noisyRawReach(ctx, r.mainURL, "exp_raw_"+s.key, s.args, id)
		if err != nil {
			return fmt.Errorf("slot exp_raw_%s: %w", s.key, err)
		}
		r.metrics[noisyRawKey(s.key, MetricRawSecondsOf, key)] = d.Seconds()
		r.metrics[noisyRawKey(s.key, MetricRawBytesReceivedOf, key)] = float64(recv)
		r.rig.logf("consumer away, %s: slot %s read to the event in %.2f s (%s received)", key, s.key, d.Seconds(), noisyBytes(recv))
		if err := noisyDropSlot(ctx, r.conn, "exp_raw_"+s.key); err != nil {
			return err
		}
	}
	return nil
}

// running is the consumer kept running: amount of noise (in one-row
// transactions when small) written while no-kafka streams, then one
// event, timed from its commit until no-kafka has it.
func (r *noisyRun) running(ctx context.Context, amount int64, small bool) error {
	m, err := r.whileRunning(ctx, amount, small)
	if err != nil {
		return err
	}
	if !m.delivered {
		r.undelivered++
	}
	key := noisyRunningKey(small)
	r.metrics[SidePrefix(key+"_").Of(MetricUnrelatedWALBytes)] = float64(m.written)
	r.metrics[SidePrefix(key+"_").Of(MetricUnrelatedTransactions)] = float64(m.txs)
	r.metrics[SidePrefix(key+"_").Of(MetricDecodeLagBytes)] = float64(m.lag)
	r.metrics[SidePrefix(key+"_").Of(MetricEventSeconds)] = m.wait.Seconds()
	r.rig.logf("consumer running: %s (walsender %s behind at the event's commit) → %.3f s", noisyWhat(m.written, m.txs, small), noisyBytes(m.lag), m.wait.Seconds())
	return nil
}

// noisyCatchUp starts no-kafka with extra, writes one event, waits until
// it is delivered (the slot is caught up) and stops it.
func noisyCatchUp(ctx context.Context, rig *crashRig, extra map[string]string) error {
	base, err := rig.start(ctx, pairs.NoKafka, extra)
	if err != nil {
		return err
	}
	id, code, b, err := crashPostID(ctx, base+"/events", `{"type":"exp.noisy.probe","key":"k","payload":{}}`)
	if err != nil || code != http.StatusCreated {
		return fmt.Errorf("probe event: %d %s %v", code, b, err)
	}
	if ok, err := noisyWaitDelivered(ctx, base, id, time.Minute); err != nil || !ok {
		return fmt.Errorf("probe event %s not delivered (%v)", id, err)
	}
	return rig.stop(pairs.NoKafka)
}

// noisyWrite writes at least amount bytes of WAL into public.noise, in
// transactions of 10,000 rows, or of one row each when small, then empties
// it; it returns the WAL bytes and the transactions written.
func noisyWrite(ctx context.Context, conn *pgx.Conn, amount int64, small bool) (written, txs int64, err error) {
	var startLSN string
	if err := conn.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&startLSN); err != nil {
		return 0, 0, err
	}
	if small {
		// The noise's durability does not matter: without this, each
		// one-row commit waits for its flush.
		if _, err := conn.Exec(ctx, `SET synchronous_commit = off`); err != nil {
			return 0, 0, err
		}
		defer func() {
			if _, e := conn.Exec(ctx, `RESET synchronous_commit`); err == nil {
				err = e
			}
		}()
	}
	for written < amount {
		// Rows of about 1 kB (md5 text), below the TOAST threshold:
		// about 11 MB of WAL per statement either way.
		q := `INSERT INTO public.noise (pad) SELECT repeat(md5(g::text || random()::text), 30) FROM generate_series(1, 10000) g`
		n := int64(1)
		if small {
			q = `DO $$ BEGIN FOR i IN 1..10000 LOOP INSERT INTO public.noise (pad) VALUES (repeat(md5(i::text || random()::text), 30)); COMMIT; END LOOP; END $$`
			n = 10000
		}
		if _, err := conn.Exec(ctx, q); err != nil {
			return 0, 0, err
		}
		txs += n
		if err := conn.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::bigint`, startLSN).Scan(&written); err != nil {
			return 0, 0, err
		}
	}
	if _, err := conn.Exec(ctx, `TRUNCATE public.noise`); err != nil {
		return 0, 0, err
	}
	return written, txs, nil
}

// noisyWhat names the noise of one round in the figure.
func noisyWhat(written, txs int64, small bool) string {
	if small {
		return fmt.Sprintf("%s in %d one-row transactions", noisyBytes(written), txs)
	}
	return noisyBytes(written)
}

// noisyEvent inserts one event into log.messages of conn's database.
func noisyEvent(ctx context.Context, conn *pgx.Conn) (string, error) {
	var id string
	err := conn.QueryRow(ctx, `INSERT INTO log.messages (id, type, key) VALUES (gen_random_uuid(), 'exp.noisy', 'k') RETURNING id::text`).Scan(&id)
	return id, err
}

// noisySlotLag is the WAL between the current position and slot's
// confirmed_flush_lsn.
func noisySlotLag(ctx context.Context, conn *pgx.Conn, slot string) (int64, error) {
	var lag int64
	err := conn.QueryRow(ctx, `SELECT coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn), 0)::bigint FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&lag)
	return lag, err
}

// noisyDeliverAfterStart starts no-kafka with extra, waits until event id
// is delivered (3 minutes at most) and stops it; the time runs from the
// launch.
func noisyDeliverAfterStart(ctx context.Context, rig *crashRig, extra map[string]string, id string) (time.Duration, bool, error) {
	t0 := time.Now()
	base, err := rig.start(ctx, pairs.NoKafka, extra)
	if err != nil {
		return 0, false, err
	}
	ok, err := noisyWaitDelivered(ctx, base, id, 3*time.Minute)
	if err != nil {
		return 0, false, err
	}
	wait := time.Since(t0)
	return wait, ok, rig.stop(pairs.NoKafka)
}

// noisyWaitDelivered long-polls GET /events/{id}/wait until it answers 200
// or within has passed.
func noisyWaitDelivered(ctx context.Context, base, id string, within time.Duration) (bool, error) {
	t0 := time.Now()
	for time.Since(t0) < within {
		code, _, err := driver.Do(ctx, http.MethodGet, base+"/events/"+id+"/wait?timeout=10s", nil)
		if err != nil {
			return false, err
		}
		if code == http.StatusOK {
			return true, nil
		}
	}
	return false, nil
}

// noisyReach is what whileRunning measured: the time from the event's
// commit until no-kafka had it (delivered false when it did not within
// the bound), the unrelated WAL bytes and transactions written before
// it, and how far behind no-kafka's walsender was at the commit.
type noisyReach struct {
	wait              time.Duration
	written, txs, lag int64
	delivered         bool
}

// whileRunning starts no-kafka with r.same (caught up), writes amount
// bytes of unrelated WAL on r.conn (in one-row transactions when small)
// while it streams, then one event, and measures the event's way to
// no-kafka (noisyReach).
func (r *noisyRun) whileRunning(ctx context.Context, amount int64, small bool) (m noisyReach, err error) {
	rig, conn, extra := r.rig, r.conn, r.same
	base, err := rig.start(ctx, pairs.NoKafka, extra)
	if err != nil {
		return m, err
	}
	defer func() {
		if e := rig.stop(pairs.NoKafka); err == nil {
			err = e
		}
	}()
	probe, code, b, err := crashPostID(ctx, base+"/events", `{"type":"exp.noisy.probe","key":"k","payload":{}}`)
	if err != nil || code != http.StatusCreated {
		return m, fmt.Errorf("probe event: %d %s %v", code, b, err)
	}
	if ok, err := noisyWaitDelivered(ctx, base, probe, time.Minute); err != nil || !ok {
		return m, fmt.Errorf("probe event not delivered (%v)", err)
	}
	if m.written, m.txs, err = noisyWrite(ctx, conn, amount, small); err != nil {
		return m, err
	}
	id, err := noisyEvent(ctx, conn)
	if err != nil {
		return m, err
	}
	t0 := time.Now()
	// sent_lsn of a logical walsender is how far it has read and decoded.
	err = conn.QueryRow(ctx, `SELECT coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(), r.sent_lsn), -1)::bigint
		FROM pg_replication_slots s JOIN pg_stat_replication r ON r.pid = s.active_pid WHERE s.slot_name = $1`, extra["SLOT_NAME"]).Scan(&m.lag)
	if errors.Is(err, pgx.ErrNoRows) {
		m.lag, err = -1, nil
	}
	if err != nil {
		return m, err
	}
	m.delivered, err = noisyWaitDelivered(ctx, base, id, 3*time.Minute)
	m.wait = time.Since(t0)
	return m, err
}

// noisyRawReach opens a replication connection to url, streams slot with
// args from its position and returns the time from START_REPLICATION until
// a message holding id arrived, and the bytes of messages received.
func noisyRawReach(ctx context.Context, url, slot string, args []string, id string) (time.Duration, int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	conn, err := raw.ReplicationConn(ctx, url, 10*time.Second)
	if err != nil {
		return 0, 0, err
	}
	defer conn.Close(context.Background())
	want := []byte(id)
	t0 := time.Now()
	if err := pglogrepl.StartReplication(ctx, conn, slot, 0, pglogrepl.StartReplicationOptions{Mode: pglogrepl.LogicalReplication, PluginArgs: args}); err != nil {
		return 0, 0, fmt.Errorf("start replication: %w", err)
	}
	var recv int64
	var pos pglogrepl.LSN
	for {
		msg, err := conn.ReceiveMessage(ctx)
		if err != nil {
			return 0, recv, fmt.Errorf("event not reached after %d bytes: %w", recv, err)
		}
		x, err := raw.ReplicationData(ctx, conn, msg, pos)
		if err != nil {
			return 0, recv, err
		}
		if x == nil {
			continue
		}
		recv += int64(len(x.WALData))
		pos = x.WALStart
		// The id's text is in wal2json's JSON and in pgoutput's Insert
		// (tuple data in text form) alike.
		if bytes.Contains(x.WALData, want) {
			return time.Since(t0), recv, nil
		}
	}
}

// noisyDropSlot drops slot once its walsender (closed by the caller) has
// released it.
func noisyDropSlot(ctx context.Context, conn *pgx.Conn, slot string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		var active bool
		if err := conn.QueryRow(ctx, `SELECT active FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&active); err != nil {
			return err
		}
		if !active {
			_, err := conn.Exec(ctx, `SELECT pg_drop_replication_slot($1)`, slot)
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("slot %s still active after 30 s", slot)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// noisyBytes is n in kB, MB or GB.
func noisyBytes(n int64) string {
	switch {
	case n < 0:
		return "unknown"
	case n < 1e3:
		return fmt.Sprintf("%d bytes", n)
	case n < 1e6:
		return fmt.Sprintf("%.0f kB", float64(n)/1e3)
	case n < 1e9:
		return fmt.Sprintf("%.0f MB", float64(n)/1e6)
	}
	return fmt.Sprintf("%.2f GB", float64(n)/1e9)
}

// noisyRawKey is the key of figure fig (the seconds until the event,
// the bytes received) of raw slot slot in round: "raw_<slot>_s_<round>".
func noisyRawKey(slot string, fig driver.MetricPrefix, round string) driver.Metric {
	return driver.MetricPrefix("raw_" + slot + "_" + string(fig)).Of(round)
}
