// Package advise is the decision framework as a command: for a reader's
// workload (pair, rate, payload, consumer groups, replay, team size, ...)
// it answers the reference's five questions, in its order, and the
// project's sixth (data shape and size) with this machine's thresholds,
// read from the committed results/*.json through package report's
// verdicts (so a failed figure is never used as a number). It says how
// far the workload is from the measured range and ends with one line:
// Postgres, the specialist, or "measure it" when the workload lies outside
// what was measured.
package advise
