// Package scenario holds the load scenarios of the three pairs (queue,
// log, documents) and what they share: an Env that makes sure both
// services of a pair answer (starting them as child processes with
// package launch when they are not running, or when a variant needs a
// different environment), and the side function every rate point uses:
// POST /stats/reset, a constant-rate attack (package driver), GET /stats
// and the pair's progress endpoint (/queue or /consumer) right after the
// attack, a settle wait until the backlog drains, then GET /stats and the
// progress endpoint again.
//
// The queue and log scenarios are declared values (QueueScenario,
// LogScenario: pair, load shape, ceiling latency, variant environment and
// default options) run by one RateScenario.Run; documents has its own
// shape (Documents).
//
// The pairs without a backlog search the ceiling of one synchronous
// operation each with the same search (CeilingOp, opceiling.go:
// runCeiling and Judge, a step offering the operation at its rate): the
// documents pair's containment search and profile write on its data set
// (documents_ceiling.go), the cache's read on each side's default mode
// (cache_ceiling.go) and the event store's append to a fresh stream
// (eventstore_ceiling.go, RunEventStoreCeiling). Each step first proves
// its start within a bound: the data set counted, the pair's own
// processes quiet (quietWhy), a probe answered.
//
// The scale-out scenario (RunScaleOut) starts its own instances of the
// queue pair, 1, 2 and 4 per side on one schema or one queue, as
// competing consumers.
// The throughput scenario (ThroughputScenario, throughput.go) posts
// batches from closed-loop senders: what a side accepts. Its sustainable
// search (sustain.go) offers batches open loop, at fixed rates, to find
// the highest rate at which a side's backlog stays flat and its
// end-to-end p99 stays under SustainSLO, each search on a freshly
// started service with its tables truncated.
//
// What explains a run's figures is no part of its results file: Explain
// generates those sentences from the run's settings and points, each
// beside the scenario it explains, for the report to print.
//
// Side A of every pair is the Postgres service (no-rabbitmq, no-kafka,
// no-mongodb), side B the other, so every ratio reads "Postgres ÷ X".
package scenario
