package experiments

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"
)

// noisyNeighbourSlot is issue 14's item 10: WAL written into an unrelated
// table while no-kafka is stopped, then the time from no-kafka's start
// until a new event is delivered, and the slot's lag at that start: the
// walsender decodes every record of the cluster's WAL since the slot's
// position, the unrelated ones too, before it reaches the new event.
func noisyNeighbourSlot() Experiment {
	return Experiment{Name: "noisy-neighbour-slot", Run: runNoisyNeighbour}
}

func runNoisyNeighbour(ctx context.Context, env Env, size Size) (Result, error) {
	began := time.Now()
	amounts := []int64{0, 20 << 20}
	if size == Full {
		amounts = []int64{0, 100 << 20, 1 << 30}
	}
	const svc, slot = "no-kafka", "exp_noisy"
	// max_wal_size: 1 GB of WAL written between two checkpoints must not
	// force checkpoints all the time (the slot retains it anyway).
	rig, err := newCrashRig(ctx, env, map[string]string{"max_wal_size": "'4GB'"})
	if err != nil {
		return Result{}, err
	}
	defer rig.Close()
	extra := map[string]string{"SLOT_NAME": slot}
	conn, err := pgx.Connect(ctx, rig.cluster.URL())
	if err != nil {
		return Result{}, err
	}
	defer func() { conn.Close(context.Background()) }()
	if _, err := conn.Exec(ctx, `CREATE TABLE public.noise (id bigserial PRIMARY KEY, pad text NOT NULL)`); err != nil {
		return Result{}, err
	}
	res := Result{
		Name:     "noisy-neighbour-slot",
		Title:    "A slot decodes the whole cluster's WAL (noisy neighbour)",
		Happens:  "A logical slot's walsender decodes every WAL record written since the slot's position, those of unrelated tables too (wal2json's add-tables filters after decoding): WAL written by other work while no-kafka is away delays the first new event by the time it takes to decode it all.",
		UserMust: "Keep the consumer running (a slot that keeps up decodes the neighbour's WAL as it is written); put the log in a database of its own (decoding skips other databases' records early); watch the slot's lag in bytes (GET /consumer), not only in events.",
		Metrics:  map[string]float64{},
	}
	var figs []string
	var undelivered int64
	for _, amount := range amounts {
		// Start once to create the slot (and on later rounds, to be
		// caught up), then stop: the consumer is away.
		if _, err := rig.start(ctx, svc, extra); err != nil {
			return Result{}, err
		}
		time.Sleep(500 * time.Millisecond)
		if err := rig.stop(svc); err != nil {
			return Result{}, err
		}
		var startLSN string
		if err := conn.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&startLSN); err != nil {
			return Result{}, err
		}
		var written int64
		for written < amount {
			// About 11 MB of WAL per statement: md5 text does not
			// compress below the TOAST threshold.
			if _, err := conn.Exec(ctx, `INSERT INTO public.noise (pad) SELECT repeat(md5(g::text || random()::text), 30) FROM generate_series(1, 10000) g`); err != nil {
				return Result{}, err
			}
			if err := conn.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::bigint`, startLSN).Scan(&written); err != nil {
				return Result{}, err
			}
		}
		if _, err := conn.Exec(ctx, `TRUNCATE public.noise`); err != nil {
			return Result{}, err
		}
		// The new event is written after the noise, before the start:
		// the walsender reaches it only once it has decoded the noise.
		var id string
		if err := conn.QueryRow(ctx, `INSERT INTO log.messages (id, type, key) VALUES (gen_random_uuid(), 'exp.noisy', 'k') RETURNING id::text`).Scan(&id); err != nil {
			return Result{}, err
		}
		var lag int64
		if err := conn.QueryRow(ctx, `SELECT coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn), 0)::bigint FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&lag); err != nil {
			return Result{}, err
		}
		t0 := time.Now()
		base, err := rig.start(ctx, svc, extra)
		if err != nil {
			return Result{}, err
		}
		delivered := false
		for time.Since(t0) < 3*time.Minute && !delivered {
			code, _, err := driver.Do(ctx, http.MethodGet, base+"/events/"+id+"/wait?timeout=10s", nil)
			if err != nil {
				return Result{}, err
			}
			delivered = code == http.StatusOK
		}
		wait := time.Since(t0)
		if !delivered {
			undelivered++
		}
		mb := float64(written) / 1e6
		key := fmt.Sprintf("%dmb", amount>>20)
		res.Metrics["unrelated_wal_bytes_"+key] = float64(written)
		res.Metrics["lag_bytes_"+key] = float64(lag)
		res.Metrics["first_event_s_"+key] = wait.Seconds()
		figs = append(figs, fmt.Sprintf("%.0f MB of unrelated WAL (slot lag %.0f MB) → the event written after it delivered %.2f s after no-kafka's start", mb, float64(lag)/1e6, wait.Seconds()))
		rig.logf("%s", figs[len(figs)-1])
		if err := rig.stop(svc); err != nil {
			return Result{}, err
		}
	}
	res.AckedLost = undelivered
	res.Figure = "no-kafka stopped while another table's writes filled the WAL, one event written, no-kafka started: " + strings.Join(figs, "; ") + "."
	res.Notes = crashNotes(rig.cluster,
		"the unrelated WAL is rows of about 1 kB in public.noise, in the same database as the log, 10,000 rows a transaction: WAL of many small transactions (a queue's) decodes at another rate, not measured here; the lag is pg_current_wal_lsn() - confirmed_flush_lsn before no-kafka starts; the time runs from launching the process (the 0 MB round is the start's own cost)",
		"AckedLost counts events not delivered within 3 minutes")
	res.DurationS = time.Since(began).Seconds()
	return res, nil
}
