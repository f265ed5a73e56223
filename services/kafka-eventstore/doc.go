// Command kafka-eventstore is the event store trio's Kafka side (:8091).
// Every event is one record keyed by its stream. By default
// (KAFKA_PARTITIONS=1, the reference's design) the topic has one
// partition, whose offset is the global position. Keyed
// (KAFKA_PARTITIONS=P > 1), a stream's records go to the partition
// murmur2(stream id) picks, a read scans that partition only, and a
// subscription delivers each partition in order with a cursor over all of
// them as its position (keyed.go): there is no global order. Kafka's producer
// has no expected-version parameter, so the service accepts only "any" and
// answers a concrete expected version with 422 naming the missing
// capability. Reading one stream means consuming its whole partition and
// filtering by key; records_scanned counts every record consumed. The REST
// contract and its handlers are shared (package contract/eventstore).
package main
