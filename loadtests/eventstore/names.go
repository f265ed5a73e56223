package eventstore

import "github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"

// The scenarios of the bench's results files: the append points (one
// scenario per mode, AppendScenarioName), the point read and the
// catch-up.
const (
	// appendPrefix starts the append points' scenarios, before the mode.
	appendPrefix = "eventstore.append."
	// PointReadPoint reads one stream, whole, on every engine.
	PointReadPoint driver.ScenarioName = "eventstore.point-read"
	// CatchUpPoint replays a stream to a new subscriber while live
	// events arrive.
	CatchUpPoint driver.ScenarioName = "eventstore.catch-up"
)

// AppendScenarioName is the scenario of the append points of the mode
// named mode: "eventstore.append.<mode>".
func AppendScenarioName(mode string) driver.ScenarioName {
	return driver.ScenarioName(appendPrefix + mode)
}

// CausalPoint is the scenario of the causal experiment's points: one per
// read stream and size step, named by causalPointName.
const CausalPoint driver.ScenarioName = "eventstore.causal"

// Point scenarios of the long-stream results file, one point per stream
// size (named SizeName(n)).
const (
	// LongFillPoint writes the stream through the service (batches of up
	// to MaxAppend events) and a snapshot every SnapshotEvery events.
	LongFillPoint driver.ScenarioName = "eventstore.long.fill"
	// LongFoldPoint reads the whole stream through the service's paged
	// read and folds every event in the bench.
	LongFoldPoint driver.ScenarioName = "eventstore.long.fold"
	// LongStatePoint asks the service to fold it (GET
	// /streams/{stream}/state, capped at 100,000 events by the contract).
	LongStatePoint driver.ScenarioName = "eventstore.long.state"
	// LongSnapshotPoint folds from the stream's latest snapshot: the last
	// event of <stream>-snapshot, then the events after its version.
	LongSnapshotPoint driver.ScenarioName = "eventstore.long.snapshot"
)

// Point scenarios of the cleanup results file.
const (
	// CleanupPGPoint deletes one stream's rows from the Postgres side's
	// events table in batches, with appends and a live subscriber running.
	CleanupPGPoint driver.ScenarioName = "eventstore.cleanup.postgres"
	// CleanupKafkaPoint is one Kafka cleanup policy (point name
	// KafkaRetention or KafkaCompaction) on a topic of its own holding
	// the same stream.
	CleanupKafkaPoint driver.ScenarioName = "eventstore.cleanup.kafka"
)

// The append points' metrics, beside the client's (driver.FlattenClient).
const (
	// MetricAppendOps counts every append completed, in the window or
	// late.
	MetricAppendOps driver.Metric = "ops"
	// MetricAppendLate counts the appends completed after the window.
	MetricAppendLate driver.Metric = "late"
	// MetricAppendInFlight counts the appends abandoned at the grace
	// bound (counted nowhere else).
	MetricAppendInFlight driver.Metric = "in_flight"
	// MetricAppendConflicts counts the appends refused for a wrong
	// expected version (409).
	MetricAppendConflicts driver.Metric = "conflicts"
	// MetricAppendErrors counts the appends failed otherwise.
	MetricAppendErrors driver.Metric = "errors"
	// MetricAppendSeconds is the point's measured duration.
	MetricAppendSeconds driver.Metric = "seconds"
	// MetricAppendOpsPerSec is the appends completed per second.
	MetricAppendOpsPerSec driver.Metric = "ops_per_sec"
	// MetricAppendConflictsPerOp is the conflicts' share of the attempts.
	MetricAppendConflictsPerOp driver.Metric = "conflicts_per_op"
	// MetricEventsPerStreamAtEnd is the mean length of a few of the
	// point's streams at its end.
	MetricEventsPerStreamAtEnd driver.Metric = "events_per_stream_at_end"
)

