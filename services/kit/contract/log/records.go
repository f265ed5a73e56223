package log

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/postgres"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/stats"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/waiter"
)

// SynchronousCommits are the accepted values of SYNCHRONOUS_COMMIT.
var SynchronousCommits = []string{"on", "off", "local", "remote_write", "remote_apply"}

// Defaults and limits of the settings both services of the pair read.
const (
	// DefaultSynchronousCommit is SYNCHRONOUS_COMMIT's default.
	DefaultSynchronousCommit = "on"
	// DefaultMaxBatch is CONSUMER_MAX_BATCH's default; MaxMaxBatch its
	// largest accepted value.
	DefaultMaxBatch, MaxMaxBatch = 5000, 100000
)

// Records are the Postgres tables both services share whatever transports
// their events: the messages table (the events) and the deliveries table
// (what the consumer observed). Safe for concurrent use; it does not own
// the pool.
type Records struct {
	pool *pgxpool.Pool
	// syncCommit is applied with SET LOCAL to every write transaction.
	syncCommit string
}

// NewRecords returns Records over pool whose writes commit with the given
// synchronous_commit ("on", "off", ...; empty means the server's setting).
func NewRecords(pool *pgxpool.Pool, synchronousCommit string) *Records {
	return &Records{pool: pool, syncCommit: synchronousCommit}
}

// Pool returns the pool the records are read and written through.
func (s *Records) Pool() *pgxpool.Pool { return s.pool }

// insertSQL inserts a batch in request order (WITH ORDINALITY + ORDER BY,
// so rows get ascending created_at and WAL positions in that order, which
// is what per-key ordering rests on) and returns each row's created_at.
const insertSQL = `
INSERT INTO messages (id, type, key, payload)
SELECT u.id, u.type, u.key, u.payload
FROM unnest($1::uuid[], $2::text[], $3::text[], $4::jsonb[]) WITH ORDINALITY AS u(id, type, key, payload, n)
ORDER BY u.n
RETURNING id::text, created_at`

// Insert writes the events in one transaction and returns them with their
// created_at, in order. ctx bounds the whole transaction.
//
// It is one round trip: the statements go as one pgx batch, a pipeline
// closed by a single Sync, which Postgres runs as one implicit transaction
// (BEGIN and COMMIT would each cost a round trip more, and under CPU
// contention every round trip waits for the scheduler). set_config(...,
// true) is local to that implicit transaction, so synchronous_commit
// applies to this commit only and never leaks to the pooled connection.
func (s *Records) Insert(ctx context.Context, events []NewEvent) ([]Created, error) {
	out, err := s.insert(ctx, events)
	if err != nil {
		return nil, postgres.MapError("insert events", err)
	}
	return out, nil
}

