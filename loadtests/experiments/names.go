package experiments

import "github.com/where-postgres-ends/where-postgres-ends/loadtests/driver"

// SidePrefix starts the figures an experiment measured once for each of
// its sides, cases or modes, named at run time ("pg_", "kafka.",
// "quorum.confirm."): SidePrefix("pg_").Of(MetricAcked) is "pg_acked".
// The part after it is one of the constants below.
type SidePrefix string

// Of is the key of the side's figure m.
func (p SidePrefix) Of(m driver.Metric) driver.Metric { return driver.Metric(p) + m }

// MetricRetainedBytesAtOf is the slot-wal-retention's WAL retained by
// the frozen slot once n events were written: "retained_bytes_at_<n>".
const MetricRetainedBytesAtOf driver.MetricPrefix = "retained_bytes_at_"

// The figures of broker-restart (broker.go), each under its case's
// prefix ("quorum.confirm.accepted"); MetricRate is the load's rate.
const (
	Metric503NotRecorded          driver.Metric = "503_not_recorded"
	Metric503Shed                 driver.Metric = "503_shed"
	Metric503Unknown              driver.Metric = "503_unknown"
	Metric503WithoutKind          driver.Metric = "503_without_kind"
	MetricAccepted                driver.Metric = "accepted"
	MetricAcceptedWhileDown       driver.Metric = "accepted_while_down"
	MetricAckedLost               driver.Metric = "acked_lost"
	MetricDownSeconds             driver.Metric = "down_s"
	MetricFirstAcceptAfterSeconds driver.Metric = "first_accept_after_s"
	MetricMax503MS                driver.Metric = "max_503_ms"
	MetricOtherErrors             driver.Metric = "other_errors"
	MetricRate                    driver.Metric = "rate"
	MetricReadyAfterSeconds       driver.Metric = "ready_after_s"
	MetricRefused503              driver.Metric = "refused_503"
	MetricRelayed                 driver.Metric = "relayed"
	MetricRepublished             driver.Metric = "republished"
	MetricSlowestAnswerMS         driver.Metric = "slowest_answer_ms"
	MetricStranded                driver.Metric = "stranded"
	MetricUnexplainedRecords      driver.Metric = "unexplained_records"
	MetricUnknownRan              driver.Metric = "unknown_ran"
)

// The figures of the cache crash experiment (crash_cache.go): what the
// UNLOGGED cache tables and the key-value entries held before and after
// the crash, and the stale reads after it.
const (
	MetricCacheRowsAfterCrash driver.Metric = "cache_rows_after_crash"
	MetricCacheRowsBefore     driver.Metric = "cache_rows_before"
	MetricCacheRowsFilled     driver.Metric = "cache_rows_filled"
	MetricGenRowsAfterCrash   driver.Metric = "gen_rows_after_crash"
	MetricHitsAfterRefill     driver.Metric = "hits_after_refill"
	MetricKVGone              driver.Metric = "kv_gone"
	MetricKVKeys              driver.Metric = "kv_keys"
	MetricKVSurvived          driver.Metric = "kv_survived"
	MetricProductUpdatesLost  driver.Metric = "product_updates_lost"
	MetricProducts            driver.Metric = "products"
	MetricProductsOutOfBand   driver.Metric = "products_out_of_band"
	MetricProductsPut         driver.Metric = "products_put"
	MetricStaleAfterRestart   driver.Metric = "stale_after_restart"
	MetricStaleBeforeCrash    driver.Metric = "stale_before_crash"
	MetricStaleKV             driver.Metric = "stale_kv"
	MetricStaleProducts       driver.Metric = "stale_products"
)

// MetricMachineCpus is the machine's CPU count, beside every crash
// experiment's figures (crash_common.go).
const (
	MetricMachineCpus driver.Metric = "machine_cpus"
)

