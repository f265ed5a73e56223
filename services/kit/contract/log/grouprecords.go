package log

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/httpapi"
	"github.com/where-postgres-ends/where-postgres-ends/services/kit/postgres"
)

// The groups table (migration 0004) is the registry of groups both
// services share: a group's name, where it started and whether its
// replay is done. The default group's row is the migration's.

// CreateGroup registers a group (ready only if from is latest and ready
// is true) unless one of the name exists: created false when it exists
// with the same from, ErrGroupConflict when with another, TooManyGroups
// when maxGroups exist. One transaction holding the groups table's lock,
// so concurrent creations never pass the bound.
func (s *Records) CreateGroup(ctx context.Context, name, from string, ready bool, maxGroups int) (created bool, err error) {
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `LOCK TABLE groups IN SHARE ROW EXCLUSIVE MODE`); err != nil {
			return err
		}
		var have string
		err := tx.QueryRow(ctx, `SELECT from_position FROM groups WHERE name = $1`, name).Scan(&have)
		switch {
		case err == nil && have == from:
			return nil
		case err == nil:
			return ErrGroupConflict
		case !errors.Is(err, pgx.ErrNoRows):
			return err
		}
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM groups`).Scan(&n); err != nil {
			return err
		}
		if n >= maxGroups {
			return TooManyGroups(name, maxGroups)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO groups (name, from_position, ready) VALUES ($1, $2, $3)`, name, from, ready); err != nil {
			return err
		}
		created = true
		return nil
	})
	var he *httpapi.Error
	if errors.Is(err, ErrGroupConflict) || errors.As(err, &he) {
		return false, err
	}
	if err != nil {
		return false, postgres.MapError("create group", err)
	}
	return created, nil
}

// GroupRows lists the groups table by name.
func (s *Records) GroupRows(ctx context.Context) ([]GroupRow, error) {
	rows, err := s.pool.Query(ctx, `SELECT name, from_position, ready, created_at FROM groups ORDER BY name`)
	if err != nil {
		return nil, postgres.MapError("read groups", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (GroupRow, error) {
		var g GroupRow
		return g, r.Scan(&g.Name, &g.From, &g.Ready, &g.CreatedAt)
	})
	if err != nil {
		return nil, postgres.MapError("read groups", err)
	}
	return out, nil
}

// GroupRow returns one group's row, or an error wrapping
// httpapi.ErrNotFound.
func (s *Records) GroupRow(ctx context.Context, name string) (GroupRow, error) {
	g := GroupRow{Name: name}
	err := s.pool.QueryRow(ctx, `SELECT from_position, ready, created_at FROM groups WHERE name = $1`, name).Scan(&g.From, &g.Ready, &g.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return GroupRow{}, UnknownGroup(name)
	}
	if err != nil {
		return GroupRow{}, postgres.MapError("read group", err)
	}
	return g, nil
}

// MarkGroupReady records that the group's replay is done.
func (s *Records) MarkGroupReady(ctx context.Context, name string) error {
	tag, err := s.pool.Exec(ctx, `UPDATE groups SET ready = true WHERE name = $1`, name)
	if err != nil {
		return postgres.MapError("mark group ready", err)
	}
	if tag.RowsAffected() == 0 {
		return UnknownGroup(name)
	}
	return nil
}

// groupDeleteBatch is how many group_deliveries rows one statement of
// DeleteGroupRow removes.
const groupDeleteBatch = 10000

// DeleteGroupRow removes a (non-default) group's row, then its
// group_deliveries rows in batches; an unknown group wraps
// httpapi.ErrNotFound. Once the row is gone no instance starts the
// group's consumer again; the caller releases what the group held on its
// side (a slot, a Kafka group).
func (s *Records) DeleteGroupRow(ctx context.Context, name string) error {
	if name == DefaultGroup {
		return DefaultGroupKept
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM groups WHERE name = $1`, name)
	if err != nil {
		return postgres.MapError("delete group", err)
	}
	if tag.RowsAffected() == 0 {
		return UnknownGroup(name)
	}
	for {
		tag, err := s.pool.Exec(ctx, `DELETE FROM group_deliveries WHERE ctid = ANY(ARRAY(
			SELECT ctid FROM group_deliveries WHERE grp = $1 LIMIT $2))`, name, groupDeleteBatch)
		if err != nil {
			return postgres.MapError("delete group deliveries", err)
		}
		if tag.RowsAffected() < groupDeleteBatch {
			return nil
		}
	}
}

// getInSQL reads one event and its delivery to a group, and whether the
// group exists (a row even when the event does not).
const getInSQL = `
SELECT g.name IS NOT NULL, m.id IS NOT NULL, coalesce(m.id::text, ''), coalesce(m.type, ''), coalesce(m.key, ''),
       m.payload, coalesce(m.created_at, 'epoch'), d.delivered_at, d.seq
FROM (SELECT $2::text AS name) q
LEFT JOIN groups g ON g.name = q.name
LEFT JOIN messages m ON m.id = $1
LEFT JOIN group_deliveries d ON d.grp = q.name AND d.id = m.id`

var _ GroupEventReader = (*Records)(nil)

// GetIn returns the event with its delivery to group (GroupEventReader).
func (s *Records) GetIn(ctx context.Context, group, id string) (Event, error) {
	var e Event
	var groupExists, found bool
	var payload []byte
	err := s.pool.QueryRow(ctx, getInSQL, id, group).Scan(&groupExists, &found, &e.ID, &e.Type, &e.Key, &payload, &e.CreatedAt, &e.DeliveredAt, &e.DeliverySeq)
	if err != nil {
		return Event{}, postgres.MapError("read event", err)
	}
	if !groupExists {
		return Event{}, UnknownGroup(group)
	}
	if !found {
		return Event{}, fmt.Errorf("event %s: %w", id, httpapi.ErrNotFound)
	}
	e.Payload = payload
	if e.DeliveredAt != nil {
		ms := float64(e.DeliveredAt.Sub(e.CreatedAt).Microseconds()) / 1000
		e.DeliveryMS = &ms
	}
	return e, nil
}

// ForGroup returns the DeliveryRecorder of a group: s itself for the
// default group (the deliveries table), else one that records in
// group_deliveries.
func (s *Records) ForGroup(group string) DeliveryRecorder {
	if group == "" || group == DefaultGroup {
		return s
	}
	return groupRecorder{q: s.pool, group: group}
}

// GroupRecorderIn returns the DeliveryRecorder of a non-default group that
// records through q, typically a transaction that the caller commits after
// more writes (no-kafka's cursor groups move their cursor in it). Its
// Deliver returns before that commit: wrap it in a DeliveryRecorder that
// commits before returning, since a Deliverer wakes the waiters as soon
// as its Records return.
func GroupRecorderIn(q Querier, group string) DeliveryRecorder {
	return groupRecorder{q: q, group: group}
}

// groupRecorder records a non-default group's deliveries.
type groupRecorder struct {
	q     Querier
	group string
}

// groupDeliverSQL is deliverSQL for one group.
const groupDeliverSQL = `
INSERT INTO group_deliveries (grp, id, delivered_at)
SELECT $3, u.id, $2 FROM unnest($1::uuid[]) WITH ORDINALITY AS u(id, n)
ORDER BY u.n
ON CONFLICT (grp, id) DO NOTHING
RETURNING id::text`

// Deliver records the batch as the group's (DeliveryRecorder).
func (g groupRecorder) Deliver(ctx context.Context, batch []Delivery, at time.Time) (map[string]bool, error) {
	return deliverBatch(ctx, g.q, groupDeliverSQL, batch, at, g.group)
}
