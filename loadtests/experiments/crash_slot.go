package experiments

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/pairs"
)

// slotWALRetention is issue 14's item 3: no-kafka's consumer frozen
// (SIGSTOP: its walsender stays connected and confirms nothing), events
// written straight into its messages table and the WAL its slot retains
// read against their number; then max_slot_wal_keep_size set small, more
// written, CHECKPOINT with the consumer still frozen (issue 26 item 6:
// each timed, the slowest within checkpointBound on the stack's TCP
// settings): the slot is invalidated (wal_status lost), the
// thawed service says so on /readyz, and the documented recovery (drop
// the slot, restart: a new slot and a resync from messages) delivers
// every event written.
func slotWALRetention() Experiment {
	return Experiment{Name: "slot-wal-retention", Run: runSlotWALRetention, Text: slotText}
}

// slotText is slot-wal-retention's prose.
var slotText = Text{
	Title:    "A replication slot retains WAL while its consumer is away",
	Happens:  "While no-kafka's consumer is away its slot keeps every WAL segment since its confirmed position, without bound; with max_slot_wal_keep_size the server invalidates the slot instead (wal_status lost) and its stream is gone. no-kafka then fails /readyz with the reason, and the documented recovery (drop the slot, restart: a new slot plus a resync from the messages table) delivers every event.",
	UserMust: "Monitor the slot's retained WAL (GET /consumer, pg_replication_slots) and alert long before the disk fills; set max_slot_wal_keep_size to bound it, and when a slot is lost follow /readyz: drop it and restart so that the resync delivers what the stream lost.",
	Figure: func(f *Figures) string {
		steps := slotSteps(f)
		var points []string
		for _, n := range steps {
			points = append(points, fmt.Sprintf("%d events → %.1f MB", n, f.Num(slotRetainedKey(n))/1e6))
		}
		return fmt.Sprintf("Consumer frozen: the slot retained %s (about %.0f bytes of WAL per event). With max_slot_wal_keep_size=%s and %d events written, the consumer still frozen, CHECKPOINT: wal_status lost, the slowest CHECKPOINT took %.1f s (bound %.0f s); /readyz answered %d. Drop + restart resynced from messages in %.2f s: %d of %d events delivered, %d lost.",
			strings.Join(points, ", "), perEvent(f.Result().Metrics, steps), f.Str("max_slot_wal_keep_size"), f.Int(MetricEventsWritten),
			f.Num(MetricCheckpointMaxSeconds), f.Num(MetricCheckpointBoundSeconds), f.Int(MetricReadyzCode), f.Num(MetricRecoveryStartSeconds),
			f.Int(MetricEventsDelivered), f.Int(MetricEventsWritten), f.Int(MetricEventsLost))
	},
	Notes: func(f *Figures) []string {
		active := map[bool]string{true: "still active", false: "already gone"}[f.Num(MetricWalsenderActiveAtBound) != 0]
		notes := crashNotes(f,
			"the consumer is frozen with SIGSTOP, so that it confirms nothing (a stopped service gives the same retention); events are written straight into log.messages, 100-byte payloads for the retention points and 1.5 kB ones to pass the bound",
			fmt.Sprintf("the stack's settings: wal_sender_timeout at its default (60 s), %s; no-kafka asks its walsender for the same TCP settings; its walsender was %s when the bound was set", tcpSettingsText(), active),
			"/readyz after the invalidation: "+clipErr(fmt.Sprintf("%d %s", f.Int(MetricReadyzCode), f.Str("readyz_body"))))
		if took, bound := f.Num(MetricCheckpointMaxSeconds), f.Num(MetricCheckpointBoundSeconds); took > bound {
			notes = append(notes, fmt.Sprintf("FINDING: a CHECKPOINT with the consumer frozen took %.1f s, past its bound of %.0f s", took, bound))
		}
		if f.Num(MetricReadyzNamesRecovery) == 0 {
			notes = append(notes, "FINDING: /readyz did not answer 503 naming pg_drop_replication_slot after the slot was invalidated")
		}
		return notes
	},
}

// slotRetainedKey is the metric of the WAL retained after n events.
func slotRetainedKey(n int) driver.Metric { return MetricRetainedBytesAtOf.Of(strconv.Itoa(n)) }