// The figures of noisy-neighbour-slot's consumer kept running
// (crash_noisy.go), under noisyRunningKey's prefix
// ("running_event_s").
const (
	MetricDecodeLagBytes        driver.Metric = "decode_lag_bytes"
	MetricEventSeconds          driver.Metric = "event_s"
	MetricUnrelatedTransactions driver.Metric = "unrelated_transactions"
	MetricUnrelatedWALBytes     driver.Metric = "unrelated_wal_bytes"
)

// The families of noisy-neighbour-slot's consumer-away rounds
// (crash_noisy.go), each named by its round ("first_event_s_64mb");
// MetricRawSecondsOf and MetricRawBytesReceivedOf follow a raw slot's
// name (noisyRawKey).
const (
	MetricRawBytesReceivedOf         driver.MetricPrefix = "bytes_received_"
	MetricFirstEventSecondsOf        driver.MetricPrefix = "first_event_s_"
	MetricLagBytesOf                 driver.MetricPrefix = "lag_bytes_"
	MetricOtherDBFirstEventSecondsOf driver.MetricPrefix = "other_db_first_event_s_"
	MetricOtherDBLagBytesOf          driver.MetricPrefix = "other_db_lag_bytes_"
	MetricRawSecondsOf               driver.MetricPrefix = "s_"
	MetricUnrelatedTransactionsOf    driver.MetricPrefix = "unrelated_transactions_"
	MetricUnrelatedWALBytesOf        driver.MetricPrefix = "unrelated_wal_bytes_"
)

// The figures of unlogged-queue-crash (crash_queue.go).
const (
	MetricDoneAfterRebuild    driver.Metric = "done_after_rebuild"
	MetricDrainSeconds        driver.Metric = "drain_s"
	MetricQueueRowsAfterCrash driver.Metric = "queue_rows_after_crash"
	MetricQueueRowsBefore     driver.Metric = "queue_rows_before"
	MetricQueueRowsRebuilt    driver.Metric = "queue_rows_rebuilt"
	MetricRebuildMS           driver.Metric = "rebuild_ms"
	MetricRecordsMissing      driver.Metric = "records_missing"
	MetricStartToReadySeconds driver.Metric = "start_to_ready_s"
	MetricTasks               driver.Metric = "tasks"
)

// The figures of postgres-restart (crash_restart.go), most under a
// side's restartPrefix ("no_kafka_recover_s"); the brokers' restart and
// failover experiments record the same under their cases' prefixes.
const (
	MetricAcked              driver.Metric = "acked"
	MetricBackendTimeoutMS   driver.Metric = "backend_timeout_ms"
	MetricFailed             driver.Metric = "failed"
	MetricFailedNot503       driver.Metric = "failed_not_503"
	MetricMaxFailedLatencyMS driver.Metric = "max_failed_latency_ms"
	MetricOutageSeconds      driver.Metric = "outage_s"
	MetricRatePerSide        driver.Metric = "rate_per_side"
	MetricRecoverSeconds     driver.Metric = "recover_s"
	MetricSent               driver.Metric = "sent"
)

// The figures of slot-wal-retention (crash_slot.go) besides
// MetricRetainedBytesAtOf.
const (
	MetricCheckpointBoundSeconds driver.Metric = "checkpoint_bound_s"
	MetricCheckpointMaxSeconds   driver.Metric = "checkpoint_max_s"
	MetricEventsDelivered        driver.Metric = "events_delivered"
	MetricEventsLost             driver.Metric = "events_lost"
	MetricEventsWritten          driver.Metric = "events_written"
	MetricReadyzCode             driver.Metric = "readyz_code"
	MetricReadyzNamesRecovery    driver.Metric = "readyz_names_recovery"
	MetricRecoveryStartSeconds   driver.Metric = "recovery_start_s"
	MetricWalsenderActiveAtBound driver.Metric = "walsender_active_at_bound"
)

