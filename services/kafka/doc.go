// Command kafka is the log pair's specialist side: the same event log on a Kafka topic, with each event also recorded in Postgres.
//
// It serves the log pair's REST contract on :8083, beside
// no-kafka, which serves the same contract on the other side of the
// comparison. Settings come from environment variables (see Config); with
// none set it uses the stack started by `make up` or `docker compose up -d`.
//
// POST /events is a dual write: the event is INSERTed into the messages
// table (committed), then produced to the topic with acks=all; the answer
// comes after both, and a failed produce answers 503 with the row left
// behind in Postgres (the dual-write gap, see docs/log.md). The producer
// (producer.go) is franz-go's client: each request's records go in one
// ProduceSync, idempotent, partitioned on the key exactly as kafka-go's
// Hash balancer did, and concurrent requests share record batches and
// produce requests; kafka-go's Writer stays selectable
// (KAFKA_PRODUCER=kafka-go) only to measure the two side by side. An event
// too large for the topic's max.message.bytes, as the producer counts a
// batch, is a 413 before anything is written.
//
// A consumer-group reader (kafka-go) records each batch in the deliveries
// table (dedup by id) and hands its offsets to the reader, which commits
// them every KAFKA_COMMIT_INTERVAL (1 s; 0: after every batch) and when
// it stops: at-least-once delivery, each event observed once; a crash
// redelivers what was handled since the last commit. Consumer groups (PUT
// /groups/{name}) are Kafka consumer groups on the same topic, their
// start offsets committed before PUT answers (see groups.go). The HTTP
// handlers, types and conformance suite are shared with no-kafka in
// services/kit/contract/log.
//
//	go run ./services/kafka
package main