// SlotRetention is what a slot-wal-retention result r holds of its
// frozen slot: the numbers of events written at its retention points, in
// order, and the WAL bytes the slot retained at each.
func SlotRetention(r Result) (events []int, retained []float64) {
	for k := range r.Metrics {
		if s, ok := MetricRetainedBytesAtOf.Name(k); ok {
			if n, err := strconv.Atoi(s); err == nil {
				events = append(events, n)
			}
		}
	}
	slices.Sort(events)
	for _, n := range events {
		retained = append(retained, r.Metrics[slotRetainedKey(n)])
	}
	return events, retained
}

// slotSteps are the retention points f holds, in order.
func slotSteps(f *Figures) []int {
	steps, _ := SlotRetention(f.Result())
	if len(steps) == 0 {
		f.miss("retained_bytes_at_*")
		steps = []int{0}
	}
	return steps
}

// slotSQL reads the slot's retained WAL and status.
const slotStatusSQL = `SELECT coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn), 0)::bigint, coalesce(wal_status, ''), active
FROM pg_replication_slots WHERE slot_name = $1`

// slotRun is one run of slot-wal-retention: no-kafka at base on rig's
// private cluster, conn a connection of the experiment's own, pid the
// service's process (frozen until thaw).
type slotRun struct {
	rig     *crashRig
	base    string
	extra   map[string]string
	conn    *pgx.Conn
	pid     int
	thawed  bool
	total   int // events written
	metrics map[driver.Metric]float64
	res     *Result
}

// The service and slot of slot-wal-retention, and the bound it sets.
const (
	slotService = pairs.NoKafka
	slotName    = "exp_slot"
	slotKeep    = "16MB"
)

func runSlotWALRetention(ctx context.Context, env Env, size Size) (Result, error) {
	began := time.Now()
	steps := []int{0, 1000, 4000, 10000}
	if size == Full {
		steps = []int{0, 10000, 50000, 100000}
	}
	// The stack's settings (scripts/stack.sh), wal_sender_timeout left at
	// its default (60 s): the frozen consumer's walsender stays, blocked
	// in a send once the consumer's socket buffer is full, and the
	// CHECKPOINT that must invalidate its slot signals it and waits for
	// it to exit. wal_sender_timeout does not end a blocked send;
	// tcp_user_timeout does (the stack's, and the one no-kafka asks of its
	// walsender), so the CHECKPOINT must end within checkpointBound.
	rig, err := newCrashRig(ctx, env, stackTCPSettings)
	if err != nil {
		return Result{}, err
	}
	defer rig.Close()
	res := Result{Name: "slot-wal-retention", Metrics: map[driver.Metric]float64{}}
	r := &slotRun{rig: rig, extra: map[string]string{"SLOT_NAME": slotName, "STANDBY_STATUS_INTERVAL": "200ms"}, metrics: res.Metrics, res: &res}
	defer r.close()
	if err := r.freeze(ctx); err != nil {
		return Result{}, err
	}
	if err := r.retain(ctx, steps); err != nil {
		return Result{}, err
	}
	for _, step := range []func(context.Context) error{r.invalidate, r.readyz, r.recover} {
		if err := step(ctx); err != nil {
			return Result{}, err
		}
	}
	res.setting("max_slot_wal_keep_size", slotKeep)
	crashSettings(&res, rig.cluster)
	res.DurationS = time.Since(began).Seconds()
	return res, nil
}

// freeze starts the service, connects, lets the consumer confirm the
// slot's start and freezes it (SIGSTOP: its walsender stays connected
// and confirms nothing).
func (r *slotRun) freeze(ctx context.Context) error {
	base, err := r.rig.start(ctx, slotService, r.extra)
	if err != nil {
		return err
	}
	r.base = base
	if r.conn, err = pgx.Connect(ctx, r.rig.cluster.URL()); err != nil {
		return err
	}
	time.Sleep(time.Second)
	if r.pid, err = servicePID(slotService, r.rig.ports[slotService]); err != nil {
		return err
	}
	return syscall.Kill(r.pid, syscall.SIGSTOP)
}

// thaw lets the frozen service run again (once).
func (r *slotRun) thaw() {
	if !r.thawed && r.pid > 0 {
		r.thawed = true
		_ = syscall.Kill(r.pid, syscall.SIGCONT)
	}
}

// close thaws the service and closes the connection.
func (r *slotRun) close() {
	r.thaw()
	if r.conn != nil {
		r.conn.Close(context.Background())
	}
}