// The figures of synchronous-commit-off-crash (crash_synccommit.go);
// MetricAcked, MetricAckedLost and MetricP50MS follow a setting's
// syncCommitPrefix ("off_acked").
const (
	MetricLoadSeconds driver.Metric = "load_s"
	MetricP50MS       driver.Metric = "p50_ms"
	MetricWriters     driver.Metric = "writers"
)

// The documents experiments' figures their card clauses read
// (documents_card.go): the aggregation report's queries under a
// reportSide ("pg_1m_average_p50_ms"), the change feed's under a
// feedRateKey, the expiring sessions' Postgres side ("pg_...").
const (
	MetricAverageP50MS                driver.Metric = "average_p50_ms"
	MetricAverageP99MS                driver.Metric = "average_p99_ms"
	MetricChangesLost                 driver.Metric = "changes_lost"
	MetricCountsP50MS                 driver.Metric = "counts_p50_ms"
	MetricGoldP50MS                   driver.Metric = "gold_p50_ms"
	MetricMongoAllRemovedAfterSeconds driver.Metric = "mongo_all_removed_after_s"
	MetricP99MS                       driver.Metric = "p99_ms"
	MetricPGAllRemovedAfterSeconds    driver.Metric = "pg_all_removed_after_s"
	MetricPGExpired                   driver.Metric = "pg_expired"
	MetricPGForegroundP99BaselineMS   driver.Metric = "pg_fg_p99_baseline_ms"
	MetricPGForegroundP99DuringMS     driver.Metric = "pg_fg_p99_during_ms"
	MetricPGFirstRemovedAfterSeconds  driver.Metric = "pg_first_removed_after_s"
	MetricPGIntervalSeconds           driver.Metric = "pg_interval_s"
	MetricPGPartitionDropSeconds      driver.Metric = "pg_partition_drop_s"
	MetricPGPartitionDropWALMB        driver.Metric = "pg_partition_drop_wal_mb"
	MetricPGResumeLost                driver.Metric = "pg_resume_lost"
	MetricPGRowsDeleteSeconds         driver.Metric = "pg_rows_delete_s"
	MetricPGRowsDeleteWALMB           driver.Metric = "pg_rows_delete_wal_mb"
)

// The figures of the documents change feed (documents_changes.go): per
// rate under a feedRateKey ("pg_r100_p99_ms"), the resume after a kill
// under a side ("pg_resume_lost").
const (
	MetricAchievedRate        driver.Metric = "achieved_rate"
	MetricDuplicates          driver.Metric = "duplicates"
	MetricFailedWrites        driver.Metric = "failed_writes"
	MetricMaxMS               driver.Metric = "max_ms"
	MetricNotSent             driver.Metric = "not_sent"
	MetricOfferedRate         driver.Metric = "offered_rate"
	MetricPGPollIntervalMS    driver.Metric = "pg_poll_interval_ms"
	MetricResumeAcked         driver.Metric = "resume_acked"
	MetricResumeAfterRestart  driver.Metric = "resume_after_restart"
	MetricResumeBeforeKill    driver.Metric = "resume_before_kill"
	MetricResumeDuplicates    driver.Metric = "resume_duplicates"
	MetricResumeFailedWrites  driver.Metric = "resume_failed_writes"
	MetricResumeLost          driver.Metric = "resume_lost"
	MetricResumeOutageSeconds driver.Metric = "resume_outage_s"
	MetricResumeRate          driver.Metric = "resume_rate"
	MetricWarmupWrites        driver.Metric = "warmup_writes"
	MetricWrites              driver.Metric = "writes"
)

// MetricPGPartitionRows is the rows of the expiring sessions' time
// partition (documents_partitions.go).
const (
	MetricPGPartitionRows driver.Metric = "pg_partition_rows"
)

