// Package report turns results files (package driver's Run) into what a
// reader sees: the terminal table printed after a run (Table), the demo's
// side-by-side tables (Demo), and RESULTS.md with its SVG charts (Write,
// charts drawn with gonum.org/v1/plot) and the claims table: every numeric
// claim of the reference measurements, what was measured here, and a
// verdict (holds / does not hold / inconclusive when the rounds disagree
// / failed run when an input is not valid / not measurable here, with
// why), and the
// event-store bench's section (EventStoreSection) from its runs, which
// come in the same list of runs as every other pair's
// (eventstore.LoadRuns). It
// also renders the README's generated block (Findings, WriteREADME): a verdict
// card per pair (Verdicts, Card: "Use Postgres when … / Use <specialist>
// when …" with the measured thresholds and each figure's confidence) and
// the reference's decision questions answered with the same numbers, between marker comments, so that the README cannot drift
// from the results.
//
// The report knows the pairs it is given (Use): each a Pair, built in
// this package (Queue, Log, Documents, Cache, EventStore) and registered
// by the load driver's pair table, from which every list of the report
// derives (sections, claims order, cards, findings, advise).
//
// A value whose point or side is not valid (driver.Status: failed, not
// run) is never printed as a figure: tables, charts and claims show its
// status in words ("failed: …"), a chart marks it instead of drawing it,
// and a ratio is printed only when both sides are valid and not 0.
// FailedPoints lists them, and PublishDecision decides whether a results
// run may publish them.
//
// Numbers measured against FerretDB are labelled FerretDB, never MongoDB:
// the documents pair's B side is named "mongodb (FerretDB …)" whenever the
// run's buildInfo said FerretDB, and the claims that compare with MongoDB
// are "not measurable here" on such runs.
package report
