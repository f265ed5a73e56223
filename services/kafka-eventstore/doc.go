// Command kafka-eventstore is the event store trio's Kafka side (:8091).
// Every event is one record of a single-partition topic, keyed by its
// stream: the partition's offset is the global position. Kafka's producer
// has no expected-version parameter, so the service accepts only "any" and
// answers a concrete expected version with 422 naming the missing
// capability. Reading one stream means consuming the whole partition and
// filtering by key; records_scanned counts every record consumed. The REST
// contract and its handlers are shared (package contract/eventstore).
package main