// The figures of the documents aggregation report (documents_report.go)
// under a reportSide ("pg_1m_gin_mb"), and of each query
// ("pg_1m_counts_runs").
const (
	MetricExprBuildSeconds driver.Metric = "expr_build_s"
	MetricGINBuildSeconds  driver.Metric = "gin_build_s"
	MetricGINMB            driver.Metric = "gin_mb"
	MetricRuns             driver.Metric = "runs"
	MetricTableMB          driver.Metric = "table_mb"
)

// The figures of the documents expiring sessions (documents_sessions.go):
// the plan's, a side's ("pg_removal_s"), the foreground reads' per
// window (sessionWindow).
const (
	MetricForegroundMaxBaselineMS  driver.Metric = "fg_max_baseline_ms"
	MetricForegroundMaxDuringMS    driver.Metric = "fg_max_during_ms"
	MetricForegroundReadsBaseline  driver.Metric = "fg_reads_baseline"
	MetricAllRemovedAfterSeconds   driver.Metric = "all_removed_after_s"
	MetricBoundSeconds             driver.Metric = "bound_s"
	MetricExpireInSeconds          driver.Metric = "expire_in_s"
	MetricExpired                  driver.Metric = "expired"
	MetricForegroundErrors         driver.Metric = "fg_errors"
	MetricForegroundP50BaselineMS  driver.Metric = "fg_p50_baseline_ms"
	MetricForegroundP50DuringMS    driver.Metric = "fg_p50_during_ms"
	MetricForegroundP99BaselineMS  driver.Metric = "fg_p99_baseline_ms"
	MetricForegroundP99DuringMS    driver.Metric = "fg_p99_during_ms"
	MetricForegroundReads          driver.Metric = "fg_reads"
	MetricForegroundReadsDuring    driver.Metric = "fg_reads_during"
	MetricFinalReadErrors          driver.Metric = "final_read_errors"
	MetricFirstRemovedAfterSeconds driver.Metric = "first_removed_after_s"
	MetricInsertBatch              driver.Metric = "insert_batch"
	MetricLeftAtEnd                driver.Metric = "left_at_end"
	MetricLive                     driver.Metric = "live"
	MetricLiveLost                 driver.Metric = "live_lost"
	MetricMongoExpired             driver.Metric = "mongo_expired"
	MetricMongoLiveLost            driver.Metric = "mongo_live_lost"
	MetricMongoTTLMonitorSeconds   driver.Metric = "mongo_ttl_monitor_s"
	MetricPGBatch                  driver.Metric = "pg_batch"
	MetricPGGraceMS                driver.Metric = "pg_grace_ms"
	MetricPGLiveLost               driver.Metric = "pg_live_lost"
	MetricRemovalSeconds           driver.Metric = "removal_s"
)

// The figures of the event store restarts (eventstore_restart.go), under
// a case's prefix, and the load's timings shared with kafka-broker-restart.
const (
	Metric503AppendedAnyway    driver.Metric = "503_appended_anyway"
	MetricAckedNotDelivered    driver.Metric = "acked_not_delivered"
	MetricAfterSeconds         driver.Metric = "after_s"
	MetricBeforeSeconds        driver.Metric = "before_s"
	MetricDuplicated           driver.Metric = "duplicated"
	MetricDuplicatedInStream   driver.Metric = "duplicated_in_stream"
	MetricHoldSeconds          driver.Metric = "hold_s"
	MetricRedelivered          driver.Metric = "redelivered"
	MetricSubscriberReconnects driver.Metric = "subscriber_reconnects"
)

// MetricServerVersionNum is the server_version_num of the Postgres an
// experiment ran on (experiments.go).
const (
	MetricServerVersionNum driver.Metric = "server_version_num"
)

