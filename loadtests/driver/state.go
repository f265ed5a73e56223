package driver

// Start modes of StartState.Mode.
const (
	// StateFresh: the pair's tables were truncated before the run.
	StateFresh = "fresh"
	// StateKeep: the run started on whatever history the tables held.
	StateKeep = "keep"
	// StateLongLived: the tables were truncated, then filled with a
	// generated history and churn (StartState.HistoryRows per table).
	StateLongLived = "long-lived"
)

// StartState is what the pair's Postgres tables held when a run began:
// the results declare their starting state, so that a reader can tell a
// fresh-table figure from one measured on months of history.
type StartState struct {
	// Mode is StateFresh, StateKeep or StateLongLived.
	Mode string `json:"mode"`
	// HistoryRows is the generated history per table (finished tasks,
	// delivered events) of a long-lived run; 0 otherwise.
	HistoryRows int64 `json:"history_rows,omitempty"`
	// Tables are the pair's tables, schema by schema, as read just before
	// the first attack (after truncating or building the history).
	Tables []TableState `json:"tables"`
	// Error says why the tables could not be read or prepared.
	Error string `json:"error,omitempty"`
}

// TableState is one table's size at the start of a run.
type TableState struct {
	// Schema and Table name the table ("queue", "tasks").
	Schema string `json:"schema"`
	Table  string `json:"table"`
	// Rows is count(*) at the start.
	Rows int64 `json:"rows"`
	// TotalBytes is pg_total_relation_size: heap, indexes and TOAST.
	TotalBytes int64 `json:"total_bytes"`
	// DeadTuples is pg_stat_user_tables.n_dead_tup: rows deleted or
	// updated away and not yet vacuumed.
	DeadTuples int64 `json:"dead_tuples"`
}
