// The business records the areas check: Records, read through a target
// that implements it (the memory backend's), or the tasks and payments
// tables read through DB.

package conformance

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/contract/queue"
)

// TaskRecord is one row of the tasks records: the task as GET
// /tasks/{id} shows it, and its payload.
type TaskRecord struct {
	queue.Task
	Payload json.RawMessage
}

// PaymentRecord is one row of the payments records.
type PaymentRecord struct {
	ID     string
	TaskID string
	Amount int64
}

// Records is what the suite reads of a target's business records. Both
// services keep them in Postgres and the suite reads them through DB; a
// target without Postgres (the memory package's) implements Records and
// the suite reads them through it instead, never calling DB.
type Records interface {
	// Tasks returns every task record.
	Tasks(t testing.TB) []TaskRecord
	// Payments returns every payment record.
	Payments(t testing.TB) []PaymentRecord
}

// records returns the target's Records, or a reader of the tables
// through DB.
func records(tg Target) Records {
	if r, ok := tg.(Records); ok {
		return r
	}
	return pgRecords{tg.DB()}
}

// pgRecords reads the task records (the view task_records: the tasks
// table, and the fanned-out copies no-rabbitmq's FANOUT_DESIGN=cursors
// keeps as one message row; migration 0008) and the payments table of
// migrations/queue.
type pgRecords struct{ db *pgxpool.Pool }

func (r pgRecords) Tasks(t testing.TB) []TaskRecord {
	t.Helper()
	return collect(t, r.db, "read tasks", `SELECT id::text, kind, status, attempts, enqueued_at, delivered_at, processed_at, last_error, payload FROM task_records`,
		func(row pgx.CollectableRow) (TaskRecord, error) {
			var tr TaskRecord
			err := row.Scan(&tr.ID, &tr.Kind, &tr.Status, &tr.Attempts, &tr.EnqueuedAt, &tr.DeliveredAt, &tr.ProcessedAt, &tr.LastError, &tr.Payload)
			return tr, err
		})
}

func (r pgRecords) Payments(t testing.TB) []PaymentRecord {
	t.Helper()
	return collect(t, r.db, "read payments", `SELECT id::text, task_id::text, amount FROM payments`, pgx.RowToStructByPos[PaymentRecord])
}

// collect runs sql on db within 30 seconds and returns its rows read by
// scan, failing t (what names the read) on any error.
func collect[T any](t testing.TB, db *pgxpool.Pool, what, sql string, scan pgx.RowToFunc[T]) []T {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := db.Query(ctx, sql)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	out, err := pgx.CollectRows(rows, scan)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return out
}
