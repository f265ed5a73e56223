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
	return Experiment{Name: "slot-wal-retention", Run: runSlotWALRetention}
}

// slotSQL reads the slot's retained WAL and status.
const slotStatusSQL = `SELECT coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn), 0)::bigint, coalesce(wal_status, ''), active
FROM pg_replication_slots WHERE slot_name = $1`

func runSlotWALRetention(ctx context.Context, env Env, size Size) (Result, error) {
	began := time.Now()
	steps := []int{0, 1000, 4000, 10000}
	if size == Full {
		steps = []int{0, 10000, 50000, 100000}
	}
	const svc, slot = "no-kafka", "exp_slot"
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
	extra := map[string]string{"SLOT_NAME": slot, "STANDBY_STATUS_INTERVAL": "200ms"}
	base, err := rig.start(ctx, svc, extra)
	if err != nil {
		return Result{}, err
	}
	conn, err := pgx.Connect(ctx, rig.cluster.URL())
	if err != nil {
		return Result{}, err
	}
	defer func() { conn.Close(context.Background()) }()
	readSlot := func() (retained int64, status string, active bool, err error) {
		err = conn.QueryRow(ctx, slotStatusSQL, slot).Scan(&retained, &status, &active)
		return
	}
	// Let the consumer confirm the slot's start.
	time.Sleep(time.Second)
	pid, err := servicePID(svc, rig.ports[svc])
	if err != nil {
		return Result{}, err
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return Result{}, err
	}
	thawed := false
	thaw := func() {
		if !thawed {
			thawed = true
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}
	defer thaw()

	res := Result{
		Name:     "slot-wal-retention",
		Title:    "A replication slot retains WAL while its consumer is away",
		Happens:  "While no-kafka's consumer is away its slot keeps every WAL segment since its confirmed position, without bound; with max_slot_wal_keep_size the server invalidates the slot instead (wal_status lost) and its stream is gone. no-kafka then fails /readyz with the reason, and the documented recovery (drop the slot, restart: a new slot plus a resync from the messages table) delivers every event.",
		UserMust: "Monitor the slot's retained WAL (GET /consumer, pg_replication_slots) and alert long before the disk fills; set max_slot_wal_keep_size to bound it, and when a slot is lost follow /readyz: drop it and restart so that the resync delivers what the stream lost.",
		Metrics:  map[string]float64{},
	}
	var points []string
	total := 0
	for _, n := range steps {
		if n > total {
			if err := insertEvents(ctx, conn, n-total, 100); err != nil {
				return Result{}, err
			}
			total = n
		}
		retained, _, _, err := readSlot()
		if err != nil {
			return Result{}, err
		}
		res.Metrics[fmt.Sprintf("retained_bytes_at_%d", n)] = float64(retained)
		points = append(points, fmt.Sprintf("%d events → %.1f MB", n, float64(retained)/1e6))
		rig.logf("consumer frozen, %d events written: slot retains %d bytes of WAL", n, retained)
	}

	// Bound the slot, write past the bound, checkpoint (the consumer still
	// frozen, its walsender possibly still there): invalidated, each
	// CHECKPOINT timed.
	_, _, activeAtBound, err := readSlot()
	if err != nil {
		return Result{}, err
	}
	cctx, cancel := context.WithTimeout(ctx, 4*time.Minute)
	defer cancel()
	const keep = "16MB"
	if err := rig.cluster.Exec(ctx, `ALTER SYSTEM SET max_slot_wal_keep_size = '`+keep+`'`); err != nil {
		return Result{}, err
	}
	if err := rig.cluster.Exec(ctx, `SELECT pg_reload_conf()`); err != nil {
		return Result{}, err
	}
	var status string
	var checkpointMax time.Duration
	for round := 0; round < 5 && status != "lost"; round++ {
		// 1.5 kB payloads: about 30 MB of WAL a round.
		if err := insertEvents(cctx, conn, 20000, 1500); err != nil {
			return Result{}, err
		}
		total += 20000
		if _, err := conn.Exec(cctx, `SELECT pg_switch_wal()`); err != nil {
			return Result{}, err
		}
		t0 := time.Now()
		if _, err := conn.Exec(cctx, `CHECKPOINT`); err != nil {
			return Result{}, fmt.Errorf("CHECKPOINT with the consumer frozen, after %.1f s: %w", time.Since(t0).Seconds(), err)
		}
		took := time.Since(t0)
		checkpointMax = max(checkpointMax, took)
		var active bool
		if _, status, active, err = readSlot(); err != nil {
			return Result{}, err
		}
		rig.logf("max_slot_wal_keep_size=%s, %d events written, CHECKPOINT in %.2f s: wal_status %q, walsender active %v", keep, total, took.Seconds(), status, active)
	}
	res.Metrics["events_written"] = float64(total)
	res.Metrics["checkpoint_max_s"] = checkpointMax.Seconds()
	res.Metrics["checkpoint_bound_s"] = checkpointBound.Seconds()
	res.Metrics["walsender_active_at_bound"] = b2f(activeAtBound)
	if status != "lost" {
		return Result{}, fmt.Errorf("the slot was not invalidated after %d events with max_slot_wal_keep_size=%s (wal_status %q)", total, keep, status)
	}

	// Thaw the service: its stream is gone; /readyz must say why.
	thaw()
	var readyCode int
	var readyBody string
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		code, b, err := driver.Do(ctx, http.MethodGet, base+"/readyz", nil)
		if err == nil {
			readyCode, readyBody = code, strings.TrimSpace(string(b))
			if code != http.StatusOK && strings.Contains(readyBody, "lost") {
				break
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	rig.logf("/readyz after the invalidation: %d %s", readyCode, readyBody)
	readyOK := readyCode == http.StatusServiceUnavailable && strings.Contains(readyBody, "pg_drop_replication_slot")

	// The documented recovery: drop the slot, restart the service.
	if err := rig.stop(svc); err != nil {
		return Result{}, err
	}
	if _, err := conn.Exec(ctx, `SELECT pg_drop_replication_slot($1)`, slot); err != nil {
		return Result{}, err
	}
	t0 := time.Now()
	if _, err := rig.start(ctx, svc, extra); err != nil {
		return Result{}, err
	}
	recoverTime := time.Since(t0)
	var undelivered, delivered int64
	if err := conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE d.id IS NULL), count(d.id) FROM log.messages m LEFT JOIN log.deliveries d ON d.id = m.id`).Scan(&undelivered, &delivered); err != nil {
		return Result{}, err
	}
	rig.logf("after drop + restart: %d of %d events delivered, %d undelivered (start %.2f s)", delivered, total, undelivered, recoverTime.Seconds())

	res.AckedLost = undelivered
	if int64(total) > delivered+undelivered {
		res.AckedLost += int64(total) - delivered - undelivered
	}
	res.Metrics["events_delivered"] = float64(delivered)
	res.Metrics["events_lost"] = float64(res.AckedLost)
	res.Metrics["recovery_start_s"] = recoverTime.Seconds()
	res.Metrics["readyz_code"] = float64(readyCode)
	if readyOK {
		res.Metrics["readyz_names_recovery"] = 1
	} else {
		res.Metrics["readyz_names_recovery"] = 0
	}
	res.Figure = fmt.Sprintf("Consumer frozen: the slot retained %s (about %.0f bytes of WAL per event). With max_slot_wal_keep_size=%s and %d events written, the consumer still frozen, CHECKPOINT: wal_status lost, the slowest CHECKPOINT took %.1f s (bound %.0f s); /readyz answered %d. Drop + restart resynced from messages in %.2f s: %d of %d events delivered, %d lost.",
		strings.Join(points, ", "), perEvent(res.Metrics, steps), keep, total, checkpointMax.Seconds(), checkpointBound.Seconds(), readyCode, recoverTime.Seconds(), delivered, total, res.AckedLost)
	res.Notes = crashNotes(rig.cluster,
		"the consumer is frozen with SIGSTOP, so that it confirms nothing (a stopped service gives the same retention); events are written straight into log.messages, 100-byte payloads for the retention points and 1.5 kB ones to pass the bound",
		fmt.Sprintf("the stack's settings: wal_sender_timeout at its default (60 s), %s; no-kafka asks its walsender for the same TCP settings; its walsender was %s when the bound was set", tcpSettingsText(), map[bool]string{true: "still active", false: "already gone"}[activeAtBound]),
		"/readyz after the invalidation: "+clipErr(fmt.Sprintf("%d %s", readyCode, readyBody)))
	if checkpointMax > checkpointBound {
		res.Notes = append(res.Notes, fmt.Sprintf("FINDING: a CHECKPOINT with the consumer frozen took %.1f s, past its bound of %.0f s", checkpointMax.Seconds(), checkpointBound.Seconds()))
	}
	if !readyOK {
		res.Notes = append(res.Notes, "FINDING: /readyz did not answer 503 naming pg_drop_replication_slot after the slot was invalidated")
	}
	res.DurationS = time.Since(began).Seconds()
	return res, nil
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
func perEvent(m map[string]float64, steps []int) float64 {
	first, last := steps[0], steps[len(steps)-1]
	if last == first {
		return 0
	}
	return (m[fmt.Sprintf("retained_bytes_at_%d", last)] - m[fmt.Sprintf("retained_bytes_at_%d", first)]) / float64(last-first)
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