// readSlot reads the slot's retained WAL, wal_status and whether its
// walsender is active.
func (r *slotRun) readSlot(ctx context.Context) (retained int64, status string, active bool, err error) {
	err = r.conn.QueryRow(ctx, slotStatusSQL, slotName).Scan(&retained, &status, &active)
	return
}

// retain writes events up to each of steps with the consumer frozen and
// records the WAL the slot retains at each.
func (r *slotRun) retain(ctx context.Context, steps []int) error {
	for _, n := range steps {
		if n > r.total {
			if err := insertEvents(ctx, r.conn, n-r.total, 100); err != nil {
				return err
			}
			r.total = n
		}
		retained, _, _, err := r.readSlot(ctx)
		if err != nil {
			return err
		}
		r.metrics[slotRetainedKey(n)] = float64(retained)
		r.rig.logf("consumer frozen, %d events written: slot retains %d bytes of WAL", n, retained)
	}
	return nil
}

// invalidate bounds the slot, writes past the bound and checkpoints (the
// consumer still frozen, its walsender possibly still there), each
// CHECKPOINT timed, until the slot is invalidated.
func (r *slotRun) invalidate(ctx context.Context) error {
	_, _, activeAtBound, err := r.readSlot(ctx)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, 4*time.Minute)
	defer cancel()
	if err := r.rig.cluster.Exec(ctx, `ALTER SYSTEM SET max_slot_wal_keep_size = '`+slotKeep+`'`); err != nil {
		return err
	}
	if err := r.rig.cluster.Exec(ctx, `SELECT pg_reload_conf()`); err != nil {
		return err
	}
	var status string
	var checkpointMax time.Duration
	for round := 0; round < 5 && status != "lost"; round++ {
		took, err := r.checkpointRound(cctx)
		if err != nil {
			return err
		}
		checkpointMax = max(checkpointMax, took)
		var active bool
		if _, status, active, err = r.readSlot(cctx); err != nil {
			return err
		}
		r.rig.logf("max_slot_wal_keep_size=%s, %d events written, CHECKPOINT in %.2f s: wal_status %q, walsender active %v", slotKeep, r.total, took.Seconds(), status, active)
	}
	r.metrics[MetricEventsWritten] = float64(r.total)
	r.metrics[MetricCheckpointMaxSeconds] = checkpointMax.Seconds()
	r.metrics[MetricCheckpointBoundSeconds] = checkpointBound.Seconds()
	r.metrics[MetricWalsenderActiveAtBound] = b2f(activeAtBound)
	if status != "lost" {
		return fmt.Errorf("the slot was not invalidated after %d events with max_slot_wal_keep_size=%s (wal_status %q)", r.total, slotKeep, status)
	}
	return nil
}

// checkpointRound writes about 30 MB of WAL (1.5 kB payloads), switches
// the WAL file and returns how long a CHECKPOINT then took.
func (r *slotRun) checkpointRound(ctx context.Context) (time.Duration, error) {
	if err := insertEvents(ctx, r.conn, 20000, 1500); err != nil {
		return 0, err
	}
	r.total += 20000
	if _, err := r.conn.Exec(ctx, `SELECT pg_switch_wal()`); err != nil {
		return 0, err
	}
	t0 := time.Now()
	if _, err := r.conn.Exec(ctx, `CHECKPOINT`); err != nil {
		return 0, fmt.Errorf("CHECKPOINT with the consumer frozen, after %.1f s: %w", time.Since(t0).Seconds(), err)
	}
	return time.Since(t0), nil
}

