-- The long-lived variant's history for one queue-pair schema (issue 16):
-- what a day of a busy queue leaves in the business records, written with
-- set-based SQL in seconds instead of replayed through the service. Both
-- sides of the pair (queue, queue_rabbitmq) get the same history, so that
-- they age alike. Run with search_path set to the schema, after the
-- services' own goose migrations and a TRUNCATE; @n is the number of
-- finished tasks kept, @old the extra ones past retention.
--
-- Ids are version 7 UUIDs of each row's time, as the services issue them
-- (services/kit/ids): the primary key grows at its right edge, as it does
-- in service, instead of splitting random pages.
--
-- Statements are separated by "-- step" lines and run in order, each in
-- its own transaction (VACUUM cannot run inside one).

-- step: @n finished tasks processed over the last 23 hours, inside
-- TASK_RETENTION's default (24h), then @old processed 24 to 25 hours ago,
-- past it: the cleaner's work.
INSERT INTO tasks (id, kind, payload, status, attempts, enqueued_at, delivered_at, processed_at)
SELECT encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid())
           placing substring(int8send(floor(extract(epoch FROM t) * 1000)::bigint) FROM 3) FROM 1 FOR 6), 52, 1), 53, 1), 'hex')::uuid,
       'history', jsonb_build_object('n', g), 'done', 1,
       t, t + interval '2 ms', t + interval '5 ms'
FROM generate_series(1, @n::bigint + @old::bigint) AS g,
     LATERAL (SELECT CASE WHEN g <= @old::bigint
                  THEN now() - interval '25 hours' + (g / greatest(@old::float8, 1)) * interval '1 hour'
                  ELSE now() - interval '23 hours' + ((g - @old::bigint) / @n::float8) * interval '23 hours'
             END AS t) AS ts;

-- step: vacuumed and analyzed once, as autovacuum would have done by now
-- on a table that old (and so that no insert-triggered autovacuum starts
-- in the middle of the measurements).
VACUUM (ANALYZE) tasks;

-- step: churn: the rows past retention deleted, as the cleaner deletes
-- them, leaving dead tuples at the head of the tasks_done index...
DELETE FROM tasks WHERE kind = 'history' AND processed_at < now() - interval '24 hours';

-- step: ...and one finished task in twenty updated (a retried task's
-- record rewritten), leaving dead row versions spread over the table.
UPDATE tasks SET attempts = attempts + 1 WHERE kind = 'history' AND (payload->>'n')::bigint % 20 = 7;
