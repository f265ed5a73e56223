package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	logc "github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/log"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/postgres"
)

// The logical decoding output plugins a slot can decode with
// (SLOT_PLUGIN). PostgreSQL's docs, "Logical Decoding Output Plugins":
// the plugin turns the WAL into the stream a slot sends; it is chosen when
// the slot is created and fixed for the slot's life.
const (
	// PluginWal2json is wal2json (format-version 2, one JSON object per
	// change), an extension: Debian packages it for 15, the stack's
	// server has it, PostgreSQL 18.4 from npm does not.
	PluginWal2json = "wal2json"
	// PluginPgoutput is pgoutput, built into every PostgreSQL since 10:
	// the binary protocol of PostgreSQL's own logical replication, what
	// Debezium and Sequin decode. It sends only the tables of a
	// publication (publicationOf).
	PluginPgoutput = "pgoutput"
)

// change is one decoded XLogData payload: its action, as the plugins
// both name them (B begin, C commit, I insert, ...), and for an insert
// into the messages table the event it delivers.
type change struct {
	action string
	event  logc.Delivery
}

// decoder reads one output plugin's stream for the consumer. A consumer
// makes a new one per stream (newDecoder): pgoutput's carries what the
// stream told it about relations. The reader goroutine alone uses it.
type decoder interface {
	// options are START_REPLICATION's plugin arguments.
	options() []string
	// decode decodes one XLogData payload (at lsn, for errors).
	decode(wal []byte, lsn pglogrepl.LSN) (change, error)
}

// newDecoder returns a decoder of cfg's plugin for the messages table of
// cfg's schema.
func newDecoder(cfg Config) decoder {
	schema := cfg.Postgres.Schema
	if schema == "" {
		schema = "public"
	}
	if cfg.SlotPlugin == PluginPgoutput {
		return &pgoutputDecoder{publication: publicationOf(cfg), schema: schema, relations: map[uint32]*pglogrepl.RelationMessage{}}
	}
	return wal2jsonDecoder{table: tableFilter(schema)}
}

// eventOf is the event of an insert into messages, from its id and
// created_at columns in text form (both plugins print values with the
// type's output function, timestamptz in the session's time zone, UTC).
// A created_at that does not parse is now: it only feeds the delivery
// latency.
func eventOf(id, createdAt string) logc.Delivery {
	e := logc.Delivery{ID: id}
	if at, err := time.Parse(pgTimestamp, createdAt); err == nil {
		e.CreatedAt = at
	} else {
		e.CreatedAt = time.Now()
	}
	return e
}

// pgTimestamp is how Postgres prints a timestamptz in a UTC session with
// DateStyle ISO.
const pgTimestamp = "2006-01-02 15:04:05.999999-07"

// walMessage is wal2json format-version 2: one JSON object per change,
// plus B and C for each transaction.
type walMessage struct {
	Action  string `json:"action"`
	Schema  string `json:"schema"`
	Table   string `json:"table"`
	Columns []struct {
		Name  string          `json:"name"`
		Value json.RawMessage `json:"value"`
	} `json:"columns"`
}

// wal2jsonDecoder decodes wal2json format-version 2.
type wal2jsonDecoder struct {
	table string // schema.messages, the add-tables filter (tableFilter)
}

func (d wal2jsonDecoder) options() []string {
	return []string{
		`"format-version" '2'`,
		// Only the messages table of this service's schema: the consumer's
		// own writes (deliveries) and every other table stay out of the
		// stream, so nothing loops back.
		`"add-tables" '` + d.table + `'`,
		`"actions" 'insert'`,
		`"include-transaction" 'true'`,
		`"include-types" 'false'`,
	}
}

func (d wal2jsonDecoder) decode(wal []byte, lsn pglogrepl.LSN) (change, error) {
	var m walMessage
	if err := json.Unmarshal(wal, &m); err != nil {
		return change{}, fmt.Errorf("decode wal2json at %s: %w", lsn, err)
	}
	c := change{action: m.Action}
	if m.Action == "I" && m.Table == "messages" {
		var id, at string
		for _, col := range m.Columns {
			switch col.Name {
			case "id":
				_ = json.Unmarshal(col.Value, &id)
			case "created_at":
				_ = json.Unmarshal(col.Value, &at)
			}
		}
		c.event = eventOf(id, at)
	}
	return c, nil
}

// pgoutputDecoder decodes pgoutput's protocol version 1 (pglogrepl): a
// Relation message describes a table (its columns, in order) before the
// stream's first change to it, and each Insert carries the relation's id
// and the new row's columns in that order, as text ('t'; binary only if
// asked, NULL 'n'). Text is each type's output format: a uuid as
// 8-4-4-4-12 hex, a timestamptz as pgTimestamp, a jsonb as its canonical
// JSON text, a bytea as \x and hex. Only id and created_at are read.
type pgoutputDecoder struct {
	publication string
	schema      string
	relations   map[uint32]*pglogrepl.RelationMessage
}

func (d *pgoutputDecoder) options() []string {
	return []string{
		// Version 1 has all this needs: no streaming of transactions in
		// progress (a large transaction arrives whole, at its commit, as
		// with wal2json), no two-phase.
		`"proto_version" '1'`,
		`"publication_names" '` + d.publication + `'`,
	}
}