// readyz thaws the service, whose stream is gone, and records what
// /readyz says within 20 s: it must answer 503 naming the recovery.
func (r *slotRun) readyz(ctx context.Context) error {
	r.thaw()
	var readyCode int
	var readyBody string
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		code, b, err := driver.Do(ctx, http.MethodGet, r.base+"/readyz", nil)
		if err == nil {
			readyCode, readyBody = code, strings.TrimSpace(string(b))
			if code != http.StatusOK && strings.Contains(readyBody, "lost") {
				break
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	r.rig.logf("/readyz after the invalidation: %d %s", readyCode, readyBody)
	readyOK := readyCode == http.StatusServiceUnavailable && strings.Contains(readyBody, "pg_drop_replication_slot")
	r.metrics[MetricReadyzCode] = float64(readyCode)
	r.metrics[MetricReadyzNamesRecovery] = b2f(readyOK)
	r.res.setting("readyz_body", readyBody)
	return nil
}

// recover follows the documented recovery, drop the slot and restart the
// service, and counts the events delivered and lost.
func (r *slotRun) recover(ctx context.Context) error {
	if err := r.rig.stop(slotService); err != nil {
		return err
	}
	if _, err := r.conn.Exec(ctx, `SELECT pg_drop_replication_slot($1)`, slotName); err != nil {
		return err
	}
	t0 := time.Now()
	if _, err := r.rig.start(ctx, slotService, r.extra); err != nil {
		return err
	}
	recoverTime := time.Since(t0)
	var undelivered, delivered int64
	if err := r.conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE d.id IS NULL), count(d.id) FROM log.messages m LEFT JOIN log.deliveries d ON d.id = m.id`).Scan(&undelivered, &delivered); err != nil {
		return err
	}
	r.rig.logf("after drop + restart: %d of %d events delivered, %d undelivered (start %.2f s)", delivered, r.total, undelivered, recoverTime.Seconds())
	lost := undelivered
	if int64(r.total) > delivered+undelivered {
		lost += int64(r.total) - delivered - undelivered
	}
	r.res.AckedLost = lost
	r.metrics[MetricEventsDelivered] = float64(delivered)
	r.metrics[MetricEventsLost] = float64(lost)
	r.metrics[MetricRecoveryStartSeconds] = recoverTime.Seconds()
	return nil
}

// stackTCPSettings are scripts/stack.sh's (and docker-compose.yml's)
// bounds on a frozen or network-hung client: data unacknowledged for
// 10 s (a zero window included) aborts the connection, and keepalives
// find a silent peer gone. TestStackTCPSettings checks that both files
// still set them.
var stackTCPSettings = map[string]string{
	"tcp_user_timeout":        "10000",
	"tcp_keepalives_idle":     "10",
	"tcp_keepalives_interval": "5",
	"tcp_keepalives_count":    "3",
}

// checkpointBound is how long a CHECKPOINT may take while a consumer is
// frozen with its walsender blocked in a send: tcp_user_timeout (10 s)
// ends the send, and the rest is the checkpoint itself and the
// invalidation's wait, with room for a loaded machine.
const checkpointBound = 30 * time.Second

// tcpSettingsText lists stackTCPSettings as "name = value", sorted.
func tcpSettingsText() string {
	parts := make([]string, 0, len(stackTCPSettings))
	for k, v := range stackTCPSettings {
		parts = append(parts, k+" = "+v)
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

// perEvent is the retained WAL per event between the first and the last
// retention point.
func perEvent(m map[driver.Metric]float64, steps []int) float64 {
	first, last := steps[0], steps[len(steps)-1]
	if last == first {
		return 0
	}
	return (m[slotRetainedKey(last)] - m[slotRetainedKey(first)]) / float64(last-first)
}

// insertEvents writes n events straight into log.messages (committed in
// transactions of at most 5000), each with a payload of about pad bytes.
func insertEvents(ctx context.Context, conn *pgx.Conn, n, pad int) error {
	for n > 0 {
		k := min(n, 5000)
		// md5 text does not compress under the TOAST threshold: the WAL
		// carries every byte.
		if _, err := conn.Exec(ctx, `INSERT INTO log.messages (id, type, key, payload)
			SELECT gen_random_uuid(), 'exp.slot', 'k' || (i % 16), jsonb_build_object('pad', left(repeat(md5(i::text || random()::text), $2 / 32 + 1), $2))
			FROM generate_series(1, $1) AS g(i)`, k, pad); err != nil {
			return fmt.Errorf("insert events: %w", err)
		}
		n -= k
	}
	return nil
}

// servicePID finds the process of the service name that this run started
// on port: its executable is named name and its environment holds
// ADDR=127.0.0.1:port.
func servicePID(name string, port int) (int, error) {
	want := []byte("ADDR=127.0.0.1:" + strconv.Itoa(port) + "\x00")
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		exe, _, _ := bytes.Cut(cmdline, []byte{0})
		if filepath.Base(string(exe)) != name {
			continue
		}
		environ, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err == nil && bytes.Contains(append(environ, 0), want) {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("no %s process with ADDR=127.0.0.1:%d", name, port)
}