// The figures of the global-position gap experiment (gap.go): events
// a global-position cursor missed, against the watermark cursor.
const (
	MetricCatchUpBoundSeconds         driver.Metric = "catch_up_bound_s"
	MetricCommitted                   driver.Metric = "committed"
	MetricEventsPerWriter             driver.Metric = "events_per_writer"
	MetricGlobalPosCursorMissed       driver.Metric = "global_pos_cursor_missed"
	MetricGlobalPosCursorRunsWithLoss driver.Metric = "global_pos_cursor_runs_with_loss"
	MetricStaggerMS                   driver.Metric = "stagger_ms"
	MetricWatermarkCatchUpMaxSeconds  driver.Metric = "watermark_catch_up_max_s"
	MetricWatermarkCursorMissed       driver.Metric = "watermark_cursor_missed"
)

// MetricTimeoutMS is the Kafka client's request timeout
// (kafka_leader.go, kafka_restart.go).
const (
	MetricTimeoutMS driver.Metric = "timeout_ms"
)

// The figures of the Kafka leader failovers (kafka_leader_measure.go),
// under a case's prefix ("kill.acks_all.lost").
const (
	MetricAckedDuringFault        driver.Metric = "acked_during_fault"
	MetricAppendsResumeSeconds    driver.Metric = "appends_resume_s"
	MetricBackSeconds             driver.Metric = "back_s"
	MetricConsumerDuplicates      driver.Metric = "consumer_duplicates"
	MetricDeliveriesResumeSeconds driver.Metric = "deliveries_resume_s"
	MetricElectionSeconds         driver.Metric = "election_s"
	MetricHeldSeconds             driver.Metric = "held_s"
	MetricLogDuplicates           driver.Metric = "log_duplicates"
	MetricLost                    driver.Metric = "lost"
	MetricLostDuringFault         driver.Metric = "lost_during_fault"
	MetricMinISRAfterElection     driver.Metric = "min_isr_after_election"
	MetricPhantom                 driver.Metric = "phantom"
	MetricSlowestMS               driver.Metric = "slowest_ms"
	MetricUndelivered             driver.Metric = "undelivered"
	MetricWholeSeconds            driver.Metric = "whole_s"
	MetricWritableSeconds         driver.Metric = "writable_s"
)

// The figures of kafka-broker-restart (kafka_restart.go), most under a
// case's prefix ("sigterm.down_s").
const (
	MetricAckedWhileDown         driver.Metric = "acked_while_down"
	MetricControllerMoves        driver.Metric = "controller_moves"
	MetricDualWriteGapAnswers    driver.Metric = "dual_write_gap_answers"
	MetricExitSeconds            driver.Metric = "exit_s"
	MetricFullSize               driver.Metric = "full_size"
	MetricGapIDsDelivered        driver.Metric = "gap_ids_delivered"
	MetricGapNeverAnswers        driver.Metric = "gap_never_answers"
	MetricGapNeverIDsDelivered   driver.Metric = "gap_never_ids_delivered"
	MetricMaxFailedMS            driver.Metric = "max_failed_ms"
	MetricP99FailedMS            driver.Metric = "p99_failed_ms"
	MetricReadyz200AfterSeconds  driver.Metric = "readyz_200_after_s"
	MetricReadyz503AfterSeconds  driver.Metric = "readyz_503_after_s"
	MetricReadyzFailed           driver.Metric = "readyz_failed"
	MetricRecovered              driver.Metric = "recovered"
	MetricSlowFailedSentDown     driver.Metric = "slow_failed_sent_down"
	MetricSlowFailedSentStarting driver.Metric = "slow_failed_sent_starting"
	MetricSlowFailedSentStopping driver.Metric = "slow_failed_sent_stopping"
	MetricSlowFailureMS          driver.Metric = "slow_failure_ms"
	MetricUndeliveredRows        driver.Metric = "undelivered_rows"
)

// The figures of the LISTEN through pgbouncer experiment (listen.go).
const (
	MetricReceivedDirect     driver.Metric = "received_direct"
	MetricReceivedPgbouncer  driver.Metric = "received_pgbouncer"
	MetricServiceExitSeconds driver.Metric = "service_exit_s"
	MetricServiceRefused     driver.Metric = "service_refused"
)

