package main

import (
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/log/conformance"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/kittest"
)

// pgoutput messages as the protocol lays them out (PostgreSQL's docs,
// "Logical Replication Message Formats", protocol version 1).

func relationMsg(id uint32, schema, table string, cols ...string) []byte {
	b := binary.BigEndian.AppendUint32([]byte{'R'}, id)
	b = append(append(b, schema...), 0)
	b = append(append(b, table...), 0)
	b = append(b, 'd')
	b = binary.BigEndian.AppendUint16(b, uint16(len(cols)))
	for _, c := range cols {
		b = append(b, 0)
		b = append(append(b, c...), 0)
		b = binary.BigEndian.AppendUint32(b, 25) // the type is not read
		b = binary.BigEndian.AppendUint32(b, 0xffffffff)
	}
	return b
}

// insertMsg is an Insert of text values; "" is NULL.
func insertMsg(id uint32, values ...string) []byte {
	b := binary.BigEndian.AppendUint32([]byte{'I'}, id)
	b = append(b, 'N')
	b = binary.BigEndian.AppendUint16(b, uint16(len(values)))
	for _, v := range values {
		if v == "" {
			b = append(b, 'n')
			continue
		}
		b = append(b, 't')
		b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
		b = append(b, v...)
	}
	return b
}

// TestPgoutputDecoder: an Insert into the schema's messages table is the
// event its relation's columns say (by name, in the relation's order);
// one into another table is no event; one into a relation the stream did
// not describe is an error (the stream restarts); Begin and Commit are
// their letters.
func TestPgoutputDecoder(t *testing.T) {
	t.Parallel()
	var cfg Config
	cfg.Postgres.Schema, cfg.Slot, cfg.SlotPlugin = "log", "no_kafka", PluginPgoutput
	d := newDecoder(cfg)
	if opts := strings.Join(d.options(), " "); !strings.Contains(opts, `"publication_names" 'no_kafka'`) || !strings.Contains(opts, `"proto_version" '1'`) {
		t.Errorf("options: %s", opts)
	}
	const id = "01890000-0000-7000-8000-000000000001"
	for _, m := range [][]byte{relationMsg(7, "log", "messages", "id", "type", "key", "payload", "created_at"), relationMsg(8, "other", "messages", "id", "created_at")} {
		if c, err := d.decode(m, 1); err != nil || c.action != "R" {
			t.Fatalf("relation: %+v %v", c, err)
		}
	}
	c, err := d.decode(insertMsg(7, id, "t", "k", `{"a": 1}`, "2026-12-03 07:30:01.123456+00"), 2)
	want := time.Date(2026, 12, 3, 7, 30, 1, 123456000, time.UTC)
	if err != nil || c.action != "I" || c.event.ID != id || !c.event.CreatedAt.Equal(want) {
		t.Errorf("insert into log.messages: %+v %v, want event %s at %s", c, err, id, want)
	}
	if c, err := d.decode(insertMsg(8, id, "2026-12-03 07:30:01+00"), 3); err != nil || c.event.ID != "" {
		t.Errorf("insert into other.messages: %+v %v, want no event", c, err)
	}
	if _, err := d.decode(insertMsg(9, id), 4); err == nil {
		t.Errorf("insert into an undescribed relation: no error")
	}
	if _, err := d.decode(insertMsg(7, id, "t")[:20], 4); err == nil {
		t.Errorf("a truncated insert: no error")
	}
	for _, letter := range []byte{'B', 'C'} {
		if c, err := d.decode([]byte{letter, 0, 0}, 5); err != nil || c.action != string(letter) {
			t.Errorf("%c: %+v %v", letter, c, err)
		}
	}
}

// TestSlotOfAnotherPluginIsRefused: a slot's plugin is fixed at its
// creation, so a start whose SLOT_PLUGIN is not the existing slot's, or
// not that of one of its groups' slots, fails naming SLOT_PLUGIN and the
// plugin the slot has, and creates nothing.
func TestSlotOfAnotherPluginIsRefused(t *testing.T) {
	t.Parallel()
	url := kittest.PostgresURL(t)
	pool := kittest.Pool(t, url, kittest.Schema(t, url))
	ctx := kittest.Context(t, time.Minute)
	slot, base := kittest.UniqueName(t, "s"), kittest.UniqueName(t, "b")
	group := groupSlot(base, "g")
	for _, s := range []string{slot, group} {
		kittest.Exec(t, pool, `SELECT pg_create_logical_replication_slot($1, $2)`, s, testPlugin())
		t.Cleanup(func() { dropSlot(t, url, s) })
	}
	for _, s := range []string{slot, base} {
		cfg := kittest.ReadConfig(t, readConfig, map[string]string{"DATABASE_URL": url, "SLOT_NAME": s, "SLOT_PLUGIN": otherPlugin()})
		_, err := ensureSlot(ctx, cfg, pool, kittest.Logger(cfg))
		if err == nil || !strings.Contains(err.Error(), "SLOT_PLUGIN") || !strings.Contains(err.Error(), testPlugin()) {
			t.Errorf("start with SLOT_NAME=%s SLOT_PLUGIN=%s: %v, want an error naming SLOT_PLUGIN and %s", s, otherPlugin(), err, testPlugin())
		}
	}
	if n := kittest.Count(t, pool, `SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1`, base); n != 0 {
		t.Errorf("the refused start created slot %s", base)
		dropSlot(t, url, base)
	}
}

// TestPgoutputPublication: with pgoutput the start makes the publication
// of the schema's messages table, inserts only (so the consumer's own
// deliveries and the cleaner's deletes never reach the stream), a restart
// reuses it, and a publication of the name that publishes another
// schema's table is refused naming SLOT_NAME.
func TestPgoutputPublication(t *testing.T) {
	t.Parallel()
	tg := newTarget(t, map[string]string{"SLOT_PLUGIN": PluginPgoutput})
	conformance.PostDelivered(t, tg.URL(), ev("p"))
	tg.Restart(t)
	conformance.PostDelivered(t, tg.URL(), ev("p"))
	pool := kittest.Pool(t, tg.Env["DATABASE_URL"], tg.Env["DATABASE_SCHEMA"])
	pub := tg.Env["SLOT_NAME"]
	if n := kittest.Count(t, pool, `SELECT count(*) FROM pg_publication WHERE pubname = $1
		AND pubinsert AND NOT pubupdate AND NOT pubdelete AND NOT pubtruncate AND NOT puballtables`, pub); n != 1 {
		t.Errorf("publication %s: not one that publishes inserts only", pub)
	}
	var tables string
	if err := pool.QueryRow(kittest.Context(t, 10*time.Second), `SELECT string_agg(schemaname || '.' || tablename, ',') FROM pg_publication_tables WHERE pubname = $1`,
		pub).Scan(&tables); err != nil || tables != tg.Env["DATABASE_SCHEMA"]+".messages" {
		t.Errorf("publication %s publishes %q (%v), want %s.messages alone", pub, tables, err, tg.Env["DATABASE_SCHEMA"])
	}
	other := kittest.Pool(t, tg.Env["DATABASE_URL"], kittest.Schema(t, tg.Env["DATABASE_URL"]))
	cfg := kittest.ReadConfig(t, readConfig, map[string]string{"SLOT_NAME": pub, "SLOT_PLUGIN": PluginPgoutput})
	if err := ensurePublication(kittest.Context(t, 10*time.Second), cfg, other); err == nil || !strings.Contains(err.Error(), "SLOT_NAME") {
		t.Errorf("publication %s from another schema: %v, want an error naming SLOT_NAME", pub, err)
	}
}