// The metrics of a read of a whole stream: the point read, the causal
// experiment's reads and the long stream's loads.
const (
	// MetricReadMS is the read's time, in milliseconds.
	MetricReadMS driver.Metric = "read_ms"
	// MetricMatched is the events the read returned.
	MetricMatched driver.Metric = "matched"
	// MetricRecordsScanned is the records the engine reports it scanned
	// (Kafka's records_scanned), summed over the read's requests.
	MetricRecordsScanned driver.Metric = "records_scanned"
	// MetricStoreRecords is the records the store held when the causal
	// experiment read.
	MetricStoreRecords driver.Metric = "store_records"
	// MetricRowsTouched and MetricSharedBuffers are the Postgres read's
	// plan's rows and shared buffers (EXPLAIN ANALYZE).
	MetricRowsTouched   driver.Metric = "rows_touched"
	MetricSharedBuffers driver.Metric = "shared_buffers"
)

// The catch-up point's metrics, in milliseconds.
const (
	// MetricCatchUpMS is the subscriber's time to replay the stream.
	MetricCatchUpMS driver.Metric = "catch_up_ms"
	// MetricLiveP50 and MetricLiveMax are the delivery latency of live
	// events appended once a subscriber has caught up.
	MetricLiveP50 driver.Metric = "live_" + driver.SuffixP50
	MetricLiveMax driver.Metric = "live_" + driver.SuffixMax
)

// The long stream's fill point's metrics.
const (
	// MetricEvents is the stream's length.
	MetricEvents driver.Metric = "events"
	// MetricFillSeconds is the time to write the stream (also the
	// cleanup's fill).
	MetricFillSeconds driver.Metric = "fill_s"
	// MetricEventAppends and MetricEventAppendSeconds are the event
	// appends (requests) and their total time.
	MetricEventAppends       driver.Metric = "event_appends"
	MetricEventAppendSeconds driver.Metric = "event_append_s"
	// MetricSnapshots and MetricSnapshotAppendSeconds are the snapshot
	// appends and their total time.
	MetricSnapshots             driver.Metric = "snapshots"
	MetricSnapshotAppendSeconds driver.Metric = "snapshot_append_s"
	// MetricEventAppendMS and MetricSnapshotAppendMS are the mean event
	// and snapshot append.
	MetricEventAppendMS    driver.Metric = "event_append_ms"
	MetricSnapshotAppendMS driver.Metric = "snapshot_append_ms"
	// MetricSnapshotOverheadPct is what snapshots add to writing the
	// stream, in per cent of the events' own append time.
	MetricSnapshotOverheadPct driver.Metric = "snapshot_overhead_pct"
)

// The long stream's load points' metrics (with MetricReadMS and
// MetricRecordsScanned).
const (
	// MetricRequests is the load's requests to the service.
	MetricRequests driver.Metric = "requests"
	// MetricBytesRead is the bytes of the paged reads' answers.
	MetricBytesRead driver.Metric = "bytes_read"
	// MetricEventsFolded is the events the load folded.
	MetricEventsFolded driver.Metric = "events_folded"
	// MetricSnapshotVersion is the version of the snapshot loaded from.
	MetricSnapshotVersion driver.Metric = "snapshot_version"
	// MetricTailEvents is the events folded after the snapshot.
	MetricTailEvents driver.Metric = "tail_events"
	// MetricRecordsTouched is the Postgres events table's tuples the
	// load fetched (pg_stat_user_tables).
	MetricRecordsTouched driver.Metric = "records_touched"
)

// The long stream's loads' memory, in MB (memProbe).
const (
	// MetricServiceRSSBeforeMB, MetricServiceRSSAfterMB and
	// MetricServiceRSSPeakMB are the service's RSS before and after the
	// load and its peak.
	MetricServiceRSSBeforeMB driver.Metric = "service_rss_before_mb"
	MetricServiceRSSAfterMB  driver.Metric = "service_rss_after_mb"
	MetricServiceRSSPeakMB   driver.Metric = "service_rss_peak_mb"
	// MetricBenchAllocMB is the bench's bytes allocated during the load.
	MetricBenchAllocMB driver.Metric = "bench_alloc_mb"
	// MetricBenchRSSPeakMB is the bench's own peak RSS.
	MetricBenchRSSPeakMB driver.Metric = "bench_rss_peak_mb"
)

