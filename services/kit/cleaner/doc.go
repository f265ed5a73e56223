// Package cleaner removes what a service keeps past its retention: the
// finished task records of the queue pair and the delivered events (and
// their dedup rows) of the log pair. Every run of the services adds to
// those history tables; without a cleaner nothing ever removes a row, and
// the tables (and the latencies that read them) grow with every load run.
//
// A Cleaner runs Jobs in a loop, one pass every Config.Interval. A pass
// calls each job's Delete with the retention and a bounded batch size
// until a call removes fewer rows than the batch: every call is one short
// statement (its own transaction, bounded by StatementTimeout), so a
// backlog of millions of rows is removed in many small steps that never
// hold locks or a snapshot for long. What a job may remove is the job's
// rule (finished, delivered); the cleaner only paces it.
//
// Progress is in /stats as counters: StatRemovedPrefix+job name (rows
// removed), StatPasses, StatErrors and StatLastRun (the Unix time in
// seconds of the last pass's end, a time rather than a count), and the
// latency StatBatch (each delete statement).
//
// A service creates one Cleaner with its jobs, calls Start once it is
// assembled and registers Close as an OnStop hook; Close is safe to call
// twice and before Start.
package cleaner
