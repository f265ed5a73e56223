package main

import (
	"errors"
	"io"
	"time"

	"github.com/where-postgres-ends/where-postgres-ends/services/kit/postgres"
)

// The crash-loop guard's rule. A walsender that dies while decoding (a
// segfault in the output plugin: wal2json 2.5 on PostgreSQL 15 has been
// seen to crash right after the consistent point, as in
// eulerto/wal2json#261) takes the whole cluster through crash recovery,
// and every reconnect decodes the same WAL and crashes it again. Without
// a guard the consumer's backoff (at most 5 s) restarts every other
// client's sessions every few seconds.
const (
	// CrashLoopLimit is how many streams in a row may end as a crash
	// (the connection dropped with no error from the server, within
	// CrashWindow of START_REPLICATION) before the guard trips.
	CrashLoopLimit = 3
	// CrashWindow is how soon after START_REPLICATION an end counts as a
	// crash: a stream that ran longer ended for another reason.
	CrashWindow = 10 * time.Second
	// CrashPause is how long the consumer waits before each attempt once
	// the guard has tripped: the server serves its other clients, and
	// the slot keeps every event, so nothing is lost by waiting.
	CrashPause = 2 * time.Minute
)

// crashGuard counts streams that ended as a crash, in a row. Used by the
// consumer's run loop only (one goroutine).
type crashGuard struct {
	inARow int
}

// observe records how a stream ended: err is its error, and streamed is
// when START_REPLICATION succeeded (zero if it never did). It reports
// whether the guard has tripped, so that the next attempt waits
// CrashPause.
func (g *crashGuard) observe(err error, streamed, ended time.Time) bool {
	if crashed(err) && !streamed.IsZero() && ended.Sub(streamed) < CrashWindow {
		g.inARow++
	} else {
		g.inARow = 0
	}
	return g.inARow >= CrashLoopLimit
}

// crashed reports whether err is a connection that dropped without a word
// from the server: an end of file with no SQLSTATE. A server that shuts
// down or terminates the session says so first (57P01, 57P02), and a
// network that fails gives a timeout or a reset, not a clean EOF.
func crashed(err error) bool {
	return err != nil && postgres.SQLSTATE(err) == "" &&
		(errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF))
}
