// Package eventstore is the event store trio's bench, run as
//
//	go run ./loadtests eventstore <append|point-read|catch-up> [flags]
//
// It drives the three services (no-kurrentdb :8090, kurrentdb :8089,
// kafka-eventstore :8091) through the same REST contract over HTTP
// (Bench) on the shared driver: the append scenario (Append, a declared
// value: its modes read-then-append and blind, its growing and reset
// series) is closed loops (driver.Loop) in interleaved rounds
// (driver.RunPoints), and every scenario writes a driver.Run to
// results/<UTC time>-eventstore-<scenario>.json. LoadRuns reads those
// (converting the older bench's results/eventstore-<scenario>.json on
// load) beside the other pairs' runs, and FromRuns turns them into
// Results. `make results` runs it with the other pairs, and package
// report renders its RESULTS.md section from the same list of runs as
// every other section. A service
// that does not answer is reported as "not run here", never estimated.
// Each scenario records its engines' store sizes at its start
// (StoreState); append loops count late and in-flight operations
// instead of dropping them; the point read measures only a stream that
// holds the same events on every engine.
//
// Two more commands write results files of their own, which FromRuns
// reads into Results.Long and Results.Cleanup: eventstore-long (Long, long.go:
// one stream of 100,000 events per engine loaded by paged reads, by the
// service's fold and from a snapshot stream, with time, requests,
// records touched and memory) and eventstore-cleanup (Cleanup,
// cleanup.go: one stream deleted from Postgres in batches with appends
// and a subscriber running, and Kafka's retention and compaction on
// topics of their own holding the same stream).
//
// The defaults are the sizes (16 workers, 64 streams, 30 s per
// engine and round, 3 rounds, 6 catch-up runs of 500 events); flags shrink
// them for a quick run.
package eventstore
