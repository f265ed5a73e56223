-- Fan-out's second Postgres design (no-rabbitmq, FANOUT_DESIGN=cursors;
-- issue 23 item 2): a task posted with a kind that has subscribers is
-- stored ONCE, as a row of fanout_messages, and each subscriber reads the
-- rows past its own cursor (fanout_cursors), PgQ / pgmq-topic style. Only
-- a copy that fails gets a row of its own: it moves into tasks and
-- queue_jobs under its copy id, where the ordinary retries and dead
-- letters take it. A copy's status is derived: its tasks row if it has
-- one, else done once a batch of its subscriber passed it
-- (fanout_batches), else queued. The rabbitmq service and FANOUT_DESIGN=
-- copies apply this too and leave the tables empty.

-- +goose Up
CREATE TABLE IF NOT EXISTS fanout_messages (
    -- id is the posted task's id, its first copy's; copy i's id is
    -- fanout_copy_id(id, i) (queue.CopyID), so a copy's id finds its
    -- message through this primary key: the ids that differ from it in
    -- the last six bits are one index range.
    id          uuid        PRIMARY KEY,
    -- xid is the inserting transaction's id, the position's first part.
    -- A reader reads only rows whose xid is below the oldest transaction
    -- still running (pg_snapshot_xmin): a row's place in commit order is
    -- not its place in any sequence, and reading past a row whose
    -- transaction has not committed yet would move the cursor over it
    -- for good.
    xid         xid8        NOT NULL DEFAULT pg_current_xact_id(),
    kind        text        NOT NULL,
    -- subscribers in FANOUT's order at the enqueue: copy i is
    -- subscribers[i+1]'s, whatever FANOUT says later.
    subscribers text[]      NOT NULL,
    payload     jsonb       NOT NULL DEFAULT '{}',
    fail_times  integer     NOT NULL DEFAULT 0 CHECK (fail_times >= 0),
    enqueued_at timestamptz NOT NULL
);
-- What a reader walks: a kind's rows past a cursor, in position order.
CREATE INDEX IF NOT EXISTS fanout_messages_position ON fanout_messages (kind, xid, id);

-- One row per (kind, subscriber): the position (xid, id) of the last
-- message it has recorded outcomes for. Created at start for FANOUT's
-- subscribers at position zero; a subscriber removed from FANOUT keeps its
-- row, and holds back the retention of the messages it has not passed,
-- until the row is deleted (as a replication slot would).
CREATE TABLE IF NOT EXISTS fanout_cursors (
    kind       text NOT NULL,
    subscriber text NOT NULL,
    upto_xid   xid8 NOT NULL DEFAULT '0',
    upto_id    uuid NOT NULL DEFAULT '00000000-0000-0000-0000-000000000000',
    PRIMARY KEY (kind, subscriber)
);

-- One row per batch a subscriber recorded (the cursor's moves): when it
-- read the batch and when it committed it, the delivered_at and
-- processed_at of the batch's done copies. A batch row goes only once no
-- message up to its position is left.
CREATE TABLE IF NOT EXISTS fanout_batches (
    kind       text        NOT NULL,
    subscriber text        NOT NULL,
    upto_xid   xid8        NOT NULL,
    upto_id    uuid        NOT NULL,
    read_at    timestamptz NOT NULL,
    done_at    timestamptz NOT NULL,
    PRIMARY KEY (kind, subscriber, upto_xid, upto_id)
);

-- fanout_copy_id is queue.CopyID: the message id with its last byte
-- XORed with the copy's index (0-based).
CREATE OR REPLACE FUNCTION fanout_copy_id(message uuid, i integer) RETURNS uuid
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN encode(set_byte(uuid_send(message), 15, get_byte(uuid_send(message), 15) # i), 'hex')::uuid;

-- fanout_copies: the copies that have no tasks row, as task records. The
-- batch that passed a copy is the first of its subscriber at or past the
-- message's position; none yet: the copy is queued (also while a reader
-- holds it: a batch shows no "running").
CREATE OR REPLACE VIEW fanout_copies AS
SELECT c.id, m.kind || '@' || s.sub AS kind, m.payload, m.fail_times,
       CASE WHEN b.done_at IS NULL THEN 'queued' ELSE 'done' END AS status,
       CASE WHEN b.done_at IS NULL THEN 0 ELSE 1 END AS attempts,
       m.enqueued_at, b.read_at AS delivered_at, b.done_at AS processed_at, NULL::text AS last_error,
       m.id AS message_id, s.sub AS subscriber
  FROM fanout_messages m
 CROSS JOIN LATERAL unnest(m.subscribers) WITH ORDINALITY AS s(sub, n)
 CROSS JOIN LATERAL (SELECT fanout_copy_id(m.id, (s.n - 1)::integer) AS id) c
  LEFT JOIN LATERAL (
       SELECT b.read_at, b.done_at FROM fanout_batches b
        WHERE b.kind = m.kind AND b.subscriber = s.sub AND (b.upto_xid, b.upto_id) >= (m.xid, m.id)
        ORDER BY b.upto_xid, b.upto_id LIMIT 1) b ON true
 WHERE NOT EXISTS (SELECT 1 FROM tasks t WHERE t.id = c.id);

-- task_records: every task record of either design, what the
-- conformance suite and an operator read.
CREATE OR REPLACE VIEW task_records AS
SELECT id, kind, payload, fail_times, status, attempts, enqueued_at, delivered_at, processed_at, last_error FROM tasks
UNION ALL
SELECT id, kind, payload, fail_times, status, attempts, enqueued_at, delivered_at, processed_at, last_error FROM fanout_copies;

-- +goose Down
DROP VIEW IF EXISTS task_records;
DROP VIEW IF EXISTS fanout_copies;
DROP FUNCTION IF EXISTS fanout_copy_id(uuid, integer);
DROP TABLE IF EXISTS fanout_batches;
DROP TABLE IF EXISTS fanout_cursors;
DROP TABLE IF EXISTS fanout_messages;
