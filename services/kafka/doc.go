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
// behind in Postgres (the dual-write gap, see docs/log.md). A consumer-group
// reader records each batch in the deliveries table (dedup by id) and then
// commits its offsets: at-least-once delivery, each event observed once.
// Consumer groups (PUT /groups/{name}) are Kafka consumer groups on the
// same topic, their start offsets committed before PUT answers (see
// groups.go). The HTTP handlers, types and conformance suite are shared with no-kafka
// in services/kit/contract/log.
//
//	go run ./services/kafka
package main