// The figures of notify-serializes-commits (notify.go) besides the
// series' (NotifyKey), under a version's prefix for a private server.
const (
	MetricDebounceIntervalMS    driver.Metric = "debounce_interval_ms"
	MetricDebouncedOverNoneAt16 driver.Metric = "debounced_over_none_at_16"
	MetricInTxOverNoneAt16      driver.Metric = "in_tx_over_none_at_16"
	MetricPointSeconds          driver.Metric = "point_s"
)

// The families of notify-serializes-commits' series (notify.go,
// NotifyKey): commits/s, commit p99, NOTIFYs sent and received, per
// mode and committers ("tps_in_tx_16").
const (
	MetricNotifyP99MSOf    driver.MetricPrefix = "p99_ms_"
	MetricNotifyReceivedOf driver.MetricPrefix = "received_"
	MetricNotifySentOf     driver.MetricPrefix = "sent_"
	MetricNotifyTPSOf      driver.MetricPrefix = "tps_"
)

// The figures of the pg_auto_failover experiments (pgauto.go).
const (
	MetricRejoinSeconds driver.Metric = "rejoin_s"
	MetricRejoined      driver.Metric = "rejoined"
	MetricSettleSeconds driver.Metric = "settle_s"
)

// The figures of the Postgres failovers (pgfailover_count.go), under a
// side's prefix ("queue.writes_resume_s").
const (
	MetricAbsent                 driver.Metric = "absent"
	MetricAsyncCutSeconds        driver.Metric = "async_cut_s"
	MetricDeliveriesStallSeconds driver.Metric = "deliveries_stall_s"
	MetricPromotionSeconds       driver.Metric = "promotion_s"
	MetricResyncEvents           driver.Metric = "resync_events"
	MetricSeen                   driver.Metric = "seen"
	MetricSlotSafeSeconds        driver.Metric = "slot_safe_s"
	MetricWritesResumeSeconds    driver.Metric = "writes_resume_s"
	MetricWritesStallSeconds     driver.Metric = "writes_stall_s"
)

// The figures of the RabbitMQ failovers (rmqcount.go).
const (
	MetricDeliveryResumeSeconds driver.Metric = "delivery_resume_s"
	MetricDeliveryResumed       driver.Metric = "delivery_resumed"
	MetricDeliveryStallSeconds  driver.Metric = "delivery_stall_s"
	MetricLeaderMovedSeconds    driver.Metric = "leader_moved_s"
	MetricNewSession            driver.Metric = "new_session"
	MetricNewSessionSeconds     driver.Metric = "new_session_s"
	MetricProbeBack             driver.Metric = "probe_back"
	MetricProbeHeld             driver.Metric = "probe_held"
	MetricPublishResumeSeconds  driver.Metric = "publish_resume_s"
	MetricPublishResumed        driver.Metric = "publish_resumed"
	MetricPublishStallSeconds   driver.Metric = "publish_stall_s"
	MetricRestoredSeconds       driver.Metric = "restored_s"
	MetricServiceReconnects     driver.Metric = "service_reconnects"
	MetricUnknownDelivered      driver.Metric = "unknown_delivered"
	MetricUnknownStranded       driver.Metric = "unknown_stranded"
)

// MetricRepetitions is toast-rewrite's updates per cell (toast.go).
const (
	MetricRepetitions driver.Metric = "repetitions"
)

// The families of toast-rewrite (toast.go), per compression, size and
// update (toastKey: "pglz_2MiB_rewrite"): WAL bytes (median and
// smallest), median time; the documents' stored size per compression
// and size ("pglz_2MiB").
const (
	MetricToastMSOf          driver.MetricPrefix = "ms_"
	MetricToastStoredBytesOf driver.MetricPrefix = "stored_bytes_"
	MetricToastWALBytesOf    driver.MetricPrefix = "wal_bytes_"
	MetricToastWALBytesMinOf driver.MetricPrefix = "wal_bytes_min_"
)
