package log

import (
	"encoding/json"
	"time"
)

// MaxBatch is the most events POST /events/batch accepts.
const MaxBatch = 1000

// NewEvent is the body of POST /events and one element of a batch. The
// handler validates it and gives it an id before the Backend sees it.
type NewEvent struct {
	// ID is assigned by the handler (a UUIDv7); clients may not send it.
	ID string `json:"-"`
	// Type names the event, e.g. "order.created". Required.
	Type string `json:"type"`
	// Key orders events: events with the same key are delivered in the
	// order they were written. Required.
	Key string `json:"key"`
	// Payload is a JSON object; absent means {}.
	Payload json.RawMessage `json:"payload,omitempty"`
}

// Batch is the body of POST /events/batch.
type Batch struct {
	// Events holds 1 to MaxBatch events, written in one transaction.
	Events []NewEvent `json:"events"`
}

// Created is the answer to POST /events, and one element of a batch's.
type Created struct {
	// ID is the event's id (a UUID).
	ID string `json:"id"`
	// CreatedAt is when Postgres inserted the row.
	CreatedAt time.Time `json:"created_at"`
}

// BatchCreated is the answer to POST /events/batch, in request order.
type BatchCreated struct {
	// Events are the created events, in the order of the request.
	Events []Created `json:"events"`
}

// Event is the answer to GET /events/{id} and GET /events/{id}/wait.
type Event struct {
	// ID is the event's id.
	ID string `json:"id"`
	// Type is the event's type.
	Type string `json:"type"`
	// Key is the event's ordering key.
	Key string `json:"key"`
	// Payload is the event's JSON object.
	Payload json.RawMessage `json:"payload"`
	// CreatedAt is when Postgres inserted the row.
	CreatedAt time.Time `json:"created_at"`
	// DeliveredAt is when the consumer first observed the event; null
	// until then.
	DeliveredAt *time.Time `json:"delivered_at"`
	// DeliveryMS is DeliveredAt minus CreatedAt in milliseconds; null
	// until delivered.
	DeliveryMS *float64 `json:"delivery_ms"`
	// DeliverySeq is the position at which the consumer observed the
	// event among all the events it observed (increasing); null until
	// delivered.
	DeliverySeq *int64 `json:"delivery_seq"`
}

// ConsumerStatus is the answer to GET /consumer.
type ConsumerStatus struct {
	// Backend is "kafka" or "postgres".
	Backend string `json:"backend"`
	// Running is true while the consumer is connected and streaming.
	Running bool `json:"running"`
	// Position is where the consumer has confirmed it is: the committed
	// offsets summed over partitions on Kafka, the slot's
	// confirmed_flush_lsn on Postgres.
	Position string `json:"position"`
	// Lag is how far behind the consumer is, in LagUnit.
	Lag int64 `json:"lag"`
	// LagUnit is "records" (Kafka) or "bytes" (WAL).
	LagUnit string `json:"lag_unit"`
	// Delivered counts events this process's consumer observed for the
	// first time; Duplicates counts redeliveries it absorbed.
	Delivered int64 `json:"delivered"`
	// Duplicates counts redelivered events absorbed by id.
	Duplicates int64 `json:"duplicates"`
	// Reconnects counts how often the consumer lost its connection and
	// reconnected.
	Reconnects int64 `json:"reconnects"`
	// Slot describes the replication slot (no-kafka only).
	Slot *SlotStatus `json:"slot,omitempty"`
	// Kafka describes the topic and group (kafka only).
	Kafka *KafkaStatus `json:"kafka,omitempty"`
}

// SlotStatus is a replication slot as pg_replication_slots shows it.
type SlotStatus struct {
	// Name is the slot's name.
	Name string `json:"name"`
	// Plugin is the output plugin (wal2json or pgoutput).
	Plugin string `json:"plugin"`
	// Active is true while a walsender streams the slot.
	Active bool `json:"active"`
	// ActivePID is the walsender's backend pid, or 0.
	ActivePID int64 `json:"active_pid"`
	// RestartLSN is the oldest WAL the slot needs.
	RestartLSN string `json:"restart_lsn"`
	// ConfirmedFlushLSN is what the consumer confirmed.
	ConfirmedFlushLSN string `json:"confirmed_flush_lsn"`
	// RetainedWALBytes is pg_wal_lsn_diff(pg_current_wal_lsn(),
	// restart_lsn): the WAL Postgres keeps for this slot.
	RetainedWALBytes int64 `json:"retained_wal_bytes"`
	// WALStatus is reserved, extended, unreserved or lost (a lost slot
	// must be dropped and recreated; its events are gone).
	WALStatus string `json:"wal_status"`
	// SafeWALSize is the WAL that can still be written before the slot is
	// lost, or null when max_slot_wal_keep_size is -1 (unbounded).
	SafeWALSize *int64 `json:"safe_wal_size"`
}

// KafkaStatus is the consumer group's view of its topic.
type KafkaStatus struct {
	// Topic is the topic consumed.
	Topic string `json:"topic"`
	// Group is the consumer group id.
	Group string `json:"group"`
	// Partitions lists each partition's committed and end offsets.
	Partitions []PartitionStatus `json:"partitions"`
}

// PartitionStatus is one partition's committed and end offsets.
type PartitionStatus struct {
	// Partition is the partition number.
	Partition int `json:"partition"`
	// Committed is the group's committed offset (-1: none yet).
	Committed int64 `json:"committed"`
	// End is the partition's high-water mark.
	End int64 `json:"end"`
}

// Delivery is one event as a consumer observed it.
type Delivery struct {
	// ID is the event's id.
	ID string
	// CreatedAt is the event's created_at, the start of its delivery
	// latency.
	CreatedAt time.Time
}

// Stats names shared by both services' /stats.
const (
	// StatWrite is the POST handler time histogram.
	StatWrite = "write"
	// StatDelivery is the created_at → consumer observed histogram.
	StatDelivery = "delivery"
	// StatWritten counts events written.
	StatWritten = "written"
	// StatDelivered counts events observed for the first time.
	StatDelivered = "delivered"
	// StatDuplicates counts redeliveries absorbed by id.
	StatDuplicates = "duplicates"
	// StatReconnects counts consumer reconnections.
	StatReconnects = "reconnects"
	// StatGroupDelivered and StatGroupDuplicates are StatDelivered and
	// StatDuplicates summed over the groups other than the default one
	// (whose figures are the ones above); they appear once a group
	// delivers.
	StatGroupDelivered, StatGroupDuplicates = "group_delivered", "group_duplicates"
)

// Latencies and Counters are the names to pass to service.New.
var (
	Latencies = []string{StatWrite, StatDelivery}
	Counters  = []string{StatWritten, StatDelivered, StatDuplicates, StatReconnects}
)
