-- Retention (issue 16): the cleaner removes events the consumer observed
-- longer than EVENT_RETENTION ago, then their deliveries (dedup) rows, in
-- bounded batches, oldest delivery first. This index is what it walks.
-- Undelivered events have no deliveries row, so they are never reached.
--
-- Cost on the hot path: one more index entry per delivered event, at the
-- index's right edge (delivered_at grows with the consumer's batches).
-- deliveries is insert-only (n_tup_upd = 0 on the stack), so there is no
-- HOT update to keep and no fillfactor to set; messages likewise.
--
-- Built without CONCURRENTLY (goose runs this in a transaction): on an
-- existing table of millions of rows the build blocks the consumer's
-- inserts for its duration. An operator with such a table can create the
-- same index first, concurrently (the CONCURRENTLY option); IF NOT EXISTS then
-- skips it here.

-- +goose Up
CREATE INDEX IF NOT EXISTS deliveries_delivered_at ON deliveries (delivered_at);

-- +goose Down
DROP INDEX IF EXISTS deliveries_delivered_at;
