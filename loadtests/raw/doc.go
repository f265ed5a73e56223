// Package raw measures the engines' own limits, without any service: raw
// pgx loops on a scratch schema (one-row INSERT+COMMIT, batched INSERT,
// SKIP LOCKED claim+delete in batches of 256, wal2json decoding through
// one logical slot), raw amqp091 publish (pipelined publisher confirms)
// and consume (prefetch, multiple acks), and raw kafka-go produce
// (batched, acks=all) and fetch (Conn.ReadBatch). The NOTIFY series
// (notify.go) measures one-row commits from 1 to 16 committers plain,
// with pg_notify in the transaction, and with a pglisten.Debouncer
// notifying after them, while one connection LISTENs.
//
// Each loop runs a few seconds; Measure runs them all and returns a
// Results, written to results/<id>-raw.json by the raw and results
// commands. Limit and PercentOfRaw turn a service's throughput into a
// share of its engine's limit, measured in the same run, so that a
// reader sees what the service costs on top of the engine.
//
// With the Postgres loops, MeasureRetention (retention.go) compares the
// two ways of removing old history, the services' batched cleaner and
// dropped day partitions, and measures claims over a head of dead tuples
// and after VACUUM (issue 16); its outcome is Results.Retention.
package raw
