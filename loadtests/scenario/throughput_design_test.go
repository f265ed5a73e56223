package scenario

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// TestEndDesignDropsItsSlotAndMovesThePairs, on the stack's Postgres: once
// a design's points are done, its slot and publication are gone (an idle
// slot would retain WAL on the shared server), and the pair's own slot,
// idle meanwhile, has moved past the WAL the design wrote (its next
// consumer would otherwise decode the design's events again).
func TestEndDesignDropsItsSlotAndMovesThePairs(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: needs the stack's Postgres (DATABASE_URL)")
	}
	t.Parallel()
	url := kittest.PostgresURL(t)
	pairSlot, designSlot := kittest.UniqueName(t, "slot"), kittest.UniqueName(t, "design")
	e := &Env{PostgresURL: url, ServiceEnv: map[string]map[string]string{LogPair.A.Name: {"SLOT_NAME": pairSlot}}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	// The cleanup closes conn after dropping: a deferred Close would run
	// first (defers before cleanups) and leave the slots retaining WAL.
	t.Cleanup(func() {
		for _, s := range []string{pairSlot, designSlot} {
			_, _ = conn.Exec(context.Background(), `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1`, s)
		}
		_, _ = conn.Exec(context.Background(), `DROP PUBLICATION IF EXISTS `+pgx.Identifier{designSlot}.Sanitize())
		_ = conn.Close(context.Background())
	})
	for _, q := range []string{
		`SELECT pg_create_logical_replication_slot('` + pairSlot + `', 'wal2json')`,
		`SELECT pg_create_logical_replication_slot('` + designSlot + `', 'pgoutput')`,
		`CREATE PUBLICATION ` + pgx.Identifier{designSlot}.Sanitize(),
		// WAL written while the pair's slot is idle: the design's.
		`SELECT pg_logical_emit_message(false, 'design', 'events')`,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	var before, written string
	if err := conn.QueryRow(ctx, `SELECT confirmed_flush_lsn::text, pg_current_wal_lsn()::text FROM pg_replication_slots WHERE slot_name = $1`, pairSlot).Scan(&before, &written); err != nil {
		t.Fatal(err)
	}
	if err := e.endDesign(ctx, LogPair, designSlot); err != nil {
		t.Fatal(err)
	}
	var slots, pubs int
	var moved bool
	if err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1), (SELECT count(*) FROM pg_publication WHERE pubname = $1),
		(SELECT confirmed_flush_lsn >= $3::pg_lsn FROM pg_replication_slots WHERE slot_name = $2)`, designSlot, pairSlot, written).Scan(&slots, &pubs, &moved); err != nil {
		t.Fatal(err)
	}
	if slots != 0 || pubs != 0 {
		t.Errorf("the design's slot (%d) or publication (%d) is still there", slots, pubs)
	}
	if !moved {
		t.Errorf("the pair's slot stayed at %s, behind the design's WAL at %s", before, written)
	}
}
