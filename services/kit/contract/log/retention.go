package log

import (
	"context"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/cleaner"
)

// DefaultEventRetention is EVENT_RETENTION's default: how long an event
// stays readable after the consumer observed it.
const DefaultEventRetention = 24 * time.Hour

// deleteDeliveredSQL removes up to $2 events the consumer observed more
// than $1 microseconds ago (the default group's consumer) and that every
// other group due to receive them (any group from earliest, a group from
// latest created before the event) has received, oldest delivery first, through the index
// deliveries_delivered_at (migration 0003). An event without a deliveries
// row was never delivered and is never picked, whatever its age. Its
// deliveries row stays (see deleteDedupSQL), so a redelivery in between is
// still a duplicate.
const deleteDeliveredSQL = `
DELETE FROM messages
 WHERE id = ANY(ARRAY(
        SELECT d.id FROM deliveries d
         WHERE d.delivered_at < now() - $1 * interval '1 microsecond'
           AND EXISTS (SELECT 1 FROM messages m WHERE m.id = d.id)
           AND NOT EXISTS (SELECT 1 FROM groups g JOIN messages m ON m.id = d.id
                 WHERE g.name <> 'default'
                   AND (g.from_position = 'earliest' OR g.created_at <= m.created_at)
                   AND NOT EXISTS (SELECT 1 FROM group_deliveries gd WHERE gd.grp = g.name AND gd.id = d.id))
         ORDER BY d.delivered_at
         LIMIT $2))`

// deleteDedupSQL removes up to $2 deliveries rows older than the retention
// whose event is gone: the dedup record of events the cleaner already
// removed (or of events redelivered after their removal, which the
// consumer records again as new). Rows of events still present are left
// for deleteDeliveredSQL, so GET /events/{id} never shows a delivered
// event as undelivered.
const deleteDedupSQL = `
DELETE FROM deliveries
 WHERE id = ANY(ARRAY(
        SELECT d.id FROM deliveries d
         WHERE d.delivered_at < now() - $1 * interval '1 microsecond'
           AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.id = d.id)
         ORDER BY d.delivered_at
         LIMIT $2))`

// deleteGroupDedupSQL is deleteDedupSQL for the other groups'
// group_deliveries rows.
const deleteGroupDedupSQL = `
DELETE FROM group_deliveries
 WHERE ctid = ANY(ARRAY(
        SELECT d.ctid FROM group_deliveries d
         WHERE d.delivered_at < now() - $1 * interval '1 microsecond'
           AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.id = d.id)
         ORDER BY d.delivered_at
         LIMIT $2))`

// CleanerJobs are the cleaner's jobs over the pair's records, in the
// order a pass must run them: the events first, then their dedup rows
// (counted in /stats as retention_removed_messages and
// retention_removed_deliveries, which counts the dedup rows of every
// group).
func (s *Records) CleanerJobs() []cleaner.Job {
	return []cleaner.Job{
		cleaner.SQLJob("messages", s.pool, deleteDeliveredSQL),
		{Name: "deliveries", Delete: func(ctx context.Context, olderThan time.Duration, limit int) (int64, error) {
			// The dedup rows of every group: the default group's, then
			// the others'; a batch is short only when both are.
			tag, err := s.pool.Exec(ctx, deleteDedupSQL, olderThan.Microseconds(), limit)
			if err != nil {
				return 0, err
			}
			gtag, err := s.pool.Exec(ctx, deleteGroupDedupSQL, olderThan.Microseconds(), limit)
			return tag.RowsAffected() + gtag.RowsAffected(), err
		}},
	}
}