// insert is Insert's batch: the events as insertSQL's four columns.
func (s *Records) insert(ctx context.Context, events []NewEvent) (out []Created, err error) {
	ids := make([]string, len(events))
	types := make([]string, len(events))
	keys := make([]string, len(events))
	payloads := make([]string, len(events))
	for i, e := range events {
		ids[i], types[i], keys[i], payloads[i] = e.ID, e.Type, e.Key, string(e.Payload)
	}
	b := &pgx.Batch{}
	if s.syncCommit != "" {
		// is_local: only this (implicit) transaction's commit is affected.
		b.Queue("SELECT set_config('synchronous_commit', $1, true)", s.syncCommit)
	}
	b.Queue(insertSQL, postgres.UUIDs(ids), types, keys, payloads)
	br := s.pool.SendBatch(ctx, b)
	defer func() {
		// Close reads what is left of the pipeline, up to the Sync that
		// commits (or rolls back) the transaction: its error is the
		// commit's.
		if cerr := br.Close(); err == nil && cerr != nil {
			out, err = nil, cerr
		}
	}()
	if s.syncCommit != "" {
		if _, err := br.Exec(); err != nil {
			return nil, err
		}
	}
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	byID := make(map[string]time.Time, len(events))
	for rows.Next() {
		var id string
		var at time.Time
		if err := rows.Scan(&id, &at); err != nil {
			rows.Close()
			return nil, err
		}
		byID[id] = at
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out = make([]Created, len(events))
	for i, e := range events {
		out[i] = Created{ID: e.ID, CreatedAt: byID[e.ID]}
	}
	return out, nil
}

// getSQL reads one event and, once the consumer saw it, its delivery.
const getSQL = `
SELECT m.id::text, m.type, m.key, m.payload, m.created_at, d.delivered_at, d.seq
FROM messages m LEFT JOIN deliveries d ON d.id = m.id
WHERE m.id = $1`

// Get returns the event with the id, or an error wrapping
// httpapi.ErrNotFound.
func (s *Records) Get(ctx context.Context, id string) (Event, error) {
	var e Event
	var payload []byte
	err := s.pool.QueryRow(ctx, getSQL, id).Scan(&e.ID, &e.Type, &e.Key, &payload, &e.CreatedAt, &e.DeliveredAt, &e.DeliverySeq)
	if errors.Is(err, pgx.ErrNoRows) {
		return Event{}, fmt.Errorf("event %s: %w", id, httpapi.ErrNotFound)
	}
	if err != nil {
		return Event{}, postgres.MapError("read event", err)
	}
	e.Payload = payload
	if e.DeliveredAt != nil {
		ms := float64(e.DeliveredAt.Sub(e.CreatedAt).Microseconds()) / 1000
		e.DeliveryMS = &ms
	}
	return e, nil
}

var _ DeliveredReader = (*Records)(nil)

// Delivered returns those of ids that the consumer has delivered, in one
// query: the shared re-read of every GET /events/{id}/wait of a service
// (DeliveredReader).
func (s *Records) Delivered(ctx context.Context, ids []string) ([]string, error) {
	return postgres.QueryStrings(ctx, s.pool, "read deliveries", `SELECT id::text FROM deliveries WHERE id = ANY($1::uuid[])`, postgres.UUIDs(ids))
}

// deliverSQL records a consumer batch in arrival order. ON CONFLICT DO
// NOTHING is the dedup: a redelivered id (at-least-once) inserts nothing,
// and RETURNING names only the first-time deliveries.
const deliverSQL = `
INSERT INTO deliveries (id, delivered_at)
SELECT u.id, $2 FROM unnest($1::uuid[]) WITH ORDINALITY AS u(id, n)
ORDER BY u.n
ON CONFLICT (id) DO NOTHING
RETURNING id::text`

// Deliver records that the consumer observed the batch at time at, and
// returns the ids observed for the first time (the others are duplicates).
// It commits before returning, so a consumer may confirm its position
// afterwards.
func (s *Records) Deliver(ctx context.Context, batch []Delivery, at time.Time) (map[string]bool, error) {
	return deliverBatch(ctx, s.pool, deliverSQL, batch, at)
}

// deliverBatch runs a deliver statement (deliverSQL, groupDeliverSQL:
// $1 the batch's ids, then args: $2 the time, then the statement's own)
// and returns the ids it recorded for the first time.
func deliverBatch(ctx context.Context, q Querier, sql string, batch []Delivery, args ...any) (map[string]bool, error) {
	ids := make([]string, len(batch))
	for i, d := range batch {
		ids[i] = d.ID
	}
	rows, err := q.Query(ctx, sql, append([]any{postgres.UUIDs(ids)}, args...)...)
	if err != nil {
		return nil, err
	}
	fresh := make(map[string]bool, len(batch))
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, err
		}
		fresh[id] = true
	}
	rows.Close()
	return fresh, rows.Err()
}

// Querier runs a query: a *pgxpool.Pool, or a pgx.Tx whose owner commits
// the deliveries together with more (a group cursor's move).
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// DeliveryRecorder records that a consumer observed a batch at a time and
// returns the ids observed for the first time, durably, before the
// consumer confirms its position. *Records is the one both services use.
type DeliveryRecorder interface {
	Deliver(ctx context.Context, batch []Delivery, at time.Time) (map[string]bool, error)
}

// Deliverer is what a consumer calls with each batch it reads: it records
// the deliveries (dedup by id), counts delivered and duplicates, observes
// the delivery latency and wakes waiters. Safe for concurrent use.
type Deliverer struct {
	// Records records the deliveries: the services' *Records, or another
	// DeliveryRecorder (the memory package's).
	Records DeliveryRecorder
	Hub     *waiter.Hub
	Stats   *stats.Recorder
	// Timeout bounds each Deliver call's database round trip.
	Timeout time.Duration
	// Group is the group whose deliveries these are ("" or DefaultGroup:
	// the default group): it names the waiters woken (WaitKey).
	Group string
}

// Deliver handles one batch, in the order read. When it returns nil the
// batch is durably recorded and the consumer may confirm its position; on
// an error the consumer must not confirm and should retry the batch.
func (d *Deliverer) Deliver(ctx context.Context, batch []Delivery) error {
	if len(batch) == 0 {
		return nil
	}
	now := time.Now()
	timeout := d.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	fresh, err := d.Records.Deliver(ctx, batch, now)
	if err != nil {
		return fmt.Errorf("record deliveries: %w", err)
	}
	delivered, duplicates := StatDelivered, StatDuplicates
	if d.Group == "" || d.Group == DefaultGroup {
		for _, e := range batch {
			if fresh[e.ID] {
				d.Stats.Observe(StatDelivery, now.Sub(e.CreatedAt))
			}
		}
	} else {
		// The default group's figures stay its own, as before groups.
		delivered, duplicates = StatGroupDelivered, StatGroupDuplicates
	}
	d.Stats.Add(delivered, int64(len(fresh)))
	if dup := len(batch) - len(fresh); dup > 0 {
		d.Stats.Add(duplicates, int64(dup))
	}
	d.Hub.Wake(keys(d.Group, fresh)...)
	return nil
}

// keys returns the wait keys of a set of ids delivered to group.
func keys(group string, set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, WaitKey(group, k))
	}
	return out
}
