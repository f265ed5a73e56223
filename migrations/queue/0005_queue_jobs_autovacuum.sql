-- The queue table's autovacuum (issue 16). queue_jobs stays the size of
-- the backlog, but every task leaves three dead tuples in it (the insert's
-- row is updated by the claim, then deleted at completion; retries and
-- lease renewals add more). With the default trigger, a vacuum waits for
-- dead tuples to reach 50 + 20% of the live rows: on a table that is
-- nearly empty between bursts the percentage means nothing, and after a
-- burst the dead entries stay in queue_jobs_run_at, which every claim
-- walks. The Postgres docs' per-table storage parameters let one table
-- vacuum on an absolute count instead: scale factor 0 and a threshold of
-- 1000 dead (or inserted) tuples, and the same for ANALYZE so the planner
-- keeps seeing a small table. Autovacuum still visits a table at most once
-- per autovacuum_naptime (1 min by default); vacuuming a backlog-sized
-- table is cheap, so no-rabbitmq also vacuums it itself every
-- VACUUM_INTERVAL while tasks finish (services/no-rabbitmq/vacuum.go).
--
-- No fillfactor: no update of this table is HOT (claims and lease renewals
-- change run_at, which queue_jobs_run_at indexes), and pg_stat_user_tables
-- on the stack shows n_tup_hot_upd = 0 after 215,000 tasks. Free space
-- kept for HOT updates would stay unused.
--
-- The rabbitmq service applies this migration to its own (unused)
-- queue_jobs as well; it changes nothing there.

-- +goose Up
ALTER TABLE queue_jobs SET (
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 1000,
    autovacuum_vacuum_insert_scale_factor = 0,
    autovacuum_vacuum_insert_threshold = 1000,
    autovacuum_analyze_scale_factor = 0,
    autovacuum_analyze_threshold = 1000
);

-- +goose Down
ALTER TABLE queue_jobs RESET (
    autovacuum_vacuum_scale_factor,
    autovacuum_vacuum_threshold,
    autovacuum_vacuum_insert_scale_factor,
    autovacuum_vacuum_insert_threshold,
    autovacuum_analyze_scale_factor,
    autovacuum_analyze_threshold
);
