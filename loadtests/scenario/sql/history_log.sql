-- The long-lived variant's history for one log-pair schema (issue 16): a
-- day of delivered events, written with set-based SQL. Both sides (log,
-- log_kafka) get the same history. Run with search_path set to the
-- schema, after the services' own goose migrations and a TRUNCATE; @n is
-- the number of delivered events kept, @old the extra ones past
-- retention.
--
-- Ids are version 7 UUIDs of each row's time, as the services issue them
-- (services/kit/ids): the primary key grows at its right edge, as it does
-- in service, instead of splitting random pages.
--
-- Statements are separated by "-- step" lines and run in order, each in
-- its own transaction (VACUUM cannot run inside one).

-- step: @n events over the last 23 hours, inside EVENT_RETENTION's default
-- (24h), then @old 24 to 25 hours old, past it. 64 keys, as the load uses.
INSERT INTO messages (id, type, key, payload, created_at)
SELECT encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid())
           placing substring(int8send(floor(extract(epoch FROM t) * 1000)::bigint) FROM 3) FROM 1 FOR 6), 52, 1), 53, 1), 'hex')::uuid,
       'history.tick', 'k' || (g % 64), jsonb_build_object('n', g), t
FROM generate_series(1, @n::bigint + @old::bigint) AS g,
     LATERAL (SELECT CASE WHEN g <= @old::bigint
                  THEN now() - interval '25 hours' + (g / greatest(@old::float8, 1)) * interval '1 hour'
                  ELSE now() - interval '23 hours' + ((g - @old::bigint) / @n::float8) * interval '23 hours'
             END AS t) AS ts;

-- step: every one of them delivered (the dedup record), in creation order.
INSERT INTO deliveries (id, delivered_at)
SELECT id, created_at + interval '3 ms' FROM messages WHERE type = 'history.tick' ORDER BY created_at;

-- step: vacuumed and analyzed once, as autovacuum would have done by now.
VACUUM (ANALYZE) messages;

-- step
VACUUM (ANALYZE) deliveries;

-- step: churn: the events past retention deleted, as the cleaner deletes
-- them (deliveries first is the cleaner's order too: events, then their
-- dedup rows; here both), leaving dead tuples at the head of both tables.
DELETE FROM messages WHERE type = 'history.tick' AND created_at < now() - interval '24 hours';

-- step
DELETE FROM deliveries d WHERE d.delivered_at < now() - interval '24 hours';