// The Postgres cleanup's metrics (with MetricFillSeconds).
const (
	// MetricDeleteSeconds and MetricVacuumSeconds are the batched DELETE's
	// and the VACUUM's time.
	MetricDeleteSeconds driver.Metric = "delete_s"
	MetricVacuumSeconds driver.Metric = "vacuum_s"
	// MetricEventsDeleted and MetricBatches are the rows deleted and the
	// DELETE statements.
	MetricEventsDeleted driver.Metric = "events_deleted"
	MetricBatches       driver.Metric = "batches"
	// MetricDeleteWALMB and MetricVacuumWALMB are the WAL the DELETE and
	// the VACUUM wrote.
	MetricDeleteWALMB driver.Metric = "delete_wal_mb"
	MetricVacuumWALMB driver.Metric = "vacuum_wal_mb"
	// MetricSizeBeforeMB, MetricSizeAfterDeleteMB and
	// MetricSizeAfterVacuumMB are the events table's size before, after
	// the DELETE and after the VACUUM.
	MetricSizeBeforeMB      driver.Metric = "size_before_mb"
	MetricSizeAfterDeleteMB driver.Metric = "size_after_delete_mb"
	MetricSizeAfterVacuumMB driver.Metric = "size_after_vacuum_mb"
	// MetricReturnedMB is the space the table gave back.
	MetricReturnedMB driver.Metric = "returned_mb"
	// MetricLiveSent, MetricLiveReceived and MetricLiveFailed are the
	// live load's appends sent, received by its subscriber, and failed.
	MetricLiveSent     driver.Metric = "live_sent"
	MetricLiveReceived driver.Metric = "live_received"
	MetricLiveFailed   driver.Metric = "live_failed"
)

// The cleanup point's live-load metrics, per phase (CleanupMetric).
const (
	AppendOf  = "append_"
	DeliverOf = "deliver_"
	// CleanupCount is CleanupMetric's what for the appends completed.
	CleanupCount = "n"
)

// CleanupMetric is the live load's figure of phase ph during a cleanup:
// kind (AppendOf, DeliverOf), the phase, "_", what (driver.SuffixP50,
// CleanupCount): "append_during_p99_ms".
func CleanupMetric(kind, ph, what string) driver.Metric {
	return driver.Metric(kind + ph + "_" + what)
}

// The Kafka cleanup's metrics, per policy (with MetricFillSeconds).
const (
	// MetricRetentionCheckIntervalS is the broker's
	// log.retention.check.interval.ms, in seconds.
	MetricRetentionCheckIntervalS driver.Metric = "retention_check_interval_s"
	// MetricCustomerBefore and MetricOthersBefore are the customer's and
	// the other streams' events a reader saw before the policy;
	// MetricCustomerAfter, MetricOthersAfter and MetricTombstonesAfter
	// what it saw at the end.
	MetricCustomerBefore  driver.Metric = "customer_before"
	MetricOthersBefore    driver.Metric = "others_before"
	MetricCustomerAfter   driver.Metric = "customer_after"
	MetricOthersAfter     driver.Metric = "others_after"
	MetricTombstonesAfter driver.Metric = "tombstones_after"
	// MetricDirMBBefore and MetricDirMBAfter are the partition's
	// directory's size.
	MetricDirMBBefore driver.Metric = "dir_mb_before"
	MetricDirMBAfter  driver.Metric = "dir_mb_after"
	// MetricLogStartAfter is the partition's first offset at the end.
	MetricLogStartAfter driver.Metric = "log_start_after"
	// MetricPartialViews counts the reads that saw part of the
	// customer's stream.
	MetricPartialViews driver.Metric = "partial_views"
	// MetricWaitedSeconds is the time watched after the policy applied.
	MetricWaitedSeconds driver.Metric = "waited_s"
	// MetricFirstChangeSeconds is when a reader first saw a change.
	MetricFirstChangeSeconds driver.Metric = "first_change_s"
	// MetricSpaceReturnedSeconds is when the directory was down to half.
	MetricSpaceReturnedSeconds driver.Metric = "space_returned_s"
)