func (d *pgoutputDecoder) decode(wal []byte, lsn pglogrepl.LSN) (c change, err error) {
	// pglogrepl indexes past the end of a truncated message instead of
	// failing: an error (the stream restarts), not a crash of the service.
	defer func() {
		if r := recover(); r != nil {
			c, err = change{}, fmt.Errorf("decode pgoutput at %s: malformed message: %v", lsn, r)
		}
	}()
	if len(wal) == 0 {
		return change{}, fmt.Errorf("decode pgoutput at %s: empty message", lsn)
	}
	c = change{action: string(wal[0])}
	switch pglogrepl.MessageType(wal[0]) {
	case pglogrepl.MessageTypeRelation, pglogrepl.MessageTypeInsert:
	default:
		// Begin and Commit need no more than their letter (the LSN is
		// the XLogData's); the rest (Origin, Type, ...) is not used.
		return c, nil
	}
	m, err := pglogrepl.Parse(wal)
	if err != nil {
		return change{}, fmt.Errorf("decode pgoutput at %s: %w", lsn, err)
	}
	switch m := m.(type) {
	case *pglogrepl.RelationMessage:
		d.relations[m.RelationID] = m
	case *pglogrepl.InsertMessage:
		rel, ok := d.relations[m.RelationID]
		if !ok {
			return change{}, fmt.Errorf("decode pgoutput at %s: insert into relation %d, which the stream did not describe", lsn, m.RelationID)
		}
		if rel.Namespace != d.schema || rel.RelationName != "messages" {
			// Another table of the publication (someone added one): not
			// an event of this service.
			c.action = ""
			return c, nil
		}
		var id, at string
		for i, col := range rel.Columns {
			if i >= len(m.Tuple.Columns) || m.Tuple.Columns[i].DataType != pglogrepl.TupleDataTypeText {
				continue
			}
			switch col.Name {
			case "id":
				id = string(m.Tuple.Columns[i].Data)
			case "created_at":
				at = string(m.Tuple.Columns[i].Data)
			}
		}
		c.event = eventOf(id, at)
	}
	return c, nil
}

// publicationOf is the publication pgoutput streams: named as the slot
// (SLOT_NAME; publications and slots are named apart, and SLOT_NAME is
// already unique per service), shared by the groups' slots, which read the
// same table.
func publicationOf(cfg Config) string { return cfg.Slot }

// ensurePublication creates the publication of the schema's messages
// table, inserts only, if it is missing; pgoutput sends nothing else. It
// is made here, not in the migrations: those are shared with kafka, which
// decodes nothing, a publication is an object of the whole database (named
// per service, not per schema), and only SLOT_PLUGIN=pgoutput needs one.
// It must exist before the slot: pgoutput reads publications as of the
// WAL it decodes, so WAL written before the publication existed fails to
// decode ("publication ... does not exist"). An existing one must publish
// the table's inserts.
func ensurePublication(ctx context.Context, cfg Config, pool *pgxpool.Pool) error {
	pub := publicationOf(cfg)
	has := func() (bool, error) {
		var publishes bool
		err := pool.QueryRow(ctx, `SELECT pubinsert AND EXISTS (SELECT 1 FROM pg_publication_tables t
			WHERE t.pubname = p.pubname AND t.schemaname = current_schema() AND t.tablename = 'messages')
			FROM pg_publication p WHERE pubname = $1`, pub).Scan(&publishes)
		if errors.Is(err, pgx.ErrNoRows) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("read publication %s: %w", pub, err)
		}
		if !publishes {
			return false, fmt.Errorf("SLOT_NAME: publication %s exists but does not publish the inserts of %s.messages (made for another schema?): "+
				"choose another SLOT_NAME, or drop it (DROP PUBLICATION %s) with its slots", pub, cfg.Postgres.Schema, pub)
		}
		return true, nil
	}
	if ok, err := has(); ok || err != nil {
		return err
	}
	_, err := pool.Exec(ctx, `CREATE PUBLICATION `+pgx.Identifier{pub}.Sanitize()+` FOR TABLE messages WITH (publish = 'insert')`)
	switch postgres.SQLSTATE(err) {
	case "":
		return nil
	case pgerrcode.DuplicateObject, pgerrcode.UniqueViolation: // made meanwhile by another instance
		_, err := has()
		return err
	default:
		return fmt.Errorf("create publication %s for pgoutput (SLOT_PLUGIN): %w", pub, err)
	}
}

// checkGroupPlugins refuses group slots of this service made with
// another plugin than SLOT_PLUGIN (the slot's own is checked by
// ensureSlot): their consumers would fail at START_REPLICATION forever.
func checkGroupPlugins(ctx context.Context, cfg Config, pool *pgxpool.Pool) error {
	rows, err := pool.Query(ctx, `SELECT slot_name::text, coalesce(plugin, '') FROM pg_replication_slots
		WHERE database = current_database() AND slot_name LIKE '%\_g\_%' AND plugin IS DISTINCT FROM $1`, cfg.SlotPlugin)
	if err != nil {
		return fmt.Errorf("read group slots: %w", err)
	}
	type slot struct{ name, plugin string }
	slots, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (s slot, err error) { return s, r.Scan(&s.name, &s.plugin) })
	if err != nil {
		return fmt.Errorf("read group slots: %w", err)
	}
	var bad []string
	for _, s := range slots {
		if g, ours := groupOfSlot(cfg.Slot, s.name); ours {
			bad = append(bad, fmt.Sprintf("group %s's slot %s (%s)", g, s.name, s.plugin))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("SLOT_PLUGIN is %s, but these group slots were made with another plugin (a slot's plugin is fixed): %s; "+
			"set SLOT_PLUGIN back, or delete those groups first", cfg.SlotPlugin, strings.Join(bad, ", "))
	}
	return nil
}
