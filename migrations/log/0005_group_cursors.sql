-- Consumer groups, design 2 (GROUPS_DESIGN=cursors on no-kafka, issue 23):
-- one slot feeds every group. The default group's consumer (the one
-- logical decoder) records each batch it reads in deliveries; that table
-- is the shared log, and each other group is a cursor over it, a row of
-- group_cursors, Sequin/PgQ style. A group reads the deliveries rows past
-- its cursor, in (txid, seq) order, only below the xid watermark, records
-- them in group_deliveries and moves its cursor in the same transaction.
--
-- txid is the transaction that recorded the row (one consumer batch is one
-- INSERT: one txid, seq increasing within it). Why not seq alone: seq is
-- taken when a row is inserted, not when it commits, so a transaction that
-- took seq 5 can commit after one that took seq 6; a cursor already at 6
-- would skip 5 for ever. Every transaction whose xid is below
-- pg_snapshot_xmin(pg_current_snapshot()) has ended, so no row can appear
-- later below that watermark: (txid, seq) order read below it never skips.
--
-- Cost in both designs and on kafka (which shares these tables): eight
-- bytes and one more index entry per delivered event, at the index's right
-- edge. Adding the column to an existing deliveries table rewrites it (a
-- volatile default): existing rows get this migration's xid, all of them
-- committed before any later row.

-- +goose Up
ALTER TABLE deliveries ADD COLUMN IF NOT EXISTS txid xid8 NOT NULL DEFAULT pg_current_xact_id();
CREATE INDEX IF NOT EXISTS deliveries_txid_seq ON deliveries (txid, seq);

-- One row per cursor group: the position (txid, seq) of the last
-- deliveries row the group has passed. Deleting the group deletes its
-- cursor (ON DELETE CASCADE): nothing else is held. A group's consumer
-- takes the row FOR UPDATE in each batch's transaction, so two instances
-- never move one cursor from the same position twice.
CREATE TABLE IF NOT EXISTS group_cursors (
    grp      text    PRIMARY KEY REFERENCES groups (name) ON DELETE CASCADE,
    txid     xid8    NOT NULL,
    seq      bigint  NOT NULL,
    moved_at timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE IF EXISTS group_cursors;
DROP INDEX IF EXISTS deliveries_txid_seq;
ALTER TABLE deliveries DROP COLUMN IF EXISTS txid;
