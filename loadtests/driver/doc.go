// Package driver drives one service with an open-model load and records
// what happened, the same way for both services of a pair.
//
// # Pacing and latency
//
// Attack sends requests at a constant arrival rate with
// github.com/tsenart/vegeta/v12 used as a library: a vegeta.Attacker with a
// vegeta.ConstantPacer. Vegeta's pacer hands the n-th tick (n from 0) to a
// worker at elapsed time (n+1)/rate and, when every worker is busy, starts
// another worker (up to MaxWorkers) rather than waiting, so a slow server
// does not slow the arrivals down. Vegeta itself measures each Result's
// Latency from the moment a worker picked the tick up (Result.Timestamp),
// not from the moment the request was due: a tick delayed because all
// workers were busy (MaxWorkers reached) or because the pacer goroutine
// was descheduled on a loaded machine would hide that delay (coordinated
// omission). Attack therefore recomputes every latency from the intended
// send time, began + (Seq+1)/rate, where began is captured by wrapping the
// pacer (its first Pace call receives the elapsed time since vegeta's own
// start), and keeps vegeta's figure as ServiceTime. Percentiles come from
// an HdrHistogram (github.com/HdrHistogram/hdrhistogram-go), 1 µs to 1 h,
// 3 significant digits.
//
// # Rounds
//
// A Point is one measurement (a rate, a document size) taken over several
// rounds. Order rotates the sides every round (A B, B A, A B, ...), RunPoint
// calls the scenario's SideFunc for each side in that order, and Summarize
// computes, for every metric, the median across rounds with the min–max per
// side and the A/B ratio of every round. A Run (every point of one command,
// plus the machine, the server versions and the settings) is written as
// one JSON file under the results folder (WriteRun). The file holds
// figures, statuses and settings only: its notes are incidents, and the
// sentences that explain its figures are generated beside the scenarios
// (scenario.Explain); Prose finds a sentence that slipped in.
//
// # Validity
//
// Validate gives every side of every point a Status (ok, failed with its
// reason, not run, or stand-in for FerretDB answering as MongoDB) and
// every ceiling search one, from what was recorded: a round's error, no
// metric, a phase that sent nothing, accepted nothing or failed FailShare
// or more of its requests (sheds apart), a point the aborted run never
// reached. WriteRun stores them; ReadRun derives them for files written
// before they existed. FailedPoints lists what is not valid.
//
// # Progress
//
// A Progress, given to every AttackSpec of a command, reports the attacks:
// a progress bar on a terminal, one line with the outcome of each attack
// elsewhere (no carriage-return redraws in a log), each labelled with its
// step of the command's plan and the time left.
package driver
